"""The /gemma command router: split the text, find the subcommand, run it, turn errors into replies."""

from __future__ import annotations

import logging
import shlex
import uuid

from handlers.context import ActionContext, CommandContext
from handlers.registry import COMMANDS, Command, find_action
from handlers.reply import Reply, error_reply
from skills.errors import UserFacingError, failure_class

log = logging.getLogger(__name__)


# Our limit on a command's text (not Slack's: it documents none for slash commands): the longest question
# pasted into `/gemma ask` fits many times over; beyond it, one clear error in the ack and nothing runs.
MAX_COMMAND_CHARS = 8000


def too_long(text: str) -> Reply | None:
    """The refusal of a command text over MAX_COMMAND_CHARS (checked before any parsing), else None."""
    if len(text or "") <= MAX_COMMAND_CHARS:
        return None
    return error_reply(
        f"That command is too long ({len(text):,} characters; at most {MAX_COMMAND_CHARS:,}).",
        "Shorten it: a question, or a few options, fits well within the limit.",
    )


def parse(text: str) -> tuple[str, list[str]]:
    """'/gemma status svc' arrives as text 'status svc'. Unbalanced quotes fall back to whitespace split.
    Callers check `too_long` first: shlex reads a character at a time."""
    try:
        parts = shlex.split(text or "")
    except ValueError:
        parts = (text or "").split()
    if not parts:
        return "help", []
    return parts[0].lower(), parts[1:]


def lookup(name: str) -> Command | None:
    return COMMANDS.get(name)


def help_reply(unknown: str | None = None, topic: str | None = None) -> Reply:
    """The list of commands (usage lines from their parsers), or one command's help (`help CMD`)."""
    if topic is not None:
        cmd = lookup(topic.lower())
        return command_help(cmd) if cmd is not None else help_reply(unknown=topic)
    title = f"Unknown command `{unknown}`. Here is what I can do:" if unknown else "gemma-sre: what I can do"
    lines = [
        f"`/gemma {c.parser.short_usage()}` — {c.summary}" for c in sorted(COMMANDS.values(), key=lambda c: c.name)
    ]
    reply = Reply(title=title, ephemeral=True).add(text="\n".join(lines))
    reply.context = "`/gemma help COMMAND` or `/gemma COMMAND --help` shows a command's options."
    return reply


def command_help(cmd: Command) -> Reply:
    return Reply(title=f"`/gemma {cmd.name}`: {cmd.summary}", ephemeral=True).add(code=cmd.parser.format_help())


def help_for(name: str, args: list[str]) -> Reply | None:
    """The answers no handler gives: `help [CMD]`, an unknown command, `CMD --help`."""
    if name == "help":
        return help_reply(topic=args[0] if args else None)
    cmd = lookup(name)
    if cmd is None:
        return help_reply(unknown=name)
    return command_help(cmd) if cmd.parser.wants_help(args) else None


async def run_command(ctx: CommandContext, name: str) -> Reply | None:
    cmd = lookup(name)
    quick = help_for(name, ctx.args)
    if cmd is None or quick is not None:
        return quick
    try:
        return await cmd.run(ctx)
    except UserFacingError as exc:
        return error_reply(exc.message, exc.hint, exc.mentions)
    except Exception as exc:  # noqa: BLE001 - logged in _log_failure (a traceback unless a known class)
        # Users get an id to quote, never a traceback; the log line carries the details.
        incident = uuid.uuid4().hex[:8]
        _log_failure(f"command {name}", incident, exc)
        return unexpected(f"`/gemma {name}`", exc, incident, ctx.deps.log_location)


async def run_action(ctx: ActionContext) -> Reply | None:
    fn = find_action(ctx.action_id)
    if fn is None:
        return error_reply(f"This button ({ctx.action_id}) is not handled by this version of the bot.")
    try:
        return await fn(ctx)
    except UserFacingError as exc:
        return error_reply(exc.message, exc.hint, exc.mentions)
    except Exception as exc:  # noqa: BLE001 - logged in _log_failure (a traceback unless a known class)
        incident = uuid.uuid4().hex[:8]
        _log_failure(f"action {ctx.action_id}", incident, exc)
        return unexpected("That action", exc, incident, ctx.deps.log_location)


def _log_failure(what: str, incident: str, exc: Exception) -> None:
    """A failure of a known class (Redis refused, Slack refused the call -- a 429 after slack-sdk's retries --,
    credentials) is one WARNING line naming it: not a bug, so no traceback. Anything else keeps its traceback."""
    kind = failure_class(exc)
    if kind is not None:
        log.warning("%s failed (error id %s): %s", what, incident, kind[0])
    else:
        log.exception("%s failed (error id %s)", what, incident)


def unexpected(what: str, exc: Exception, incident: str, log_location: str) -> Reply:
    """What failed, the kind of failure when we can tell (Redis, Slack, credentials) and what to do, and where
    the log line with this error id is."""
    kind = failure_class(exc)
    where = f"Details: {log_location}, at error id {incident}."
    if kind is None:
        return error_reply(f"{what} failed unexpectedly (error id {incident}).", where)
    happened, todo = kind
    return error_reply(f"{what} failed (error id {incident}): {happened}.", f"{todo} {where}")

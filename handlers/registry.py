"""Subcommands and interactive actions register here; feature modules add themselves with a decorator.

`handlers/commands/` is imported as a whole at start (see `load_all`), so adding a command is adding a file.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from handlers.args import ArgsFn, CommandParser
from handlers.context import ActionContext, CommandContext
from handlers.reply import Reply

CommandFn = Callable[[CommandContext], Awaitable[Reply | None]]
ActionFn = Callable[[ActionContext], Awaitable[Reply | None]]


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    parser: CommandParser  # the command's arguments, declared once: parsing, usage, help and errors
    run: CommandFn  # parses ctx.args into ctx.opts, then calls the handler
    ack: str  # the "working on it" line sent within Slack's 3 s
    kind: str = "read"  # its share of background work (bot/fair_share.py): "write" for commands that plan a write

    @property
    def usage(self) -> str:
        return self.parser.usage_line()


COMMANDS: dict[str, Command] = {}
ACTIONS: dict[str, ActionFn] = {}
# Modal submissions checked before Slack's answer: block id -> error shown inline (empty: go ahead).
ViewCheckFn = Callable[[ActionContext], Awaitable[dict[str, str]]]
VIEW_CHECKS: dict[str, ViewCheckFn] = {}


def command(
    name: str,
    summary: str,
    args: ArgsFn | None = None,
    *,
    ack: str = "Working on it…",
    free_text: bool = False,
    hint: str | Callable[[], str] = "",
    kind: str = "read",
) -> Callable[[CommandFn], CommandFn]:
    """Register a subcommand; `args` declares its arguments on the command's parser (none: it takes none)."""

    def deco(fn: CommandFn) -> CommandFn:
        if name in COMMANDS:
            raise RuntimeError(f"command {name!r} registered twice")
        parser = CommandParser(name, summary, free_text=free_text, hint=hint)
        if args is not None:
            args(parser)

        async def run(ctx: CommandContext) -> Reply | None:
            ctx.opts = parser.parse(ctx.args)  # bad words end here, with the command's usage
            return await fn(ctx)

        COMMANDS[name] = Command(name=name, summary=summary, parser=parser, run=run, ack=ack, kind=kind)
        return fn

    return deco


def action(action_id: str) -> Callable[[ActionFn], ActionFn]:
    """Register a button/modal handler. Prefix-match ids end with '*' (e.g. 'gemma_bench_*')."""

    def deco(fn: ActionFn) -> ActionFn:
        if action_id in ACTIONS:
            raise RuntimeError(f"action {action_id!r} registered twice")
        ACTIONS[action_id] = fn
        return fn

    return deco


def view_check(callback_id: str) -> Callable[[ViewCheckFn], ViewCheckFn]:
    """Register a check a modal submission must pass; its errors are shown in the modal, to that user only."""

    def deco(fn: ViewCheckFn) -> ViewCheckFn:
        VIEW_CHECKS[callback_id] = fn
        return fn

    return deco


def find_action(action_id: str) -> ActionFn | None:
    if action_id in ACTIONS:
        return ACTIONS[action_id]
    for key, fn in ACTIONS.items():
        if key.endswith("*") and action_id.startswith(key[:-1]):
            return fn
    return None


def load_all() -> None:
    """Import every module under handlers/commands so their decorators run (idempotent)."""
    import importlib
    import pkgutil

    from handlers import commands

    for mod in pkgutil.iter_modules(commands.__path__):
        importlib.import_module(f"{commands.__name__}.{mod.name}")

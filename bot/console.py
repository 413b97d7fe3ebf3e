"""`gemma-sre console`: the same handlers and skills as Slack, rendered as text in a terminal.

Buttons are numbered; `click N` presses one (so plan -> confirm flows work here too). Modals ask for their
inputs on the same input stream. `reply TEXT` continues the latest conversation thread (a `/gemma ask`),
`reply N TEXT` the thread of message #N, as a reply in the Slack thread would.

At a terminal: line editing and history (prompt_toolkit's Emacs keys, as readline's; history in
~/.gemma_sre_history or $GEMMA_SRE_HISTORY), Ctrl-C interrupts a running command and leaves at the prompt, Ctrl-D
leaves. The prompt is read without stopping the event loop, so what goes on in the background (a watch a Ctrl-C
left running, the outbox, leases, alerts) goes on while you read, and prints above the prompt, as in Slack.
Errors are an id and one sentence, as in Slack; details go to the log file, never a traceback on the screen.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
import os
import re
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TextIO, cast

from bot.console_terminal import AbovePrompt, LineReader
from bot.deps import Deps
from bot.log_format import JsonFormatter
from bot.wiring import reconcile_writes, resume_canary_watches
from handlers.context import ActionContext, CommandContext
from handlers.registry import load_all
from handlers.render_text import to_text
from handlers.reply import Button, FileOut, Reply
from handlers.router import help_for, parse, run_action, run_command, too_long
from skills.deploy.flow import BACKGROUND
from skills.errors import failure_class

log = logging.getLogger(__name__)

CONSOLE_USER = "console"
CONSOLE_CHANNEL = "console"

BANNER = """gemma-sre console — the Slack bot's commands, in your terminal.
Type `/gemma help` (or just `help`), `click N` or `click LABEL` to press a button, `reply TEXT` to answer in the
latest thread, `quit` (or Ctrl-D) to leave."""

# Slack mrkdwn -> plain text (https://docs.slack.dev/messaging/formatting-message-text/): mentions, channel
# links, special mentions, *bold*, _italic_, ~strike~, ``` fences and the three HTML entities. Inline `code`
# keeps its backticks: in a terminal they still say "type this".
_MENTION = re.compile(r"<@([A-Za-z0-9_.-]+)(?:\|([^>]+))?>")
_CHANNEL = re.compile(r"<#([A-Z0-9]+)(?:\|([^>]*))?>")
_SPECIAL = re.compile(r"<!(here|channel|everyone)(?:\|[^>]*)?>")
_SUBTEAM = re.compile(r"<!subteam\^([A-Z0-9]+)(?:\|([^>]+))?>")
_BARE_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)>")
_WRAP = {
    c: re.compile(
        rf"(?<![\w{re.escape(c)}]){re.escape(c)}(\S(?:[^{re.escape(c)}\n]*?\S)?){re.escape(c)}(?![\w{re.escape(c)}])"
    )
    for c in "*_~"
}


def plain_markup(line: str) -> str:
    """One line of Slack markup as a terminal shows it."""
    line = line.replace("```", "")
    line = _MENTION.sub(lambda m: "@" + (m.group(2) or m.group(1)), line)
    line = _CHANNEL.sub(lambda m: "#" + (m.group(2) or m.group(1)), line)
    line = _SPECIAL.sub(r"@\1", line)
    line = _SUBTEAM.sub(lambda m: "@" + (m.group(2) or m.group(1)), line)
    line = _BARE_LINK.sub(r"\1", line)
    for pattern in _WRAP.values():
        line = pattern.sub(r"\1", line)
    return line.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


class ConsoleResponder:
    def __init__(self, out: TextIO, ask: Callable[[str], str | Awaitable[str | None] | None]) -> None:
        self.channel = CONSOLE_CHANNEL
        self.out = out
        self.ask = ask
        self.buttons: list[tuple[Button, str]] = []  # (button, ts of the message carrying it)
        self.numbers: dict[str, int] = {}  # ts -> the message number people see (#N)
        self.threads: list[str] = []  # ts of messages that have replies, most recent last
        # ts of a thread reply -> its thread's ts: a button clicked in a thread says which thread, as Slack's
        # payload does (message.thread_ts), so a plan asked for in an incident's thread belongs to that incident.
        self.parent: dict[str, str] = {}
        self._shown: dict[str, list[str]] = {}  # ts -> lines last shown (updates print only what changed)
        self._n = itertools.count(1)
        self._last_ts = 0.0
        self.files_dir = os.path.join(tempfile.gettempdir(), "gemma-sre-files")
        self.modal_actions: list[ActionContext] = []

    def _new_ts(self) -> str:
        # Slack-like, unique across console sessions: conversation state in Redis is keyed by thread ts.
        self._last_ts = max(time.time(), self._last_ts + 0.000001)
        ts = f"{self._last_ts:.6f}"
        self.numbers[ts] = next(self._n)
        return ts

    def _lines(self, reply: Reply) -> list[str]:
        # Slack's mrkdwn made plain in prose only: code (log lines, commands) is shown as it is.
        text = to_text(reply, markup=plain_markup)
        for b in reply.buttons:
            n = len(self.buttons) + 1
            if f"  [{b.label}]  ({b.action_id} {b.value})" in text:
                text = text.replace(f"  [{b.label}]  ({b.action_id} {b.value})", f"  [{n}] {b.label}", 1)
            self.buttons.append((b, ""))
        return text.splitlines()

    def _print(self, lines: list[str], prefix: str = "") -> None:
        for line in lines:
            print(prefix + line, file=self.out)
        self.out.flush()

    def _show(self, reply: Reply, ts: str, prefix: str = "") -> None:
        first = len(self.buttons)
        lines = self._lines(reply)
        self.buttons[first:] = [(b, ts) for b, _ in self.buttons[first:]]
        self._shown[ts] = lines
        self._print(lines, prefix)

    async def reply(self, reply: Reply) -> None:
        self._show(reply, self._new_ts())
        for f in reply.files:
            await self.upload(f)

    async def post(self, reply: Reply, thread_ts: str | None = None) -> str:
        ts = self._new_ts()
        if thread_ts and thread_ts not in self.threads:
            n = self.numbers.get(thread_ts, 0)
            print(f"  | (thread #{n}: `reply TEXT` answers here)", file=self.out)
        if thread_ts:
            self.threads = [t for t in self.threads if t != thread_ts] + [thread_ts]
            self.parent[ts] = thread_ts
        self._show(reply, ts, prefix="  | " if thread_ts else "")
        for f in reply.files:
            await self.upload(f, thread_ts or ts)
        return ts

    async def update(self, ts: str, reply: Reply) -> None:
        """An edit in place: print only the lines that are new since the message was last shown."""
        before = set(self._shown.get(ts, []))
        first = len(self.buttons)
        lines = self._lines(reply)
        self.buttons[first:] = [(b, ts) for b, _ in self.buttons[first:]]
        self._shown[ts] = lines
        fresh = [line for line in lines if line not in before]
        if fresh:
            print(f"(message #{self.numbers.get(ts, '?')} updated)", file=self.out)
            self._print(fresh)

    async def upload(self, file: FileOut, thread_ts: str | None = None) -> None:
        path = await asyncio.to_thread(self._save, file)
        print(f"(file {file.filename}: saved to {path})", file=self.out)

    def _save(self, file: FileOut) -> str:
        os.makedirs(self.files_dir, exist_ok=True)
        path = os.path.join(self.files_dir, os.path.basename(file.filename) or "file")
        with open(path, "wb") as fh:
            fh.write(file.content)
        return path

    async def open_modal(self, view: dict[str, Any]) -> None:
        title = (view.get("title") or {}).get("text", "Form")
        print(f"== {title}", file=self.out)
        form: dict[str, str] = {}
        for block in view.get("blocks", []):
            if block.get("type") != "input":
                continue
            label = (block.get("label") or {}).get("text", block.get("block_id", "value"))
            asked = self.ask(f"{label}: ")
            answer = await asked if inspect.isawaitable(asked) else asked
            form[str(block.get("block_id", ""))] = (answer or "").strip()
        self.modal_actions.append(
            ActionContext(
                deps=None,  # type: ignore[arg-type]  # filled in by the console loop
                responder=self,
                user_id=CONSOLE_USER,
                channel_id=CONSOLE_CHANNEL,
                action_id=str(view.get("callback_id", "")),
                value=str(view.get("private_metadata", "")),
                form=form,
            )
        )


async def handle_line(deps: Deps, responder: ConsoleResponder, line: str) -> bool:
    """Run one console line; False means quit."""
    line = line.strip()
    if not line:
        return True
    if line in ("quit", "exit", "/quit"):
        return False
    if line == "reply" or line.startswith("reply "):
        await _thread_reply(deps, responder, line[len("reply") :].strip())
    elif line.startswith("click "):
        found = _find_button(responder, line[len("click ") :].strip())
        if found is None:
            print("No such button. Use its number or its label as shown above.", file=responder.out)
            return True
        button, ts = found
        click = ActionContext(
            deps=deps,
            responder=responder,
            user_id=CONSOLE_USER,
            channel_id=CONSOLE_CHANNEL,
            action_id=button.action_id,
            value=button.value,
            message_ts=ts,
            thread_ts=responder.parent.get(ts, ts),
        )
        await _deliver(responder, await run_action(click))
    else:
        text = line[len("/gemma") :] if line.startswith("/gemma") else line
        quick = too_long(text)
        name, args = parse(text) if quick is None else ("", [])
        quick = quick or help_for(name, args)
        if quick is not None:
            await responder.reply(quick)
            return True
        ctx = CommandContext(
            deps=deps,
            responder=responder,
            user_id=CONSOLE_USER,
            channel_id=CONSOLE_CHANNEL,
            args=args,
            raw_text=text.strip(),
        )
        await _deliver(responder, await run_command(ctx, name))
    await deps.drain(timeout_s=3600)  # background work started by the command (progress, deploys)
    while responder.modal_actions:
        modal = responder.modal_actions.pop(0)
        modal.deps = deps
        await _deliver(responder, await run_action(modal))
        await deps.drain(timeout_s=3600)
    return True


async def _thread_reply(deps: Deps, responder: ConsoleResponder, rest: str) -> None:
    """`reply TEXT` (latest thread) or `reply N TEXT` (the thread of message #N): a Slack thread reply."""
    from handlers.conversation import on_thread_reply

    number, _, text = rest.partition(" ")
    by_number = {n: ts for ts, n in responder.numbers.items()}
    if number.isdigit() and int(number) in by_number:
        thread_ts = by_number[int(number)]
    else:
        text = rest
        thread_ts = responder.threads[-1] if responder.threads else ""
    if not thread_ts or not text.strip():
        print("Usage: `reply TEXT` answers in the latest thread; `reply N TEXT` in thread #N.", file=responder.out)
        return
    if deps.agent is None or await deps.agent.conversations.get(thread_ts) is None:
        print(
            f"Thread #{responder.numbers.get(thread_ts)} is not a conversation (start one with `/gemma ask`).",
            file=responder.out,
        )
        return
    await on_thread_reply(deps, responder, CONSOLE_CHANNEL, thread_ts, CONSOLE_USER, text)


def _find_button(responder: ConsoleResponder, which: str) -> tuple[Button, str] | None:
    """`click 3` presses button 3; `click confirm` the most recent button whose label starts with it."""
    if which.isdigit():
        n = int(which)
        return responder.buttons[n - 1] if 0 < n <= len(responder.buttons) else None
    for button, ts in reversed(responder.buttons):
        if button.label.lower().startswith(which.lower()):
            return button, ts
    return None


async def _deliver(responder: ConsoleResponder, reply: Reply | None) -> None:
    if reply is not None:
        await responder.reply(reply)


def _log_to_file() -> str:
    """The console's logs go to a file: the screen shows an error id and a sentence, never a traceback."""
    path = os.path.join(tempfile.gettempdir(), "gemma-sre-console.log")
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(JsonFormatter())  # the same redacting JSON lines as `serve` (URLs carry tokens)
        root.addHandler(handler)
        root.setLevel(logging.INFO)
    return path


def interrupted_note(watches: int) -> str:
    """What the console says after Ctrl-C stopped a line; `watches`: how many watches that line started go on."""
    if watches:
        return (
            "(interrupted; the watch goes on in the background: its progress and outcome still show here and in "
            "`/gemma audit`. `quit` or Ctrl-D leaves)"
        )
    return "(interrupted; `quit` or Ctrl-D leaves)"


async def interact(deps: Deps, responder: ConsoleResponder, reader: LineReader, log_path: str) -> int:
    """The read -> run -> print loop. Ctrl-C cancels the running command; at the prompt it leaves."""
    loop = asyncio.get_running_loop()
    while True:
        line = await reader.read("gemma> ")
        if line is None:
            if reader.interactive:
                print(file=responder.out)  # leave on a fresh line after ^D / ^C
            break
        before = set(BACKGROUND)  # the watches already going on: a Ctrl-C leaves the ones this line starts
        task = loop.create_task(handle_line(deps, responder, line))
        watching = False
        if reader.interactive:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signal.SIGINT, task.cancel)
                watching = True
        try:
            if not await task:
                break
            if deps.sandbox is not None and deps.sandbox.settle is not None:
                # The command's incident updates (a fix's close notification, its follow-up line) show before
                # the next prompt, in the order Slack shows them; later ones print above the waiting prompt.
                await deps.sandbox.settle(30.0)
        except asyncio.CancelledError:
            if not task.cancelled():
                raise
            # The terminal has echoed ^C already: the line says what happened, once.
            going = [t for t in BACKGROUND if t not in before and not t.done()]
            print(" " + interrupted_note(len(going)), file=responder.out)
        except Exception as exc:
            eid = uuid.uuid4().hex[:8]
            log.exception("console line failed (error id %s): %r", eid, line[:200])
            kind = failure_class(exc)
            said = f": {kind[0]}. {kind[1]}" if kind else " unexpectedly."
            print(f"! That failed (error id {eid}){said} Details are in {log_path}.", file=responder.out)
        finally:
            if watching:
                loop.remove_signal_handler(signal.SIGINT)
    reader.close()
    return 0


async def run_console(
    deps: Deps,
    stdin: TextIO = sys.stdin,
    out: TextIO = sys.stdout,
    *,
    on_start: Callable[[ConsoleResponder], Awaitable[None]] | None = None,
) -> int:
    """`on_start` wires extra surfaces to the console's responder (the sandbox's incident threads)."""
    load_all()
    log_path = _log_to_file()
    deps.log_location = f"the console's log, {log_path}"
    reader = LineReader(stdin, out)
    # At a terminal, what the loop prints while the prompt waits goes above it, the line being typed kept whole.
    responder = ConsoleResponder(cast(TextIO, AbovePrompt(out)) if reader.interactive else out, reader.ask)
    if on_start is not None:
        await on_start(responder)
    await reconcile_writes(deps)  # writes a Ctrl-C'd or killed console left pending get their outcome
    deps.spawn(resume_canary_watches(deps, lambda channel: responder))  # canary watches a stopped console left
    print(BANNER, file=responder.out)
    return await interact(deps, responder, reader, log_path)

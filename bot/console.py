"""`gemma-sre console`: the same handlers and skills as Slack, rendered as text in a terminal.

Buttons are numbered; `click N` presses one (so plan -> confirm flows work here too). Modals ask for their
inputs on the same input stream.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

from bot.deps import Deps
from handlers.context import ActionContext, CommandContext
from handlers.registry import load_all
from handlers.render_text import to_text
from handlers.reply import Button, FileOut, Reply
from handlers.router import help_reply, parse, run_action, run_command

CONSOLE_USER = "console"
CONSOLE_CHANNEL = "console"

BANNER = """gemma-sre console — the Slack bot's commands, in your terminal.
Type `/gemma help` (or just `help`), `click N` or `click LABEL` to press a button, `quit` to leave."""


class ConsoleResponder:
    def __init__(self, out: TextIO, ask: Callable[[str], str | None]) -> None:
        self.channel = CONSOLE_CHANNEL
        self.out = out
        self.ask = ask
        self.buttons: list[tuple[Button, str]] = []  # (button, ts of the message carrying it)
        self._ts = itertools.count(1)
        self.files_dir = os.path.join(tempfile.gettempdir(), "gemma-sre-files")
        self.modal_actions: list[ActionContext] = []

    def _show(self, reply: Reply, ts: str, prefix: str = "") -> None:
        text = to_text(reply)
        for b in reply.buttons:
            self.buttons.append((b, ts))
            n = len(self.buttons)
            text = text.replace(f"  [{b.label}]  ({b.action_id} {b.value})", f"  [{n}] {b.label}", 1)
        for line in text.splitlines():
            print(prefix + line, file=self.out)
        self.out.flush()

    async def reply(self, reply: Reply) -> None:
        self._show(reply, str(next(self._ts)))
        for f in reply.files:
            await self.upload(f)

    async def post(self, reply: Reply, thread_ts: str | None = None) -> str:
        ts = str(next(self._ts))
        self._show(reply, ts, prefix="  | " if thread_ts else "")
        for f in reply.files:
            await self.upload(f, thread_ts or ts)
        return ts

    async def update(self, ts: str, reply: Reply) -> None:
        print(f"(message {ts} updated)", file=self.out)
        self._show(reply, ts)

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
            answer = self.ask(f"{label}: ")
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
    if line.startswith("click "):
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
            thread_ts=ts,
        )
        await _deliver(responder, await run_action(click))
    else:
        text = line[len("/gemma") :] if line.startswith("/gemma") else line
        name, args = parse(text)
        if name == "help":
            await responder.reply(help_reply())
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


async def run_console(
    deps: Deps,
    stdin: TextIO = sys.stdin,
    out: TextIO = sys.stdout,
    *,
    on_start: Callable[[ConsoleResponder], Awaitable[None]] | None = None,
) -> int:
    """`on_start` wires extra surfaces to the console's responder (the sandbox's incident threads)."""
    load_all()
    interactive = stdin.isatty()

    def ask(prompt: str) -> str | None:
        if interactive:
            print(prompt, end="", file=out, flush=True)
        line = stdin.readline()
        return line if line else None

    responder = ConsoleResponder(out, ask)
    if on_start is not None:
        await on_start(responder)
    print(BANNER, file=out)
    while True:
        line = await asyncio.to_thread(ask, "gemma> ")
        if line is None or not await handle_line(deps, responder, line):
            break
    return 0

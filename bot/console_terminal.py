"""The console's terminal: reading lines without stopping the event loop, and printing above the prompt.

At a terminal (stdin and stdout both ttys) prompt_toolkit reads the line as a coroutine: the event loop keeps
running while the prompt waits (a watch a Ctrl-C left running, the outbox, leases, alerts), and what it prints
meanwhile goes above the prompt, the line being typed kept whole (AbovePrompt). From a pipe, lines are read on a
thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import sys
from typing import Any, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.application import get_app_or_none, run_in_terminal
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.output.vt100 import Vt100_Output


class AbovePrompt(io.TextIOBase):
    """The terminal, written so a waiting prompt is not garbled: while prompt_toolkit's prompt is up, whole lines
    go above it (run_in_terminal hides the prompt, writes, and draws it again with what was typed); otherwise
    straight through, in order."""

    def __init__(self, terminal: TextIO) -> None:
        self.terminal = terminal
        self._partial = ""  # a line begun while the prompt was up, written once it ends

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        app = get_app_or_none()
        if app is None or not app.is_running:
            self.terminal.write(self._partial + text)
            self._partial = ""
            return len(text)
        whole, newline, rest = (self._partial + text).rpartition("\n")
        self._partial = rest
        if newline:
            chunk = whole + newline

            def above() -> None:
                self.terminal.write(chunk)
                self.terminal.flush()

            run_in_terminal(above)
        return len(text)

    def flush(self) -> None:
        app = get_app_or_none()
        if app is None or not app.is_running:
            self.terminal.flush()


class LineReader:
    """Lines from the terminal or from a pipe.

    At a terminal (stdin and stdout both ttys) prompt_toolkit reads the line as a coroutine: the event loop
    keeps running while the prompt waits, and output printed meanwhile goes above the prompt (`patch_stdout`
    AbovePrompt). Ctrl-C at the prompt leaves, as Ctrl-D does. From a pipe, lines are read on a thread."""

    def __init__(self, stdin: TextIO, out: TextIO) -> None:
        self.stdin, self.out = stdin, out
        self.interactive = stdin is sys.stdin and stdin.isatty() and out.isatty()
        self.history = os.environ.get("GEMMA_SRE_HISTORY") or os.path.expanduser("~/.gemma_sre_history")
        self._termios: Any = None
        self._lines: Any = None  # the prompt for commands, with history
        self._answers: Any = None  # the prompt for a form's fields: answers are not commands to recall
        if self.interactive:
            self._setup_terminal()

    def _setup_terminal(self) -> None:
        with contextlib.suppress(ImportError, OSError):
            import termios

            self._termios = termios.tcgetattr(self.stdin.fileno())  # restored on exit, whatever happened

        def output() -> Vt100_Output:
            # No cursor-position requests: they size completion menus, which this prompt has none of, and a
            # terminal that does not answer them (a pexpect pty, some multiplexers) would get a warning.
            out = Vt100_Output.from_pty(self.out)
            out.enable_cpr = False
            return out

        try:
            history: Any = FileHistory(self.history)
            history.load_history_strings()  # an unreadable file: keep this session's lines in memory instead
        except OSError:
            history = InMemoryHistory()
        self._lines = PromptSession(history=history, output=output())
        self._answers = PromptSession(history=InMemoryHistory(), output=output())

    def read_sync(self, prompt: str) -> str | None:
        """A line from the pipe (a prompt is not echoed: nobody is reading it)."""
        line = self.stdin.readline()
        return line.rstrip("\n") if line else None

    async def read(self, prompt: str) -> str | None:
        """The next line; None at end of input, or when Ctrl-C is pressed at the prompt."""
        return await self._prompt(self._lines, prompt, sigint=True)

    async def ask(self, prompt: str) -> str | None:
        """A form field's answer (a modal's input), outside the command history; None on Ctrl-C or Ctrl-D.
        Asked while a command runs: the console's own SIGINT handler (cancel that command) stays in place, where
        prompt_toolkit's would remove it on the way out."""
        return await self._prompt(self._answers, prompt, sigint=False)

    async def _prompt(self, session: Any, prompt: str, *, sigint: bool) -> str | None:
        if session is None:
            return await asyncio.to_thread(self.read_sync, prompt)
        try:
            return str(await session.prompt_async(prompt, handle_sigint=sigint))
        except (EOFError, KeyboardInterrupt):
            return None

    def close(self) -> None:
        # prompt_toolkit appends each line to the history file as it is entered; only the terminal's mode is left
        if self._termios is not None:
            with contextlib.suppress(ImportError, OSError):
                import termios

                termios.tcsetattr(self.stdin.fileno(), termios.TCSADRAIN, self._termios)

"""The console at a real terminal (a pty, via pexpect), as a user runs it.

prompt_toolkit draws a fresh prompt as `gemma>` followed by a cursor move (a trailing blank cell is not written),
and redraws an accepted line as `gemma> TEXT`: PROMPT matches only the fresh prompt, so what a line printed is
what comes before the next one. `plain` takes the terminal's control sequences out of what was read."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pexpect

from tests.test_foundation_console import _env

ROOT = Path(__file__).resolve().parent.parent
PROMPT = re.compile(r"gemma>(?=\x1b\[)")
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


def spawn_console(tmp_path: Path, timeout: int = 60, **extra: str) -> pexpect.spawn:
    """`gemma-sre console` in a pty (TERM=xterm), its history in tmp_path; returned at its first prompt."""
    env = _env(
        GEMMA_SRE_HISTORY=str(tmp_path / "history"), TERM="xterm", PYTHONPATH=str(ROOT), HOME=str(tmp_path), **extra
    )
    child = pexpect.spawn(
        sys.executable, ["-m", "bot.cli", "console"], env=env, cwd=str(tmp_path), timeout=timeout, encoding="utf-8"
    )
    child.expect(PROMPT)
    return child


def plain(text: str | None) -> str:
    return _CONTROL.sub("", text or "")


def run_line(child: pexpect.spawn, line: str) -> str:
    """Type a line; what the console printed before its next prompt, as plain text."""
    child.sendline(line)
    child.expect(PROMPT)
    return plain(child.before)


def until_quiet(child: pexpect.spawn, quiet_s: float = 1.5) -> str:
    """What the console prints on its own (background work, above the waiting prompt) until it has been quiet for
    `quiet_s`, as plain text."""
    said = []
    while child.expect([PROMPT, pexpect.TIMEOUT], timeout=quiet_s) == 0:
        said.append(plain(child.before))
    return "".join(said) + plain(child.before if isinstance(child.before, str) else "")

"""What the builders of the labelled outside-Loghub systems share (issue 32): the held-out split each batch fixes
before anything in it is scored, reading a fetched repository's git directory, and writing one system in the
layout bench/log_grouping.py reads.

The split: sort the batch's systems by sha256 of "<source>/<system>" (hex), hold out the first half, rounded up.
tests/test_outside_split.py recomputes it from the manifest on its own, so a system moved between the halves after
a score fails the suite.
"""

from __future__ import annotations

import csv
import hashlib
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

LINE_BREAK = re.compile(r"\r\n|\r|\n")


def heldout_split(names: list[str], source_of: Callable[[str], str]) -> dict[str, str]:
    """name -> "heldout" | "tuning" for one batch; `source_of(name)` is the source prefix hashed with it."""
    order = sorted(names, key=lambda n: hashlib.sha256(f"{source_of(n)}/{n}".encode()).hexdigest())
    held = (len(order) + 1) // 2
    return {n: ("heldout" if i < held else "tuning") for i, n in enumerate(order)}


def git(git_dir: Path, *args: str) -> bytes:
    """A git command's output on a fetched repository's git directory (no work tree)."""
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True, check=True).stdout


def write_system(folder: Path, system: str, rows: list[tuple[str, str]]) -> str:
    """<system>.log (one record a line, a line break inside a record written as the two characters \\n) and
    <system>_structured.csv (LineId, Content, EventId) from (label, content) rows; the CSV's sha256."""
    folder.mkdir(parents=True, exist_ok=True)
    log = "".join(LINE_BREAK.sub(r"\\n", content) + "\n" for _, content in rows)
    (folder / f"{system}.log").write_text(log, encoding="utf-8")
    structured = folder / f"{system}_structured.csv"
    with open(structured, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["LineId", "Content", "EventId"])
        for i, (label, content) in enumerate(rows, 1):
            w.writerow([i, content, label])
    return hashlib.sha256(structured.read_bytes()).hexdigest()


def differs(recorded: dict[str, Any] | None, built: dict[str, Any]) -> bool:
    """Whether a built system disagrees with what the manifest recorded for it (fields it records only)."""
    return recorded is not None and any(k in recorded and recorded[k] != v for k, v in built.items())

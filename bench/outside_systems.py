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
import sys
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


def write_batch(
    recs: dict[str, tuple[list[tuple[str, str]], dict[str, int]]],
    split_of: Callable[[list[str]], dict[str, str]],
    recorded: dict[str, dict[str, Any]],
    out: Path,
    min_records: int,
    list_only: bool = False,
) -> int:
    """Write (or with `list_only`, only list) one batch's systems: those with at least `min_records` records, each
    under out/<split>/<system>, checked against what the manifest `recorded` for it; print a line per system and
    the dropped ones. Exit status: 1 when a built system differs from the manifest or one it names is missing."""
    systems = sorted(s for s, (rows, _) in recs.items() if len(rows) >= min_records)
    split = split_of(systems)
    width = max((len(s) for s in systems), default=0) + 1
    failed = False
    for system in systems:
        rows, dropped = recs[system]
        tags = len({lab for lab, _ in rows})
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(dropped.items())) or "none"
        head = f"{system:<{width}} {split[system]:<8} {len(rows):>4} records {tags:>4} tags"
        if list_only:
            print(f"{head}  dropped: {why}")
            continue
        digest = write_system(out / split[system] / system, system, rows)
        built = {"split": split[system], "records": len(rows), "tags": tags, "structured_sha256": digest}
        note = ""
        if differs(recorded.get(system), built):
            note, failed = "  DIFFERS FROM THE MANIFEST", True
        print(f"{head}  {digest}  dropped: {why}{note}")
    for system, (rows, _) in sorted(recs.items()):
        if len(rows) < min_records:
            print(f"not a system (fewer than {min_records} records): {system} {len(rows)}", file=sys.stderr)
    missing = sorted(set(recorded) - set(systems))
    if missing and not list_only:
        print(f"in the manifest but not built: {', '.join(missing)}", file=sys.stderr)
        failed = True
    return 1 if failed else 0

"""`gemma-sre diagnose --logs FILE|- [--format json|text]`: offline diagnosis of a log file.

Reads JSON lines of Cloud Logging entries (as `gcloud logging read --format=json` / the API return them,
one per line) or plain text lines. Malformed lines are counted and skipped; binary junk and very long lines
do not stop the run. No network, no model.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import BinaryIO

from bot.settings import Settings
from skills.diagnose import Diagnosis, diagnose
from skills.logs import parse_lines

_CHUNK = 1 << 20


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("diagnose", help="diagnose known vLLM / Cloud Run failures in a log file (offline)")
    p.add_argument("--logs", required=True, help="file of Cloud Logging JSON lines or plain text lines; - for stdin")
    p.add_argument("--format", choices=("json", "text"), default="text")
    default_budget = Settings.model_fields["log_token_budget"].default
    p.add_argument("--budget", type=int, default=default_budget, help="token budget of the digest")
    p.set_defaults(func=run)


def _lines(stream: BinaryIO) -> Iterator[bytes]:
    """Lines of any length without holding more than one line (capped) in memory at a time."""
    pending = b""
    while chunk := stream.read(_CHUNK):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        yield from complete
        if len(pending) > 4 * _CHUNK:  # a line with no end in sight: keep its start, drop the middle
            pending = pending[:_CHUNK]
    if pending:
        yield pending


def render_text(d: Diagnosis) -> str:
    out: list[str] = []
    if not d.findings:
        out.append("No known failure found.")
    for f in d.findings:
        out.append(f"[{f.severity.upper()}] {f.kind}: {f.title}")
        if f.caused_by:
            out.append(f"    (a consequence of {f.caused_by}: no fix of its own)")
        out.extend(f"    | {line}" for line in f.evidence)
        out.append(f"  Fix: {f.remediation.summary}")
        out.extend(f"    - {s}" for s in f.remediation.steps)
        for a in f.remediation.actions:
            out.append(f"    > {a.action} {json.dumps(a.params, sort_keys=True)}")
    s = d.digest
    out.append(
        f"\nDigest: {s.lines_in} lines, {s.templates} templates, ~{s.tokens} tokens, "
        f"{s.omitted} templates left out, {s.malformed} malformed lines skipped"
    )
    out.append(d.digest_text)
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    try:
        if args.logs == "-":
            entries, malformed = parse_lines(_lines(sys.stdin.buffer))
        else:
            with open(args.logs, "rb") as fh:
                entries, malformed = parse_lines(_lines(fh))
    except OSError as exc:
        print(f"error: cannot read {args.logs}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    result = diagnose(entries, token_budget=max(200, args.budget), malformed=malformed)
    if args.format == "json":
        print(json.dumps(result.to_report(), indent=2, ensure_ascii=False))
    else:
        print(render_text(result))
    return 0

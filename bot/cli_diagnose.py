"""`gemma-sre diagnose --logs FILE|- [--format json|text]`: offline diagnosis of a log file.

Reads what people have: the JSON array `gcloud logging read --format=json` prints (pretty-printed, read one
entry at a time), JSON lines of Cloud Logging entries (the API's / `--format=json` entries one per line), or
plain text lines. Malformed lines are counted and skipped; binary junk and very long lines do not stop the
run. Input with no log entry at all (empty, `[]`, binary) says so and exits 1. No network, no model.

Any of them may be UTF-8 or, as a Windows shell saves them, UTF-16 or UTF-8 with a byte order mark and CRLF line
ends: the bytes are read as UTF-8 first (skills/logs/input_format.py utf8_chunks), so such a file is text.

Streaming: the input is read in 1 MiB chunks and entries flow one at a time through a LogSieve
(skills/logs/sieve.py), which redacts each in order and keeps a bounded sample per pattern, so memory stays
bounded whatever the input size (figures for 1M and 10M lines: bench/diagnose_memory.py).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator
from typing import BinaryIO

from bot.settings import Settings
from skills.diagnosis.diagnose import diagnose
from skills.diagnosis.findings import Diagnosis
from skills.logs.fetch import Malformed, entry_from_api, iter_line_entries
from skills.logs.input_format import decode_log_bytes, sniff, utf8_chunks
from skills.logs.sieve import LogSieve
from skills.ports import LogEntry

_EXPECTED = (
    "Expected plain text lines, JSON lines of Cloud Logging entries, or the output of "
    "`gcloud logging read --format=json`."
)
_CHUNK = 1 << 20
_MAX_ENTRY = 4 * _CHUNK  # one array element larger than this is not a log entry


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("diagnose", help="diagnose known vLLM / Cloud Run failures in a log file (offline)")
    p.add_argument("--logs", required=True, help="file of Cloud Logging JSON lines or plain text lines; - for stdin")
    p.add_argument("--format", choices=("json", "text"), default="text")
    default_budget = Settings.model_fields["log_token_budget"].default
    p.add_argument("--budget", type=_budget, default=default_budget, help="token budget of the digest (>= 200)")
    p.set_defaults(func=run)


def _budget(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of tokens, not {text!r}") from None
    if n < 200:
        raise argparse.ArgumentTypeError(f"must be at least 200 tokens (a smaller digest holds nothing), not {n}")
    return n


def _chunks(first: bytes, stream: BinaryIO) -> Iterator[bytes]:
    return itertools.chain([first] if first else [], iter(lambda: stream.read(_CHUNK), b""))


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Lines of any length without holding more than one line (capped) in memory at a time."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *complete, pending = pending.split(b"\n")
        yield from complete
        if len(pending) > 4 * _CHUNK:  # a line with no end in sight: keep its start, drop the middle
            pending = pending[:_CHUNK]
    if pending:
        yield pending


def _array_entries(chunks: Iterator[bytes], malformed: Malformed) -> Iterator[LogEntry]:
    """A JSON array of entries (gcloud's --format=json), decoded element by element: memory stays bounded
    by one entry, and a broken element is counted as malformed instead of losing the whole file."""
    decoder = json.JSONDecoder()
    buf = ""
    pos = 0
    started = done = False
    raw = b""
    for chunk in chunks:
        raw += chunk
        try:
            text = raw.decode("utf-8")
            raw = b""
        except UnicodeDecodeError as exc:
            if len(raw) - exc.start < 4:  # a multi-byte character split across chunks: keep its start
                text, raw = raw[: exc.start].decode("utf-8"), raw[exc.start :]
            else:  # invalid bytes: replaced, never carried along (memory stays bounded)
                text, raw = raw.decode("utf-8", "replace"), b""
        buf = buf[pos:] + text
        pos = 0
        while not done:
            while pos < len(buf) and (buf[pos].isspace() or buf[pos] == ","):
                pos += 1
            if pos >= len(buf):
                break
            if not started:
                started, pos = True, pos + 1  # the '['
                continue
            if buf[pos] == "]":
                done = True
                break
            try:
                value, end = decoder.raw_decode(buf, pos)
            except (json.JSONDecodeError, RecursionError):
                if len(buf) - pos > _MAX_ENTRY:  # not an entry we can ever complete: stop here
                    malformed.count += 1
                    return
                break  # probably incomplete: read more
            pos = end
            try:
                entry = entry_from_api(value)
            except (ValueError, TypeError):
                malformed.count += 1
                continue
            yield entry
        if done:
            break  # whatever follows the array is not read (nor kept)
    if started and not done and buf[pos:].strip():
        malformed.count += 1  # the array was cut off


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
    if d.truncated:
        out.append(f"\nNote: {d.truncated}.")
    out.append(
        f"\nDigest: {s.lines_in} lines, {s.templates} templates, ~{s.tokens} tokens, "
        f"{s.omitted} templates left out, {s.malformed} malformed lines skipped"
    )
    out.append(d.digest_text)
    return "\n".join(out)


def _read(stream: BinaryIO) -> tuple[LogSieve, int, bytes]:
    first = stream.read(64 * 1024)
    # UTF-16 / a BOM (a Windows shell's redirect) read as UTF-8 text first; then the format is decided by parsing:
    # `[rank0]:` text is not an array.
    fmt, chunks = sniff(utf8_chunks(_chunks(first, stream)))
    malformed = Malformed()
    if fmt == "json-array":
        entries = _array_entries(chunks, malformed)
    else:
        entries = iter_line_entries(_lines(chunks), malformed)
    return LogSieve().extend(entries), malformed.count, first


def _looks_binary(sample: bytes) -> bool:
    sample = sample[:8192]
    if b"\x00" in sample:
        return True
    text = sample.decode("utf-8", "replace")
    bad = sum(1 for c in text if c == "\ufffd" or (ord(c) < 32 and c not in "\t\r\n"))
    return bad > max(3, len(text) // 10)


def run(args: argparse.Namespace) -> int:
    name = "standard input" if args.logs == "-" else args.logs
    try:
        if args.logs == "-":
            sieve, malformed, first = _read(sys.stdin.buffer)
        else:
            with open(args.logs, "rb") as fh:
                sieve, malformed, first = _read(fh)
    except OSError as exc:
        print(f"error: cannot read {args.logs}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    entries = sieve.kept()
    # Binary bytes that happen to split into "lines" are junk, not entries: counted as malformed, so a binary
    # file says so (exit 1) while junk around real entries does not stop the run.
    readable = [e for e in entries if not _looks_binary(e.text.encode("utf-8", "replace"))]
    malformed += len(entries) - len(readable)
    entries = readable
    if not entries:
        if not decode_log_bytes(first).strip():
            why = "it is empty"
        elif first.startswith(b"\x1f\x8b"):
            why = "it is gzip-compressed (zcat it first)"
        elif _looks_binary(first):
            why = "it looks like binary data, not logs"
        elif first.lstrip().startswith(b"[") and not malformed:
            why = "it is an empty JSON array (did `gcloud logging read` match no entries?)"
        else:
            why = f"none of its {malformed} line(s) or entries could be read as a log entry"
        print(f"error: no log entries in {name}: {why}. {_EXPECTED}", file=sys.stderr)
        return 1
    result = diagnose(entries, token_budget=args.budget, malformed=malformed, truncated=sieve.note())
    result.digest.lines_in = max(result.digest.lines_in, sieve.lines)
    result.digest.truncated = result.digest.truncated or result.truncated  # the JSON report shows the digest
    if args.format == "json":
        print(json.dumps(result.to_report(), indent=2, ensure_ascii=False))
    else:
        print(render_text(result))
    return 0

"""Logs for a service: fetch through the Logs port and condense; parse Cloud Logging entries or plain lines.

`entry_from_api` turns one Cloud Logging entry (the REST JSON shape of `entries.list`, which is also what
the client library's `to_api_repr()` gives) into a LogEntry, so the live adapter and the offline CLI read
entries the same way.
"""

from __future__ import annotations

import codecs
import itertools
import json
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from skills.durations import parse_duration
from skills.errors import InvalidInput
from skills.logs import input_format
from skills.logs.condense import Digest, condense
from skills.logs.redact import redact
from skills.logs.redact_entries import redact_entries
from skills.ports import LogBatch, LogEntry, LogQuery, Logs
from skills.timestamps import parse_timestamp

MAX_LINE_CHARS = 64_000  # a 1 MB line is kept, cut to this; the rest is noise for diagnosis
_SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")


def parse_since(value: str, now: datetime | None = None) -> datetime:
    """'30m', '2h', '1d', '90s' -> an aware datetime that long ago."""
    return (now or datetime.now(UTC)) - parse_duration(value, "--since")


def parse_severity(value: str) -> str:
    v = value.strip().upper()
    v = {"WARN": "WARNING", "ERR": "ERROR", "FATAL": "CRITICAL"}.get(v, v)
    if v not in _SEVERITIES:
        raise InvalidInput(f"Unknown severity {value!r}.", "Use one of " + ", ".join(_SEVERITIES[1:]) + ".")
    return v


def _parse_ts(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_timestamp(value)
    except ValueError:
        return None


def _payload_text(entry: dict[str, Any]) -> str:
    if isinstance(entry.get("textPayload"), str):
        return entry["textPayload"]
    jp = entry.get("jsonPayload")
    if isinstance(jp, dict):
        for key in ("message", "msg", "textPayload", "text", "data"):  # data: Docker's gcplogs driver
            if isinstance(jp.get(key), str):
                return jp[key]
        return json.dumps(jp, sort_keys=True)[:MAX_LINE_CHARS]
    pp = entry.get("protoPayload")
    if isinstance(pp, dict):
        status = pp.get("status")
        msg = (status.get("message") if isinstance(status, dict) else None) or pp.get("methodName") or ""
        return str(msg)
    hr = entry.get("httpRequest")
    if isinstance(hr, dict):
        return f"{hr.get('requestMethod', '')} {hr.get('requestUrl', '')} {hr.get('status', '')}".strip()
    return ""


def entry_from_api(entry: dict[str, Any]) -> LogEntry:
    """One Cloud Logging entry (REST JSON) -> LogEntry, its text redacted before anything else reads it.
    Raises ValueError when it is not an entry."""
    if not isinstance(entry, dict):
        raise ValueError("not a JSON object")
    text = redact(_payload_text(entry))
    hr = entry.get("httpRequest") if isinstance(entry.get("httpRequest"), dict) else {}
    status: int | None = None
    if hr and hr.get("status") is not None:
        try:
            status = int(hr["status"])
        except (TypeError, ValueError):
            status = None
    if not text and status is None:
        raise ValueError("entry has no payload")
    labels = (entry.get("resource") or {}).get("labels") or {}
    sev = entry.get("severity")
    return LogEntry(
        timestamp=_parse_ts(entry.get("timestamp")),
        severity=str(sev).upper() if isinstance(sev, str) and sev else "DEFAULT",
        text=text[:MAX_LINE_CHARS],
        log_name=str(entry.get("logName", ""))[:300],
        revision=str(labels.get("revision_name", ""))[:200] if isinstance(labels, dict) else "",
        http_status=status,
    )


def parse_lines(lines: Iterable[str | bytes]) -> tuple[list[LogEntry], int]:
    """JSON lines of Cloud Logging entries, or plain text lines, or a mix -> (entries, malformed count).

    A line that starts like JSON but does not parse to an entry is malformed: counted and skipped. Binary
    junk is decoded with replacement characters; very long lines are cut. Entries come back redacted (a key
    block spread over several lines included).
    """
    malformed = Malformed()
    entries = list(iter_line_entries(lines, malformed))
    return redact_entries(entries), malformed.count


class Malformed:
    """How many lines or entries a streaming reader skipped."""

    def __init__(self) -> None:
        self.count = 0


def _text_lines(lines: Iterable[str | bytes]) -> Iterator[str | bytes]:
    """The lines as given, unless they are the raw lines of a UTF-16/32 file (a Windows shell's redirect: the
    pieces a binary file splits into at each LF byte, which joined back are the file): then its lines, decoded.
    A byte order mark at the start of the first line is dropped."""
    it = iter(lines)
    first = next(it, None)
    if first is None:
        return
    if isinstance(first, bytes):
        name, _ = input_format.encoding_of(first[:512])
        if name not in (None, "utf-8"):
            pending = b""
            for chunk in input_format.utf8_chunks(itertools.chain([first], it)):  # type: ignore[arg-type]
                *complete, pending = (pending + chunk).split(b"\n")
                yield from complete
            if pending:
                yield pending
            return
        first = first.removeprefix(codecs.BOM_UTF8)
    else:
        first = first.removeprefix("\ufeff")
    yield first
    yield from it


def iter_line_entries(lines: Iterable[str | bytes], malformed: Malformed) -> Iterator[LogEntry]:
    """`parse_lines` one entry at a time, NOT redacted (the caller redacts them, in order: LogSieve)."""
    for raw in _text_lines(lines):
        line = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        if "\x00" in line or _mostly_binary(line):
            malformed.count += 1
            continue
        stripped = line.lstrip()
        if stripped.startswith("{"):
            try:
                yield entry_from_api(json.loads(stripped))
            except (ValueError, TypeError, RecursionError):
                malformed.count += 1
            continue
        yield LogEntry(text=line[:MAX_LINE_CHARS])


_BAD_CHAR = re.compile(r"[\ufffd\x00-\x08\x0a-\x1f]")  # replacement characters, controls but tab


def _mostly_binary(line: str) -> bool:
    sample = line[:2000]
    if sample.isascii() and sample.isprintable():  # the common case, at C speed
        return False
    bad = len(_BAD_CHAR.findall(sample))
    return bad >= 3 or bad > len(sample) // 10


async def fetch_logs(logs: Logs, query: LogQuery) -> LogBatch:
    return await logs.fetch(query)


async def logs_digest(logs: Logs, query: LogQuery, token_budget: int) -> tuple[Digest, LogBatch]:
    """Fetch and condense (CPU work in a thread). The digest states any fetch truncation."""
    import asyncio

    batch = await logs.fetch(query)
    digest = await asyncio.to_thread(condense, batch.entries, token_budget)
    if batch.truncated:
        digest.stats.truncated = batch.truncated
        digest.text = f"Note: {batch.truncated}\n{digest.text}"
    return digest, batch

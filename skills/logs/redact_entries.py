"""Redaction of log entries, first, on their raw text: before lines are split, folded, grouped or masked.

`redact()` masks a secret inside one text, a multi-line entry included (a PEM block in one entry is masked
whole). Cloud Run logs each stdout line as its own entry, and a plain log file is read line by line, so a
private key printed to a log arrives as one entry per line: `-----BEGIN ... PRIVATE KEY-----`, then lines
of base64, then `-----END`. This pass remembers, per stream, that a key block is open and masks its lines
until the block ends, so no line of the key body survives as an ordinary log line.

A block is reassembled across what breaks it up in the field: lines of other instances of the same revision
interleaved with it (they share the stream; up to `MAX_GAP` such lines are read normally while the block stays
open), and a window that starts mid-key (no BEGIN line: redact() masks a bare base64 line of key shape, and that
opens the block, so its shorter last line is masked too).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from skills.logs.redact import MARK, redact
from skills.ports import LogEntry

_BEGIN = re.compile(r"-----BEGIN[A-Z ]*PRIVATE KEY-----")
_END = re.compile(r"-----END[A-Z ]*PRIVATE KEY-----")
# What a line inside a PEM block looks like: base64 (64 per line), blank, or an RFC 1421 header
# (Proc-Type / DEK-Info in encrypted keys).
_BODY = re.compile(r"[A-Za-z0-9+/=\\]{8,}|\s*|(?:Proc-Type|DEK-Info):.*")
_PREFIX = re.compile(r"^\s*(?:\((?:[\w.-]+ )*?(?:rank=\d+ )?pid=\d+\)\s?)?")  # vLLM "(APIServer pid=1) "
_KEY_MARK = MARK.format("private_key")
MAX_GAP = 32  # lines of other content a key block may be interleaved with before it counts as cut off


def _opens_block(raw: str) -> bool:
    begins = [m.end() for m in _BEGIN.finditer(raw)]
    if not begins:
        return False
    return not any(m.start() > begins[-1] for m in _END.finditer(raw))


class EntryRedactor:
    """Redacts entries in order, carrying open key blocks from one entry to the next of the same stream."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, str], int] = {}  # stream -> other lines seen since its last key line

    def text(self, raw: str, stream: tuple[str, str] = ("", "")) -> str:
        if stream in self._open:
            body = _PREFIX.sub("", raw, count=1).strip()
            end = _END.search(raw)
            if end is not None:
                del self._open[stream]
                rest = raw[end.end() :]
                return _KEY_MARK + (redact(rest) if rest.strip() else "")
            if "\n" not in body and _BODY.fullmatch(body):
                if not body:
                    return raw
                self._open[stream] = 0
                return _KEY_MARK
            # Not key material: another instance's line in between, or the block was cut off. Read this line
            # normally; the block stays open for MAX_GAP such lines.
            gap = self._open.pop(stream) + 1
            if gap <= MAX_GAP:
                self._open[stream] = gap
        out = redact(raw)
        # A block left open: seen raw, or already masked to the end of this text by an earlier redact() (the
        # entry reader redacts each entry as it reads it; a masked complete block here at worst masks the
        # base64-looking lines that follow it), or a bare key line whose BEGIN fell outside the window.
        if ("PRIVATE KEY" in raw and _opens_block(raw)) or out.rstrip().endswith(_KEY_MARK):
            self._open[stream] = 0
        return out

    def carries_state(self, e: LogEntry) -> bool:
        """Whether this entry's redaction reads or changes what is carried between entries (an open key
        block); when not, it is plain `redact()` of its text and may run later, on the entries kept."""
        return (e.log_name, e.revision) in self._open or "PRIVATE KEY" in e.text

    def entry(self, e: LogEntry) -> LogEntry:
        text = self.text(e.text, (e.log_name, e.revision))
        return e if text == e.text else e.model_copy(update={"text": text})


def redact_entries(entries: Iterable[LogEntry]) -> list[LogEntry]:
    """Every entry with its secrets masked (entries in time order; idempotent)."""
    r = EntryRedactor()
    return [r.entry(e) for e in entries]

"""Which format a pasted or piped log is in, decided by parsing it, not by its first character.

Three formats are accepted (bot/cli_diagnose.py): the JSON array `gcloud logging read --format=json` prints,
JSON lines of Cloud Logging entries, and plain text lines. Text may start with `[` too (torch's `[rank0]: `,
a `[2026-01-05 10:00:00]` timestamp), so the array is chosen only when the start parses as one: `[`, then `]`
or a JSON object (an entry) followed by `,` or `]`. Anything else is read as lines (JSON lines and plain text
mix freely there; skills/logs/fetch.py parse_lines).

`sniff(chunks)` reads only as far as it needs to decide (at most one entry, MAX_PROBE bytes) and hands back the
format with an iterator that replays what it read followed by the rest: the caller streams the whole input
once, with bounded memory, whichever way it is read.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from typing import Literal

Format = Literal["json-array", "lines"]
MAX_PROBE = 4 << 20  # bytes read to decide; one gcloud entry is far smaller (the CLI caps an entry at this too)

_DECODER = json.JSONDecoder()


def decide(head: str, complete: bool) -> Format | None:
    """The format of text starting with `head`; None when more text is needed (`complete`: nothing follows)."""
    s = head.lstrip("\ufeff \t\r\n")
    if not s:
        return None if not complete else "lines"
    if s[0] != "[":
        return "lines"
    rest = s[1:].lstrip()
    if not rest:
        return None if not complete else "lines"
    if rest[0] == "]":
        return "json-array"
    if rest[0] != "{":
        return "lines"  # `[rank0]:`, `[2026-...]`, `[INFO]`: text
    try:
        value, end = _DECODER.raw_decode(rest)
    except json.JSONDecodeError:
        # Cut off inside the first object (read more, up to MAX_PROBE), or broken: then it is not an array.
        return None if not complete else "lines"
    after = rest[end:].lstrip()
    if not after:
        return None if not complete else "lines"
    return "json-array" if isinstance(value, dict) and after[0] in ",]" else "lines"


def sniff(chunks: Iterable[bytes]) -> tuple[Format, Iterator[bytes]]:
    """(format, every chunk of the input from the start): reads ahead only until `decide` can tell."""
    it = iter(chunks)
    read: list[bytes] = []
    size = 0
    fmt: Format | None = None
    while fmt is None:
        chunk = next(it, None)
        if chunk is not None:
            read.append(chunk)
            size += len(chunk)
        complete = chunk is None or size >= MAX_PROBE
        fmt = decide(b"".join(read).decode("utf-8", "replace"), complete)
        if fmt is None and complete:
            fmt = "lines"
    return fmt, itertools.chain(read, it)

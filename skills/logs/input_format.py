"""Which format a pasted or piped log is in, decided by parsing it, not by its first character.

Three formats are accepted (bot/cli_diagnose.py): the JSON array `gcloud logging read --format=json` prints,
JSON lines of Cloud Logging entries, and plain text lines. Text may start with `[` too (torch's `[rank0]: `,
a `[2026-01-05 10:00:00]` timestamp), so the array is chosen only when the start parses as one: `[`, then `]`
or a JSON object (an entry) followed by `,` or `]`. Anything else is read as lines (JSON lines and plain text
mix freely there; skills/logs/fetch.py parse_lines).

`sniff(chunks)` reads only as far as it needs to decide (at most one entry, MAX_PROBE bytes) and hands back the
format with an iterator that replays what it read followed by the rest: the caller streams the whole input
once, with bounded memory, whichever way it is read.

Before any of that, `utf8_chunks(chunks)` turns the bytes into UTF-8 (issue 52): a log saved by a Windows shell is
UTF-16LE with a byte order mark (Windows PowerShell 5.1's `>` and `Out-File` write "Unicode" by default, per the
PowerShell docs' about_Character_Encoding) or UTF-8 with one (`Out-File -Encoding utf8`, Notepad), with CRLF line
ends. The BOM decides (the Unicode standard's signatures: EF BB BF, FF FE, FE FF; UTF-32's FF FE 00 00 / 00 00 FE
FF); without one, UTF-16 is taken only when its start is plainly text in it (a NUL beside every printable ASCII
byte). Anything else passes through untouched, so binary stays binary and is still refused. CRLF needs no
conversion: lines are split on LF and their CR is dropped (skills/logs/fetch.py iter_line_entries).
`decode_log_bytes(data)` does the same for a whole file in memory.
"""

from __future__ import annotations

import codecs
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


# Byte order marks, longest first (UTF-32LE's starts with UTF-16LE's).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_SNIFF = 512  # bytes looked at to tell UTF-16 without a BOM
_TEXT_BYTE = frozenset(range(0x20, 0x7F)) | {0x09, 0x0A, 0x0D}


def encoding_of(head: bytes) -> tuple[str | None, int]:
    """(the encoding of a start `head`, the length of its BOM); None: UTF-8 (or binary), passed through as is."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name, len(bom)
    pairs = [(head[i], head[i + 1]) for i in range(0, len(head) - 1, 2)]
    if len(pairs) >= 8:  # UTF-16 without a BOM: ASCII text with a NUL beside every character
        if sum(a in _TEXT_BYTE and b == 0 for a, b in pairs) >= 0.95 * len(pairs):
            return "utf-16-le", 0
        if sum(a == 0 and b in _TEXT_BYTE for a, b in pairs) >= 0.95 * len(pairs):
            return "utf-16-be", 0
    return None, 0


def utf8_chunks(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The same input as UTF-8 bytes, chunk by chunk (bounded memory): a BOM is dropped and UTF-16/32 decoded.
    Undecodable bytes become U+FFFD, as everywhere else logs are decoded."""
    it = iter(chunks)
    head = b""
    for chunk in it:
        head += chunk
        if len(head) >= _SNIFF:
            break
    name, skip = encoding_of(head[:_SNIFF])
    if name is None:
        if head:
            yield head
        yield from it
        return
    if name == "utf-8":
        yield head[skip:]
        yield from it
        return
    decoder = codecs.getincrementaldecoder(name)("replace")
    for chunk in itertools.chain([head[skip:]], it):
        text = decoder.decode(chunk)
        if text:
            yield text.encode("utf-8")
    tail = decoder.decode(b"", final=True)
    if tail:
        yield tail.encode("utf-8")


def decode_log_bytes(data: bytes) -> str:
    """A whole log file's text, whatever `utf8_chunks` can read it as."""
    return b"".join(utf8_chunks([data])).decode("utf-8", "replace")

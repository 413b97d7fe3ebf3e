"""The input is read as the user meant it: the format is decided by parsing (skills/logs/input_format.py).

Property: every corpus log (tests/data/field_logs*), given to `gemma-sre diagnose` as plain text, as JSON lines
of Cloud Logging entries, or as the JSON array `gcloud logging read --format=json` prints (compact or
pretty-printed), arriving in chunks of any size, yields the same log lines and the same diagnosis. Text that
starts with `[` (torch's `[rank0]:`) is text; an array that does not parse as one is read as lines.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.cli_diagnose import _read
from skills.diagnosis.diagnose import diagnose
from skills.logs.input_format import decide, decode_log_bytes, sniff
from skills.logs.redact_entries import redact_entries
from skills.logs.sieve import LogSieve
from skills.ports import LogEntry

DATA = Path(__file__).parent / "data"
LOGS = sorted(p for d in DATA.glob("field_logs*") for p in d.glob("*.log"))
FORMATS = ("text", "json-lines", "json-array", "json-array-pretty")


class Chunked(io.RawIOBase):
    """A stream that returns at most the next drawn size per read, as pipes do."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data, self.sizes, self.pos = data, sizes or [1 << 20], 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        size = self.sizes[0]
        self.sizes = self.sizes[1:] or self.sizes
        out = self.data[self.pos : self.pos + min(size, n if n >= 0 else size)]
        self.pos += len(out)
        return out


def _lines(path: Path) -> list[str]:
    # A corpus log may be UTF-16 or carry a BOM, as a Windows shell saves it (tests/data/field_logs_issue52_*).
    return [line for line in decode_log_bytes(path.read_bytes()).splitlines() if line.strip()]


def render(path: Path, fmt: str) -> bytes:
    lines = _lines(path)
    if fmt == "text":
        return path.read_bytes()
    entries = [
        {"textPayload": line, "timestamp": f"2026-01-05T10:{i // 60 % 60:02d}:{i % 60:02d}Z", "severity": "DEFAULT"}
        for i, line in enumerate(lines)
    ]
    if fmt == "json-lines":
        return "\n".join(json.dumps(e) for e in entries).encode()
    return json.dumps(entries, indent=2 if fmt.endswith("pretty") else None).encode()


def expected(path: Path, fmt: str) -> list[str]:
    # In text, a line that starts with `{` is taken for a JSON line (skills/logs/fetch.py parse_lines).
    lines = _lines(path)
    return [x for x in lines if not x.lstrip().startswith("{")] if fmt == "text" else lines


@pytest.mark.parametrize("path", LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(FORMATS), sizes=st.lists(st.integers(min_value=1, max_value=5000), max_size=6))
def test_every_corpus_log_reads_the_same_in_every_format(path: Path, fmt: str, sizes: list[int]) -> None:
    sieve, malformed, _ = _read(Chunked(render(path, fmt), sizes))  # type: ignore[arg-type]
    entries = sieve.kept()
    # diagnose streams its input through a LogSieve (bounded memory): the same sieve over the expected entries
    want = LogSieve().extend(expected_entries(path, fmt)).kept()
    assert [e.text for e in entries] == [e.text for e in want]
    assert diagnose(entries).root_kinds() == diagnose(want).root_kinds()
    assert malformed == (len(_lines(path)) - len(expected(path, "text")) if fmt == "text" else 0)


def expected_entries(path: Path, fmt: str) -> list[LogEntry]:
    """The lines each format must yield, redacted the way every reader redacts them."""
    return redact_entries([LogEntry(text=t) for t in expected(path, fmt)])


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_text_that_is_not_an_array_is_never_taken_for_one(tail: str) -> None:
    for head in ("[rank0]: ", "[2026-01-05 10:00:00] ", "[INFO] ", "[{not json "):
        text = head + tail
        assert decide(text, complete=True) == "lines"
        fmt, chunks = sniff([text.encode()])
        assert fmt == "lines" and b"".join(chunks) == text.encode()


def test_an_array_is_an_array_even_when_its_first_entry_is_split_across_chunks() -> None:
    data = render(LOGS[0], "json-array-pretty")
    fmt, chunks = sniff(data[i : i + 3] for i in range(0, len(data), 3))
    assert fmt == "json-array" and b"".join(chunks) == data
    assert decide("[]", complete=True) == "json-array"
    assert decide('[{"textPayload": "x"}', complete=False) is None  # cannot tell yet


def test_the_cli_reads_a_rank0_traceback_as_text() -> None:
    # Before issue 31 this was taken for a JSON array and refused ("no log entries").
    log = (
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "/x/vllm/engine/async_llm_engine.py", line 431, in from_engine_args\n'
        "[rank0]: RuntimeError: Unsupported head size: 32\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "bot.cli", "diagnose", "--logs", "-", "--format", "json"],
        input=log.encode(),
        capture_output=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr.decode()
    report = json.loads(out.stdout)
    assert [f["kind"] for f in report["findings"]] == ["engine_startup_failed"]

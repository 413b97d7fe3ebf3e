"""`gemma-sre diagnose` streams: memory stays bounded whatever the input size (entries flow through a sieve that
keeps a bounded sample per pattern), the finding at the end of a long log is still found, and redaction stays
right where a secret or a private key straddles a read-chunk boundary or repeats past what is kept."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

from tests.test_diagnose_inputs import _cli

CHUNK = 1 << 20  # bot/cli_diagnose.py reads 1 MiB at a time
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 22.05 GiB"
HF = "hf_" + "Q7x" * 12
KEY_BODY = ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" + str(i) * 12 for i in range(6)]


def _noise(i: int) -> str:
    return (
        f"(APIServer pid=1) INFO 04-28 06:{i // 60 % 60:02d}:{i % 60:02d} [loggers.py:123] Engine 000: Avg prompt "
        f"throughput: {i % 977}.5 tokens/s, Running: {i % 7} reqs, Waiting: 0 reqs, request id req-{i:08x}"
    )


def _write(path: Path, n: int) -> None:
    with path.open("w") as fh:
        for i in range(n):
            fh.write(_noise(i) + "\n")
        fh.write(f"ERROR {OOM}\n")


def _peak_mib(path: Path) -> float:
    tracemalloc.start()
    try:
        result = _cli("diagnose", "--logs", str(path), "--format", "json")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert any("memory" in f["kind"] or "oom" in f["kind"].lower() for f in report["findings"]), report["findings"]
    return peak / 2**20


def test_memory_does_not_grow_with_the_input(tmp_path: Path) -> None:
    small, large = tmp_path / "small.log", tmp_path / "large.log"
    _write(small, 20_000)
    _write(large, 120_000)  # six times the lines, ~25 MB
    grown = _peak_mib(large) - _peak_mib(small)
    assert grown < 8, f"peak memory grew {grown:.1f} MiB for 100k more lines"


def _straddling(tmp_path: Path, as_json: bool) -> Path:
    """A log where a token and a private key's lines fall across the first 1 MiB boundary, then the key is
    printed again many times (past what the sieve keeps per pattern)."""
    lines: list[str] = []
    size = 0
    i = 0
    while size < CHUNK - 40:
        lines.append(_noise(i))
        size += len(lines[-1]) + 1 + (40 if as_json else 0)
        i += 1
    lines.append(f"WARNING token rejected: {HF} for model google/gemma-4-12b-it")
    key = ["-----BEGIN PRIVATE KEY-----", *KEY_BODY, "-----END PRIVATE KEY-----"]
    lines.extend(key)
    for _ in range(50):
        lines.extend(key)
        lines.append(f"WARNING token rejected: {HF} again")
    lines.append(f"ERROR {OOM}")
    path = tmp_path / ("export.json" if as_json else "export.log")
    if as_json:
        entries = [{"textPayload": t, "severity": "INFO", "timestamp": "2026-04-28T06:00:00Z"} for t in lines]
        path.write_text(json.dumps(entries, indent=2))
    else:
        path.write_text("\n".join(lines) + "\n")
    return path


def test_redaction_holds_across_chunk_boundaries_and_sampling(tmp_path: Path) -> None:
    for as_json in (False, True):
        path = _straddling(tmp_path, as_json)
        for fmt in ("json", "text"):
            result = _cli("diagnose", "--logs", str(path), "--format", fmt)
            assert result.returncode == 0, result.stderr
            out = result.stdout.decode()
            assert HF not in out and not any(body[:40] in out for body in KEY_BODY), (as_json, fmt)
            if fmt == "text":  # the digest text (the JSON report holds its figures only)
                assert "REDACTED" in out
            else:
                assert "counted, not kept" in json.loads(out)["digest"]["truncated"]


def test_a_sampled_run_says_what_it_left_out(tmp_path: Path) -> None:
    path = tmp_path / "many.log"
    _write(path, 5_000)
    out = _cli("diagnose", "--logs", str(path)).stdout.decode()
    assert "5001 entries" in out and "counted, not kept" in out
    assert "5001 lines" in out  # the digest counts every line read

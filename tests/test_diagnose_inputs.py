"""`gemma-sre diagnose` reads what people have (gcloud's JSON array, JSON lines, plain text), says so when
there is nothing to read (empty, `[]`, binary) with a non-zero exit, and `| head` prints no traceback."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
from pathlib import Path

from bot.cli import main as cli_main
from tests.example_data import SCENARIOS

ROOT = Path(__file__).resolve().parent.parent
KV = SCENARIOS / "example-kv-cache-insufficient.jsonl"


def _process(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """The installed command as a real process (exit code and streams as a shell sees them)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args], input=stdin, capture_output=True, env=env, timeout=120
    )


def _cli(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """The same command line run in this process (bot.cli.main, the real stdin/stdout/stderr swapped for
    buffers): a new interpreter per case costs ~1 s of CPU, and _process covers the process boundary once."""
    out, err = io.StringIO(), io.StringIO()
    real = sys.stdin, sys.stdout, sys.stderr
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    sys.stdout, sys.stderr = out, err
    try:
        code = cli_main(list(args))
    finally:
        sys.stdin, sys.stdout, sys.stderr = real
    return subprocess.CompletedProcess(list(args), code, out.getvalue().encode(), err.getvalue().encode())


def _entries() -> list[dict[str, object]]:
    return [json.loads(line) for line in KV.read_text().splitlines() if line.strip()]


def test_gcloud_json_array_pretty_printed(tmp_path: Path) -> None:
    f = tmp_path / "gcloud.json"
    f.write_text(json.dumps(_entries(), indent=2))  # what `gcloud logging read --format=json` prints
    run = _cli("diagnose", "--logs", str(f), "--format", "json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert [x["kind"] for x in report["findings"] if x["caused_by"] is None] == ["kv_cache_insufficient"]
    assert report["digest"]["malformed"] == 0


def test_json_array_on_stdin_in_small_pieces_with_a_broken_element(tmp_path: Path) -> None:
    body = json.dumps(_entries(), indent=1)
    body = body[:-1].rstrip() + ',\n {"no": "payload"}\n]'  # one element that is not an entry
    run = _cli("diagnose", "--logs", "-", "--format", "json", stdin=body.encode())
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["findings"] and report["digest"]["malformed"] == 1


def test_json_lines_and_plain_text_still_work(tmp_path: Path) -> None:
    assert _cli("diagnose", "--logs", str(KV)).returncode == 0
    run = _cli("diagnose", "--logs", "-", stdin=b"INFO starting\nERROR CUDA out of memory. Tried to allocate 2 GiB\n")
    assert run.returncode == 0 and b"Digest:" in run.stdout


def test_nothing_to_read_says_so_and_fails() -> None:
    for stdin, why in (
        (b"", b"it is empty"),
        (b"  \n\n", b"it is empty"),
        (b"[]\n", b"empty JSON array"),
        (bytes(range(256)) * 50, b"binary"),
        (b'{"a": 1}\n{"b": 2}\n', b"could be read as a log entry"),
    ):
        run = (_process if not stdin else _cli)("diagnose", "--logs", "-", stdin=stdin)  # the first: a real process
        assert run.returncode == 1, (stdin[:20], run.stdout, run.stderr)
        assert why in run.stderr and b"Traceback" not in run.stderr
        assert b"No known failure" not in run.stdout


def test_piping_into_head_prints_no_traceback(tmp_path: Path) -> None:
    big = tmp_path / "big.log"
    big.write_text("".join(f"ERROR worker {i} failed: CUDA out of memory #{i}\n" for i in range(20000)))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for args in (["diagnose", "--logs", str(big), "--budget", "100000"], ["--help"]):
        cli = " ".join([sys.executable, "-m", "bot.cli", *args])
        run = subprocess.run(["bash", "-c", f"{cli} | head -n 1"], capture_output=True, env=env, timeout=120, cwd=ROOT)
        assert b"Traceback" not in run.stderr and b"BrokenPipe" not in run.stderr, run.stderr
        assert run.stdout.count(b"\n") == 1


def test_binary_that_splits_into_lines_is_still_not_logs() -> None:
    """Bytes with newlines in them parse as "lines"; before, such a file was diagnosed and exited 0."""
    noise = bytes((i * 197 + 13) % 256 for i in range(6000))  # high bytes and the odd newline, no NUL
    noise = noise.replace(b"\x00", b"\x01")
    for data, why in (
        (noise, b"binary data, not logs"),
        (gzip.compress(b"INFO vLLM API server started\n" * 50), b"gzip-compressed (zcat it first)"),
    ):
        run = _cli("diagnose", "--logs", "-", stdin=data)
        assert run.returncode == 1, (run.stdout[:200], run.stderr)
        assert why in run.stderr and b"No known failure" not in run.stdout


def test_a_budget_below_a_useful_digest_is_refused() -> None:
    run = _process("diagnose", "--logs", "-", "--budget", "-5", stdin=b"INFO hello\n")
    assert run.returncode == 2 and b"--budget: must be at least 200 tokens" in run.stderr

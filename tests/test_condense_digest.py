"""Condensation: tracebacks folded, errors never dropped under a tight budget, omissions stated; and the
offline `gemma-sre diagnose` CLI on junk, huge lines and malformed JSON."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.cli_diagnose import run
from skills.logs.condense import condense, fold
from skills.ports import LogEntry
from skills.tokens import estimate_tokens
from tests.example_data import SCENARIOS

T0 = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)


def _e(i: int, text: str, sev: str = "DEFAULT") -> LogEntry:
    return LogEntry(timestamp=T0 + timedelta(seconds=i), severity=sev, text=text, log_name="stderr")


TRACEBACK = [
    "(EngineCore_DP0 pid=312) Traceback (most recent call last):",
    '(EngineCore_DP0 pid=312)   File "/usr/lib/python3.12/vllm/v1/engine/core.py", line 700, in run_engine_core',
    "(EngineCore_DP0 pid=312)     engine_core = EngineCoreProc(*args, **kwargs)",
    "(EngineCore_DP0 pid=312) ValueError: No available memory for the cache blocks.",
    "(EngineCore_DP0 pid=312) INFO 01-05 10:00:09 [core.py:90] shutting down",
]


def test_tracebacks_fold_into_one_event_across_entries_and_prefixes() -> None:
    events = fold([_e(i, t) for i, t in enumerate(TRACEBACK)])
    assert len(events) == 2
    tb = events[0]
    assert tb.traceback and tb.severity == "ERROR" and len(tb.lines) == 4
    assert tb.head == "ValueError: No available memory for the cache blocks."
    assert events[1].severity == "INFO"


def test_budget_keeps_every_error_and_says_what_was_left_out() -> None:
    noise = [
        _e(
            i,
            f"INFO 01-05 10:00:00 [x.py:1] request {i} for tenant-{i % 400} done path /v1/{i % 97}/x{i % 41}",
        )
        for i in range(3000)
    ]
    words = [
        "alpha",
        "bravo",
        "charlie",
        "delta",
        "echo",
        "foxtrot",
        "golf",
        "hotel",
        "india",
        "juliet",
        "kilo",
    ]
    uniques = [
        _e(
            5000 + i,
            f"INFO 01-05 10:00:00 [y.py:2] {words[i % 11]} {words[(i // 11) % 11]} event {words[(i // 121) % 11]} ok",
        )
        for i in range(300)
    ]
    errors = [
        _e(
            9000 + i,
            f"ERROR 01-05 10:00:00 [z.py:3] failure kind {words[i]} in module {words[-1 - i]}",
            "ERROR",
        )
        for i in range(6)
    ]
    d = condense(noise + uniques + errors, token_budget=600)
    for i in range(6):
        assert f"failure kind {words[i]}" in d.text
    assert d.stats.omitted > 0 and "Left out to fit 600 tokens" in d.text
    assert d.stats.tokens <= 700
    assert d.stats.lines_in == 3306
    assert d.text.index("== Errors") < d.text.index("== Other")


def test_examples_are_redacted() -> None:
    d = condense([_e(0, "ERROR 01-05 10:00:00 [a.py:1] login failed password=hunter22 for bob", "ERROR")], 3000)
    assert "hunter22" not in d.text and "[REDACTED:secret]" in d.text


def test_estimate_tokens_is_sane() -> None:
    assert estimate_tokens("") == 0
    assert 8 <= estimate_tokens("The quick brown fox jumps over the lazy dog again.") <= 16


def _run(path: Path, fmt: str, capsys) -> dict | str:  # type: ignore[no-untyped-def]
    code = run(argparse.Namespace(logs=str(path), format=fmt, budget=3000))
    assert code == 0
    out = capsys.readouterr().out
    return json.loads(out) if fmt == "json" else out


def test_cli_survives_junk_huge_lines_and_malformed_json(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "mixed.log"
    kv = (SCENARIOS / "example-kv-cache-insufficient.jsonl").read_bytes()
    junk = bytes(range(256)) * 200
    f.write_bytes(junk + b"\n" + b"x" * 1_100_000 + b"\n" + b'{"broken json\n' + b'{"a": 1}\n' + kv)
    report = _run(f, "json", capsys)
    assert isinstance(report, dict)
    # The KV cache is the cause; "EngineCore failed to start" is its consequence, shown as such.
    assert [(x["kind"], x["caused_by"]) for x in report["findings"]] == [
        ("kv_cache_insufficient", None),
        ("engine_startup_failed", "kv_cache_insufficient"),
    ]
    assert report["findings"][1]["remediation"] == {
        "summary": report["findings"][1]["remediation"]["summary"],
        "steps": [],
        "actions": [],
    }
    assert report["digest"]["malformed"] >= 3
    assert {"lines_in", "templates", "tokens", "omitted"} <= set(report["digest"])
    f0 = report["findings"][0]
    assert set(f0) == {"kind", "title", "severity", "caused_by", "evidence", "remediation"}
    assert {"action": "redeploy", "params": {"max_model_len": 76208}} in f0["remediation"]["actions"]


def test_cli_plain_text_lines(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "plain.log"
    f.write_text(
        "INFO 01-05 10:00:01 [api_server.py:1] vLLM API server version 0.9.2\n"
        "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU "
        "has compute capability 7.5.\n"
    )
    out = _run(f, "text", capsys)
    assert isinstance(out, str) and "bf16_unsupported" in out and "--dtype half" in out
    assert run(argparse.Namespace(logs=str(tmp_path / "missing.log"), format="json", budget=3000)) == 2

"""vLLM lines labelled by call site (issue 53): the labelling and split of bench/log_grouping.py
(tests/data/vllm_call_sites/README.md), and the grouper on lines of the project's real vLLM logs, class by class.
Scores are the bench's; these tests check behaviour."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

from skills.logs.templates import TemplateMiner

REPO = Path(__file__).resolve().parents[1]


def _bench() -> ModuleType:
    path = REPO / "bench" / "log_grouping.py"
    spec = importlib.util.spec_from_file_location("bench_log_grouping", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_log_grouping", module)
    spec.loader.exec_module(module)
    return module


def _groups(lines: list[str]) -> list[int]:
    miner = TemplateMiner()
    gids = [miner.add(line) for line in lines]
    return [miner.group(g) for g in gids]


def test_the_header_is_cut_and_the_call_site_is_the_label() -> None:
    bench = _bench()
    text = (
        "(EngineCore_DP0 pid=7) INFO 10-02 08:01:10 [core.py:77] Initializing a V1 LLM engine\n"
        "Sep 22 23:46:42 host vllm[3619]: INFO 09-22 23:46:42 metrics.py:351] Avg prompt throughput: 5.0 tokens/s\n"
        'INFO:     127.0.0.1:58048 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
        "Traceback (most recent call last):\n"
    )
    assert bench.vllm_labelled(text) == [
        ("Initializing a V1 LLM engine", "core.py:77"),
        ("Avg prompt throughput: 5.0 tokens/s", "metrics.py:351"),
    ]


def test_a_line_continuing_the_record_above_is_not_a_record() -> None:
    # vLLM prints every line of a multi-line message (logger.exception) with the whole header.
    path = REPO / "tests" / "data" / "field_logs" / "vllm17939_sampler_warmup_oom_256.log"
    labelled = _bench().vllm_labelled(path.read_text(encoding="utf-8"))
    messages = [m for m, _ in labelled]
    assert "WorkerProc hit an exception." in messages
    assert "Traceback (most recent call last):" not in messages
    assert len(labelled) == 2


def test_the_split_is_by_log_and_still_the_recorded_one() -> None:
    bench = _bench()
    manifest = json.loads((REPO / "tests" / "data" / "vllm_call_sites" / "manifest.json").read_text("utf-8"))
    assert {log["file"]: log["split"] for log in manifest["logs"]} == bench.vllm_split()
    halves = {split: {n for n, _, _ in bench.load_vllm(split)} for split in ("tuning", "heldout")}
    assert halves["tuning"] and halves["heldout"] and not halves["tuning"] & halves["heldout"]
    # A log stored twice (re-encoded) counts once.
    sources = [log["source"] for log in manifest["logs"]]
    assert len(sources) == len(set(sources))


def test_a_table_with_no_system_built_is_skipped(capsys) -> None:  # type: ignore[no-untyped-def]
    assert _bench().score("Outside Loghub, tuning half", []) is None
    assert "skipped" in capsys.readouterr().out


def test_a_line_cut_at_its_end_is_the_event_of_its_whole_form() -> None:
    # Two ranks print one OOM message; the paste (as a collector may) cut the second inside its last word, a URL.
    path = REPO / "tests" / "data" / "field_logs" / "vllm15105_oom_generic_cuda_graphs_advice.log"
    messages = [m for m, _ in _bench().vllm_labelled(path.read_text(encoding="utf-8"))]
    last = [m.split()[-1] for m in messages]
    assert len(messages) == 2 and last[0] != last[1] and last[0].startswith(last[1])
    g = _groups(messages)
    assert g[0] == g[1]


def test_a_different_last_word_is_still_another_event() -> None:
    # The cut rule is for a long word cut short, not for short words that begin alike (kinds, states).
    path = REPO / "tests" / "data" / "field_logs" / "vllm15105_oom_generic_cuda_graphs_advice.log"
    whole = _bench().vllm_labelled(path.read_text(encoding="utf-8"))[0][0]
    head = whole.rsplit(" ", 1)[0]
    g = _groups([f"{head} Management (cuda)", f"{head} Management (cu)", f"{head} Management (started)"])
    assert g[0] != g[1] and g[0] != g[2]

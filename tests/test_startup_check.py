"""The planner checks itself: vLLM's start-up lines -> figures -> predicted vs actual in the deploy thread,
kept in Redis, and shown by /gemma fit. Lines are shaped exactly as vLLM formats them (skills/capacity/startup_log.py
names the source file of each), behind the prefix vLLM's logger adds."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.sandbox.cloud_logging_api import CloudLoggingStandIn
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.settings import Settings
from bot.wiring import build_deps, close_deps
from handlers.reply import CONFIRM_ACTION
from skills.capacity.fit import FitRequest, check_fit
from skills.capacity.image_compat import default_image
from skills.capacity.startup_log import cold_start_lines, comparison_lines, last_figures, parse_startup
from tests.deploy_helpers import click, command, plan_id_of

pytest_plugins = ["tests.deploy_fixtures", "tests.agent_fixtures"]

P = "(EngineCore_DP0 pid=93) INFO 11-23 17:44:08"
VLLM_LINES = [
    f"{P} [gpu_model_runner.py:2602] Model loading took 8.29 GiB memory and 252.713406 seconds",
    f"{P} [backends.py:548] Using cache directory: /root/.cache/vllm/torch_compile_cache/0e9c for vLLM's torch.compile",
    f"{P} [monitor.py:34] torch.compile takes 41.37 s in total",
    f"{P} [gpu_worker.py:298] Available KV cache memory: 66.26 GiB",
    f"{P} [kv_cache_utils.py:1087] GPU KV cache size: 1,050,170 tokens",
    f"{P} [kv_cache_utils.py:1091] Maximum concurrency for 32,768 tokens per request: 32.05x",
    f"{P} [gpu_model_runner.py:3480] Graph capturing finished in 12 secs, took 0.06 GiB",
    f"{P} [core.py:210] init engine (profile, create kv cache, warmup model) took 71.58 seconds",
]


def test_parses_the_lines_vllm_prints() -> None:
    seen = parse_startup(VLLM_LINES)
    assert (seen.weights_gib, seen.load_s) == (8.29, 252.713406)
    assert (seen.compile_s, seen.graph_s, seen.graph_gib) == (41.37, 12, 0.06)
    assert seen.kv_cache_gib == 66.26 and seen.kv_cache_tokens == 1_050_170
    assert (seen.max_model_len, seen.max_concurrency) == (32768, 32.05)
    assert seen.engine_init_s == 71.58 and seen.complete


def test_parses_the_newer_one_line_form_and_compilation_suffix() -> None:
    seen = parse_startup(
        [
            f"{P} [kv_cache_utils.py:2231] GPU KV cache size: 54,280 tokens, Maximum concurrency for 32,768 "
            "tokens per request: 1.66x",
            f"{P} [core.py:260] init engine (profile, create kv cache, warmup model) took 200.37 s "
            "(compilation: 54.60 s)",
        ]
    )
    assert (seen.kv_cache_tokens, seen.max_concurrency, seen.engine_init_s) == (54_280, 1.66, 200.37)
    assert not seen.complete  # no weights line: not a full start-up


def test_compares_with_the_plan_and_the_probe_budget() -> None:
    report = check_fit(FitRequest(model="12b-qat", gpu="a100-80gb", gpu_memory_utilization=0.95, kv_cache_dtype="bf16"))
    seen = parse_startup(VLLM_LINES).model_copy(update={"ready_after_s": 360.0})
    lines = comparison_lines(report, seen)
    assert any(
        line.startswith("GPU KV cache size: predicted 1,05") and "vLLM 1,050,170 tokens" in line for line in lines
    )
    assert any(line.startswith("weights: predicted 7.67") for line in lines)  # structural, 0.6 GiB under vLLM's 8.29
    cold = cold_start_lines(report, seen, probe_budget_s=2040)
    assert "weights load: 253 s" in cold and "cold start 360 s" in cold[-1] and "2040 s" in cold[-1]
    tight = cold_start_lines(report, seen, probe_budget_s=400)
    assert any("headroom" in line for line in tight)


def _vllm_log(logging_api: CloudLoggingStandIn, project: str):  # type: ignore[no-untyped-def]
    def on_revision(service: str, revision: str) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        for line in VLLM_LINES:
            logging_api.entries.append(
                {
                    "timestamp": now,
                    "severity": "INFO",
                    "textPayload": line,
                    "logName": f"projects/{project}/logs/run.googleapis.com%2Fstderr",
                    "resource": {
                        "type": "cloud_run_revision",
                        "labels": {"service_name": service, "revision_name": revision},
                    },
                }
            )

    return on_revision


async def test_deploy_thread_gets_predicted_vs_actual_and_fit_shows_it(
    fast_settings: Settings, redis_client: Any, cloud_run: CloudRunStandIn, logging_api: CloudLoggingStandIn
) -> None:
    settings = fast_settings.model_copy(update={"cloud_logging_api_endpoint": logging_api.base_url})  # type: ignore[attr-defined]
    cloud_run.on_revision = _vllm_log(logging_api, cloud_run.project)
    deps = build_deps(settings)
    try:
        reply, _ = await command(deps, "deploy gemma4-12b-qat-l4")
        assert reply is not None
        result, responder = await click(deps, CONFIRM_ACTION, plan_id_of(reply))
        assert result is None
        progress_ts, _, progress_thread = responder.posts[0]
        report = next(r for _, r, _t in responder.posts if "Planner vs vLLM" in r.title)
        # In the deploy's thread: where the progress message went (or under it when it started one).
        assert next(t for _, r, t in responder.posts if r is report) == (progress_thread or progress_ts)
        text = "\n".join(s.text or "" for s in report.sections)
        assert "vLLM 1,050,170 tokens" in text and "weights load: 253 s" in text and "startup-probe budget" in text

        seen = await last_figures(deps.redis, settings.key("startup"), settings.vllm_service_name)
        assert seen is not None and seen.kv_cache_tokens == 1_050_170 and seen.model == "gemma-4-12b-qat"
        assert seen.gpu == "nvidia-l4" and seen.image == (settings.vllm_image or default_image("nvidia-l4"))

        fit_reply, _ = await command(deps, "fit 12b-qat --gpu nvidia-l4")
        assert fit_reply is not None
        measured = next(s for s in fit_reply.sections if (s.heading or "").startswith("Last measured on"))
        assert "1,050,170 tokens" in (measured.text or "")
        # A fit of other KV settings says the measurement is of another configuration, and predicts nothing for it
        other, _ = await command(deps, "fit gemma4-12b-qat-l4 --max-model-len 4096 --kv-cache-dtype fp8")
        assert other is not None
        measured = next(s for s in other.sections if (s.heading or "").startswith("Last measured on"))
        text = measured.text or ""
        assert "1,050,170 tokens with `--max-model-len" in text and "not comparable" in text, text
        assert "tokens (predicted" not in text, text
    finally:
        await close_deps(deps)

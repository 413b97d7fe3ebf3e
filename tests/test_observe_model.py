"""/gemma query, health and cost against the vLLM simulator (openai over SSE) and Cloud Run stand-in."""

from __future__ import annotations

import pytest

from handlers.context import CommandContext
from handlers.registry import load_all
from handlers.router import run_command
from skills.bench.cells import CellResult
from skills.bench.loadgen import BenchSpec, SweepResult
from skills.bench.report import save_sweep
from skills.capacity.cost import hourly_cost, usd_per_m_tokens
from skills.observe.health import deep_health
from skills.observe.query import stream_query
from skills.ports import ServiceInfo
from skills.serving.sizes import gib
from tests.observe_fixtures import RecordingResponder, deps_for, reply_text, running_sim  # noqa: F401

load_all()


def _ctx(deps, args: list[str], user: str = "U1") -> CommandContext:  # type: ignore[no-untyped-def]
    return CommandContext(deps=deps, responder=RecordingResponder(), user_id=user, channel_id="C1", args=args)


async def test_query_ttft_is_the_first_text_chunk_and_tokens_come_from_usage(deps_for) -> None:  # noqa: F811
    # The role-only first chunk arrives at once; text comes 0.3 s later, three tokens per chunk.
    with running_sim(ttft_s=0.3, token_delay_s=0.01, tokens_per_chunk=3, default_output_tokens=12) as (
        _,
        url,
    ):
        deps = deps_for(url)
        client, model = await deps.endpoint.client(), await deps.endpoint.model_id()
        await stream_query(client, model, "warm up")  # the first call also opens the connection
        r = await stream_query(client, model, "Say hello")
    assert r.ttft_s is not None and r.ttft_s == pytest.approx(0.3, rel=0.10)
    assert r.output_tokens == 12 and r.chunks == 4  # usage, not chunk count
    assert r.prompt_tokens == 3  # BOS + two words, as the server counted them
    assert r.text.split()[:3] == ["the", "quick", "brown"]
    assert r.tokens_per_s == pytest.approx(12 / r.total_s)
    assert r.decode_tokens_per_s == pytest.approx(11 / (r.total_s - r.ttft_s))


async def test_query_command_shows_stats_and_rejects_empty(deps_for) -> None:  # noqa: F811
    with running_sim(ttft_s=0.02) as (_, url):
        deps = deps_for(url)
        reply = await run_command(_ctx(deps, ["What", "is", "vLLM?"], "UDEPLOYER"), "query")
        assert reply is not None
        text = reply_text(reply)
        assert "the quick brown fox" in text and "TTFT" in text and "12 output tokens" in text
        empty = await run_command(_ctx(deps, []), "query")
    assert empty is not None and "Nothing to ask" in empty.title


async def test_health_with_tool_calling_enabled(deps_for) -> None:  # noqa: F811
    with running_sim(ttft_s=0.01) as (_, url):
        deps = deps_for(url)
        h = await deep_health(await deps.endpoint.client(), "google/gemma-4-12b-it", url, deps.model_server)
    assert h.ok and h.chat_ok and h.tools == "enabled" and h.tool_called
    assert h.http_health is not None and h.http_health.ok
    assert h.chat_latency_ms is not None and h.chat_latency_ms >= 10


async def test_health_names_the_flags_when_tool_calling_is_off(deps_for) -> None:  # noqa: F811
    with running_sim(ttft_s=0.01, tools_enabled=False) as (_, url):
        reply = await run_command(_ctx(deps_for(url), [], "UDEPLOYER"), "health")
    assert reply is not None
    text = reply_text(reply)
    assert "disabled" in text and "--enable-auto-tool-choice --tool-call-parser gemma4" in text
    assert ":large_yellow_circle:" in reply.title  # chat works, tools do not


async def test_health_reports_a_failing_server(deps_for) -> None:  # noqa: F811
    with running_sim(fail_status=503) as (_, url):
        reply = await run_command(_ctx(deps_for(url), [], "UDEPLOYER"), "health")
    assert reply is not None
    text = reply_text(reply)
    assert "FAILED" in text and "HTTP 503" in text and "not checked" in text


def test_hourly_cost_is_priced_at_instance_based_rates() -> None:
    info = ServiceInfo(name="s", gpu_type="nvidia-l4", gpu_count=1, cpu="4", memory="16Gi", max_instances=2)
    c = hourly_cost(info)
    # Tier 1, instance-based, L4 without zonal redundancy (skills/data/prices.yaml; worked in tests/test_prices.py):
    # 4 x 0.000018 x 3600 + 16 x 0.000002 x 3600 + 0.0001867 x 3600 = 0.2592 + 0.1152 + 0.67212
    assert c.usd_per_hour == pytest.approx(1.04652, abs=1e-5)
    assert c.max_usd_per_hour == pytest.approx(2 * 1.04652, abs=1e-4) and c.idle_usd_per_hour == 0
    assert usd_per_m_tokens(1.2096, 80) == pytest.approx(4.2, abs=0.01)
    assert gib("16384Mi") == 16 and gib("32Gi") == 32


async def test_cost_command_uses_service_spec_and_last_sweep(deps_for, cloud_run, settings) -> None:  # noqa: F811
    cloud_run.seed_service("vllm-gemma4")  # 8 vCPU, 32 GiB, one L4
    with running_sim() as (_, url):
        deps = deps_for(url)
        cells = [
            CellResult(concurrency=1, context=128, requests=10, ok=10, success_rate=1.0, duration_s=10,
                       req_per_s=1.0, output_tok_per_s=80.0),
            CellResult(concurrency=8, context=128, requests=32, ok=32, success_rate=1.0, duration_s=10,
                       req_per_s=3.0, output_tok_per_s=400.0),
            CellResult(concurrency=32, context=128, requests=32, ok=16, success_rate=0.5, duration_s=10,
                       req_per_s=3.0, output_tok_per_s=900.0),  # half failed: not a usable best
        ]  # fmt: skip
        sweep = SweepResult(id="abc", model="m", started_at="2025-01-01T00:00:00Z", spec=BenchSpec(), cells=cells)
        await save_sweep(deps.redis, settings.key("bench", "history"), sweep)
        reply = await run_command(_ctx(deps, []), "cost")
    assert reply is not None
    text = reply_text(reply)
    per_hour = (8 * 0.000018 + 32 * 0.000002 + 0.0001867) * 3600  # instance-based, Tier 1 (test_prices)
    assert f"${per_hour:.2f}/hour" in reply.title
    assert f"${usd_per_m_tokens(per_hour, 80):.2f} per M output tokens at 80.0 tok/s" in text
    assert "at 400.0 tok/s (concurrency 8" in text and "900" not in text

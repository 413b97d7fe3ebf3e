"""`/metrics` of the vLLM simulator, read via the real ModelServer adapter and prometheus-client's parser."""

from __future__ import annotations

import pytest

from handlers.context import CommandContext
from handlers.registry import load_all
from handlers.router import run_command
from skills.errors import UserFacingError
from skills.observe.model_metrics import Histo, collect_model_metrics, histogram_quantile, parse_snapshot, summarize
from tests.observe_fixtures import RecordingResponder, deps_for, reply_text, running_sim, sim  # noqa: F401

load_all()


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    # 10 observations: 4 in (0, 0.1], 4 in (0.1, 0.2], 2 in (0.2, 0.4]
    h = Histo(buckets={0.1: 4, 0.2: 8, 0.4: 10, float("inf"): 10}, count=10, sum=1.5)
    assert histogram_quantile(0.5, h) == pytest.approx(0.125)  # rank 5: 1/4 into (0.1, 0.2]
    assert histogram_quantile(0.9, h) == pytest.approx(0.3)  # rank 9: half-way into (0.2, 0.4]
    assert histogram_quantile(0.2, h) == pytest.approx(0.05)
    # Everything in the overflow bucket: the largest finite bound is all a histogram can say.
    assert histogram_quantile(0.99, Histo(buckets={1.0: 0, float("inf"): 3}, count=3)) == 1.0
    assert histogram_quantile(0.5, Histo(buckets={}, count=0)) is None


async def test_gauges_capacity_percentiles_and_flags(sim, deps_for) -> None:  # noqa: F811
    vsim, url = sim
    vsim.set_gauges(running=3, waiting=2, kv_usage=0.91)
    vsim.observe(ttft=[0.05] * 8 + [0.3] * 2, itl=[0.02] * 10, e2e=[1.2] * 10, preemptions=4, prefix=(1000, 250))
    deps = deps_for(url)
    m = await collect_model_metrics(deps.model_server, url)
    assert (m.running, m.waiting) == (3, 2)
    assert m.kv_usage == pytest.approx(0.91) and m.kv_metric == "vllm:kv_cache_usage_perc"
    # vLLM's own count (cache_config_info's kv_cache_size_tokens), not blocks x block size (113,552):
    # Gemma 4's six KV-cache groups share the 7,097 blocks.
    assert m.kv_capacity_tokens == 31240 and m.kv_capacity_source == "kv_cache_size_tokens"
    assert m.num_gpu_blocks == 7097 and m.cache_dtype == "fp8"
    assert m.ttft is not None and m.ttft.count == 10
    assert 0.04 <= (m.ttft.p50 or 0) <= 0.06  # 0.05 lies in the (0.04, 0.06] bucket
    assert 0.25 <= (m.ttft.p95 or 0) <= 0.5
    assert m.itl is not None and 0.015 <= (m.itl.p50 or 0) <= 0.02
    assert m.preemptions == 4 and m.prefix_cache_hit_rate == pytest.approx(0.25)
    assert "since the server started" in m.window  # one scrape: lifetime averages, and it says so
    assert any("KV cache 91%" in f for f in m.flags) and any("2 request(s) waiting" in f for f in m.flags)


async def test_legacy_kv_metric_name_is_used_when_new_one_is_absent(deps_for) -> None:  # noqa: F811
    with running_sim(legacy_kv_metric=True) as (vsim, url):
        vsim.set_gauges(kv_usage=0.5)
        m = await collect_model_metrics(deps_for(url).model_server, url)
    assert m.kv_usage == pytest.approx(0.5) and m.kv_metric == "vllm:gpu_cache_usage_perc"


async def test_older_server_without_kv_cache_size_tokens_falls_back_to_blocks(deps_for) -> None:  # noqa: F811
    with running_sim(kv_cache_size_tokens=None) as (_vsim, url):
        m = await collect_model_metrics(deps_for(url).model_server, url)
    assert m.kv_capacity_tokens == 7097 * 16 and m.kv_capacity_source == "blocks x block_size"
    assert m.flags == []


async def test_second_scrape_gives_rates_over_the_window(sim, deps_for, redis_client, settings) -> None:  # noqa: F811
    vsim, url = sim
    vsim.observe(ttft=[2.0] * 50, prompt_tokens=5000, generation_tokens=100)  # old, slow history
    key = settings.key("metrics", "last_scrape")
    deps = deps_for(url)
    await collect_model_metrics(deps.model_server, url, redis_client, key)
    vsim.observe(ttft=[0.05] * 10, prompt_tokens=800, generation_tokens=300)
    m = await collect_model_metrics(deps.model_server, url, redis_client, key)
    assert "between two scrapes" in m.window and m.window_s and m.window_s > 0
    # Only the window's observations count: the old 2 s TTFTs are gone from the percentiles.
    assert m.ttft is not None and m.ttft.count == 10 and (m.ttft.p99 or 1) <= 0.06
    assert m.generation_tokens_per_s == pytest.approx(300 / m.window_s)
    assert m.prompt_tokens_per_s == pytest.approx(800 / m.window_s)


def test_counter_reset_falls_back_to_lifetime_figures() -> None:
    text = "# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total 10\n"
    prev = parse_snapshot(text.replace(" 10", " 500"), at=100.0)
    m = summarize(parse_snapshot(text, at=160.0), prev)  # restarted: counters went down
    assert "between two scrapes" not in m.window


def test_not_prometheus_text_is_a_clear_error() -> None:
    with pytest.raises(UserFacingError):
        parse_snapshot("<html>login page</html>")
    with pytest.raises(UserFacingError, match="no vLLM metrics"):
        parse_snapshot("# TYPE go_goroutines gauge\ngo_goroutines 7\n")


async def test_metrics_command_renders_flags_and_window(sim, deps_for) -> None:  # noqa: F811
    vsim, url = sim
    vsim.set_gauges(running=1, waiting=0, kv_usage=0.95)
    deps = deps_for(url)
    ctx = CommandContext(deps=deps, responder=RecordingResponder(), user_id="U1", channel_id="C1", args=[])
    reply = await run_command(ctx, "metrics")
    assert reply is not None
    text = reply_text(reply)
    assert "KV cache 95%" in text and "31,240 tokens (vLLM's count" in text and "since the server started" in text


def test_the_simulators_kv_cache_size_is_vllms_count_for_its_blocks() -> None:
    from bot.sandbox.vllm_sim import SimConfig
    from skills.capacity import kv_accounting as kva
    from skills.capacity.fit import layer_specs, load_catalog

    cat, c = load_catalog(), SimConfig()
    groups = kva.get_kv_cache_groups(layer_specs(cat, cat.model("gemma-4-26b-a4b-qat"), c.cache_dtype))
    limits = kva.Limits(c.max_model_len, cat.planner.max_num_batched_tokens)
    assert kva.reported_tokens(kva.KVCacheConfig(c.num_gpu_blocks, groups, []), limits) == c.kv_cache_size_tokens

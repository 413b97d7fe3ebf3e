"""Load generator statistics against the simulator's injected timing, and the /gemma bench flow end to end."""

from __future__ import annotations

import asyncio
import csv
import io
import socket

import pytest
from pydantic import SecretStr

from bot.adapters.stream_client import EndpointStreams, StreamClient, StreamTarget
from bot.sandbox.vllm_sim import SPAN_KEY_CHARS
from handlers.context import ActionContext, CommandContext
from handlers.registry import load_all
from handlers.router import run_action, run_command
from skills.bench.cells import pct
from skills.bench.loadgen import BenchSpec, fit_contexts, run_cell, run_sweep
from skills.bench.prompts import PromptSet, size_prompt
from skills.bench.report import compare, recent_sweeps
from skills.errors import InvalidInput
from tests.eventually import eventually
from tests.fake_time import FakeTime
from tests.observe_fixtures import RecordingResponder, deps_for, reply_text, running_sim  # noqa: F401

load_all()


def test_pct_matches_linear_interpolation() -> None:
    assert pct([1, 2, 3, 4], 50) == 2.5 and pct([5], 99) == 5 and pct([], 50) is None
    assert pct(list(range(101)), 95) == 95


async def test_prompts_are_sized_exactly_with_the_servers_tokenizer() -> None:
    calls: list[int] = []

    async def count(p: str) -> int:  # a tokenizer where some words take two tokens
        n = 1 + sum(2 if len(w) > 5 else 1 for w in p.split())
        calls.append(n)
        return n

    ps = await size_prompt(count, 777)
    assert await count(ps.prompt(0)) == 777 and len(calls) < 12


def test_contexts_are_kept_under_max_model_len_minus_output() -> None:
    spec, notes = fit_contexts(BenchSpec(contexts=[128, 16384], output_tokens=128), 16384)
    assert spec.contexts == [128, 16256] and "16384 -> 16256" in notes[0]
    with pytest.raises(InvalidInput):
        fit_contexts(BenchSpec(output_tokens=4096), 4096)
    assert BenchSpec(concurrency=[32]).cell_requests(32) == 128 and BenchSpec().cell_requests(1) == 10


async def test_sweep_statistics_match_the_injected_timing(deps_for) -> None:  # noqa: F811
    ttft, delay, out = 0.1, 0.005, 12
    with running_sim(ttft_s=ttft, token_delay_s=delay) as (vsim, url):
        deps = deps_for(url, vllm_api_key=SecretStr("sk-bench"))
        assert deps.streams is not None
        model = await deps.endpoint.model_id()

        async def count(p: str) -> int:
            return len(await deps.model_server.tokenize(url, model, p))

        spec = BenchSpec(concurrency=[1, 4], contexts=[64, 300], output_tokens=out, requests_per_cell=4)
        res = await run_sweep(deps.streams, model, count, spec, "t1")
        assert vsim.state.max_in_flight == 4  # the concurrency actually reached the server
        prompts = [b["prompt"] for b in vsim.state.bodies[1:]]  # after the warm-up request
        assert set(vsim.state.authorization) == {"Bearer sk-bench"}  # the endpoint's auth on every request
        assert all(b["stream"] and b["ignore_eos"] and b["max_tokens"] == out for b in vsim.state.bodies[1:])
    assert len(res.cells) == 4 and not res.stopped
    assert len(set(prompts)) == len(prompts) == 16  # unique prompts: nothing for the prefix cache to reuse
    for c in res.cells:
        assert c.requests == 4 and c.ok == 4 and c.errors == {}
        assert c.mean_prompt_tokens == c.context  # sized exactly, as the server counted
        assert c.mean_output_tokens == out  # from usage
        # Behaviour, not timing: the server waits at least the injected delays, so every figure is bounded
        # from one side only (a loaded machine makes them slower, never faster). How close they come to the
        # injected values is a bench figure: bench/loadgen_capacity.py.
        assert c.ttft_p50 is not None and c.itl_p50 is not None and c.e2e_p50 is not None
        assert c.ttft_p50 >= ttft * 0.95 and c.itl_p50 > 0
        assert c.e2e_p50 >= c.ttft_p50 and c.e2e_p50 >= ttft + (out - 1) * delay * 0.9
        assert 0 < c.req_per_s <= c.concurrency / (ttft + (out - 1) * delay) * 1.05
        assert c.output_tok_per_s == pytest.approx(c.req_per_s * out, rel=1e-6)


async def test_the_wired_stream_clients_use_the_endpoints_url_and_auth(deps_for) -> None:  # noqa: F811
    # The bench command hands run_sweep deps.streams (bot.wiring): the endpoint's URL and credentials on the wire.
    with running_sim(ttft_s=0.01, token_delay_s=0.001) as (vsim, url):
        deps = deps_for(url, vllm_api_key=SecretStr("sk-sdk"))
        assert isinstance(deps.streams, EndpointStreams)
        target = await deps.streams.target()
        assert target.base_url == url + "/v1" and target.headers == await deps.endpoint.auth_headers()

        async def count(p: str) -> int:
            return len(await deps.model_server.tokenize(url, "m", p))

        spec = BenchSpec(concurrency=[2], contexts=[32], output_tokens=5, requests_per_cell=6)
        res = await run_sweep(deps.streams, "m", count, spec, "t0")
    assert res.cells[0].ok == 6 and res.cells[0].mean_output_tokens == 5
    assert set(vsim.state.authorization) == {"Bearer sk-sdk"} and len(vsim.state.authorization) == 7


async def test_errors_are_counted_by_type_and_stop_ends_the_sweep(deps_for) -> None:  # noqa: F811
    with running_sim(ttft_s=0.01, token_delay_s=0.001, fail_every=4) as (_, url):
        deps = deps_for(url)
        assert deps.streams is not None

        async def count(p: str) -> int:
            return len(await deps.model_server.tokenize(url, "m", p))

        res = await run_sweep(deps.streams, "m", count, BenchSpec(concurrency=[2], contexts=[32], output_tokens=4,
                                                           requests_per_cell=12), "t2")  # fmt: skip
        cell = res.cells[0]
        assert cell.errors == {"HTTP 500": 3} and cell.ok == 9 and cell.success_rate == pytest.approx(0.75)

    with running_sim(ttft_s=0.05, token_delay_s=0.05) as (_, url):
        deps = deps_for(url)
        assert deps.streams is not None
        stop = asyncio.Event()
        seen: list[str] = []

        async def count2(p: str) -> int:
            return len(await deps.model_server.tokenize(url, "m", p))

        async def progress(p) -> None:  # type: ignore[no-untyped-def]
            seen.append(p.phase)
            if p.phase == "running" and p.cell_index == 1:
                asyncio.get_running_loop().call_later(0.5, stop.set)

        spec = BenchSpec(concurrency=[1, 2], contexts=[32], output_tokens=4, requests_per_cell=50)
        res = await run_sweep(deps.streams, "m", count2, spec, "t3", stop=stop, on_progress=progress)
    assert res.stopped == "cancelled" and len(res.cells) == 1 and res.cells[0].requests < 50
    assert seen[0] == "sizing prompts" and seen[-1] == "done"


async def test_bench_command_plan_confirm_run_and_compare(deps_for, settings) -> None:  # noqa: F811
    with running_sim(ttft_s=0.02, token_delay_s=0.002, max_model_len=1024) as (_, url):
        deps = deps_for(url)
        responder = RecordingResponder()
        args = ["--concurrency", "1,2", "--context", "64,2048", "--output", "8", "--requests", "4"]
        cctx = CommandContext(deps=deps, responder=responder, user_id="UDEPLOYER", channel_id="C1", args=args)
        plan = await run_command(cctx, "bench")
        assert plan is not None and "4 cells, 16 requests" in plan.title
        assert "context 2048 -> 1016" in reply_text(plan)  # max-model-len 1024 minus 8 output tokens
        confirm = next(b for b in plan.buttons if b.action_id == "gemma_bench_confirm")

        def actx(user: str, action_id: str, value: str) -> ActionContext:
            return ActionContext(deps=deps, responder=responder, user_id=user, channel_id="C1",
                                 action_id=action_id, value=value)  # fmt: skip

        denied = await run_action(actx("USOMEONE", confirm.action_id, confirm.value))
        assert denied is not None and "is not allowed to run a benchmark" in denied.title
        assert await run_action(actx("UDEPLOYER", confirm.action_id, confirm.value)) is None
        again = await run_action(actx("UDEPLOYER", confirm.action_id, confirm.value))
        assert again is not None and "already used" in again.title  # a double click runs once
        await deps.drain(timeout_s=60)

        progress_ts = next(iter(responder.posts))
        assert any(ts == progress_ts for ts, _ in responder.updates)  # edited in place
        assert "results in the thread" in responder.posts[progress_ts].title
        thread_ts, result = responder.threads[-1]
        assert thread_ts == progress_ts and "done" in result.title
        names = sorted(f.filename for f, _ in responder.uploads)
        assert (
            len(names) == 3 and any(n.endswith(".csv") for n in names) and any(n.endswith("latency.png") for n in names)
        )
        assert all(ts == progress_ts for _, ts in responder.uploads)
        png = next(f for f, _ in responder.uploads if f.filename.endswith("throughput.png"))
        assert png.content.startswith(b"\x89PNG")
        csv_file = next(f for f, _ in responder.uploads if f.filename.endswith(".csv"))
        rows = list(csv.DictReader(io.StringIO(csv_file.content.decode())))
        assert [(r["concurrency"], r["context"]) for r in rows] == [
            ("1", "64"),
            ("2", "64"),
            ("1", "1016"),
            ("2", "1016"),
        ]
        assert all(r["success_rate"] == "1" and r["mean_output_tokens"] == "8" for r in rows)

        # A second sweep, then compare.
        plan2 = await run_command(cctx, "bench")
        assert plan2 is not None
        c2 = next(b for b in plan2.buttons if b.action_id == "gemma_bench_confirm")
        await run_action(actx("UDEPLOYER", c2.action_id, c2.value))
        await deps.drain(timeout_s=60)
        cmp_reply = await run_command(
            CommandContext(deps=deps, responder=responder, user_id="U1", channel_id="C1", args=["compare"]),
            "bench",
        )
    assert cmp_reply is not None and "(previous)" in cmp_reply.title
    sweeps = await recent_sweeps(deps.redis, settings.key("bench", "history"), 2)
    assert compare(*sweeps).count("\n") == 4


async def test_bench_rejects_bad_input_and_runs_one_sweep_at_a_time(deps_for, settings) -> None:  # noqa: F811
    with running_sim(ttft_s=0.05, token_delay_s=0.05) as (_, url):
        deps = deps_for(url)
        responder = RecordingResponder()

        def cctx(args: list[str]) -> CommandContext:
            return CommandContext(deps=deps, responder=responder, user_id="UDEPLOYER", channel_id="C1", args=args)

        for bad, words in ((["--concurrency", "a,b"], "needs numbers"), (["--output", "1"], "output_tokens"),
                           (["--bogus"], "Unknown option"), (["--requests", "100000"], "cap")):  # fmt: skip
            r = await run_command(cctx(bad), "bench")
            assert r is not None
            assert words in reply_text(r), (bad, reply_text(r))
        assert [k async for k in deps.redis.scan_iter(match=settings.key("bench", "*"))] == []  # nothing stored

        args = ["--concurrency", "1", "--context", "32", "--output", "40", "--requests", "40"]
        p1, p2 = await run_command(cctx(args), "bench"), await run_command(cctx(args), "bench")
        assert p1 is not None and p2 is not None

        def actx(action_id: str, value: str) -> ActionContext:
            return ActionContext(deps=deps, responder=responder, user_id="UDEPLOYER", channel_id="C1",
                                 action_id=action_id, value=value)  # fmt: skip

        await run_action(actx("gemma_bench_confirm", p1.buttons[0].value))
        busy = await run_action(actx("gemma_bench_confirm", p2.buttons[0].value))
        assert busy is not None and "Another benchmark is running" in busy.title
        assert await eventually(lambda: responder.posts)  # the progress message, with its Stop button, is up
        stop_button = next(b for b in responder.posts[next(iter(responder.posts))].buttons if b.label == "Stop")
        await run_action(actx(stop_button.action_id, stop_button.value))
        await deps.drain(timeout_s=30)
    _, result = responder.threads[-1]
    assert "stopped early (cancelled)" in result.title
    assert await deps.redis.get(settings.key("bench", "lock")) is None  # released


def _prompts() -> PromptSet:
    return PromptSet(tokens=0, body="a short benchmark prompt".split(), head_words=2)


async def test_sse_framing_usage_fallback_and_failures_are_classified() -> None:
    # CRLF-framed SSE parses the same; without usage in the stream the chunks are counted and flagged.
    with running_sim(ttft_s=0.01, token_delay_s=0.002, crlf=True, usage_in_stream=False) as (_, url):
        async with StreamClient(StreamTarget(url + "/v1"), 2, 10) as sc:
            recs, reason = await run_cell(sc, "m", _prompts(), 4, 2, 6, 10)
    assert reason == "" and all(r.ok and r.output_tokens == 6 and r.usage_missing for r in recs)
    assert all(len(r.itls) == 5 and r.ttft is not None for r in recs)
    assert sorted(r.index for r in recs) == [0, 1, 2, 3]  # which prompt each record sent

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    async with StreamClient(StreamTarget(f"http://127.0.0.1:{dead}/v1"), 2, 10) as sc:
        recs, _ = await run_cell(sc, "m", _prompts(), 3, 2, 4, 5)
    assert [r.error for r in recs] == ["connection"] * 3 and not any(r.ok for r in recs)

    with running_sim(ttft_s=5.0) as (vsim, url):  # slower than the request timeout
        async with StreamClient(StreamTarget(url + "/v1"), 1, 10) as sc:
            recs, _ = await run_cell(sc, "m", _prompts(), 1, 1, 4, 0.3)
        assert recs[0].error == "timeout"
        assert await eventually(lambda: vsim.state.spans)  # the client left: the stand-in stops streaming to nobody
        assert vsim.state.in_flight == 0 and len(vsim.state.spans) == 1


async def test_ramp_spreads_worker_starts_and_the_sim_notices_clients_leaving() -> None:
    ramp = FakeTime()
    with running_sim(ttft_s=0.01, token_delay_s=0.001) as (vsim, url):
        async with StreamClient(StreamTarget(url + "/v1"), 4, 10) as sc:
            recs, _ = await run_cell(sc, "m", _prompts(), 4, 4, 4, 10, ramp_s=0.4, sleep=ramp.sleep)
        assert sorted(ramp.sleeps) == pytest.approx([0.1, 0.2, 0.3])  # workers 1..3 start 0.4 s / 4 apart
        # The server-side spans line up with the client's requests on the shared monotonic clock.
        spans = {key: (arrival, end) for key, arrival, _, end in vsim.state.spans}
        for r in recs:
            arrival, end = spans[_prompts().prompt(r.index)[:SPAN_KEY_CHARS]]
            assert r.start <= arrival <= end <= r.end

    with running_sim(ttft_s=0.01, token_delay_s=0.05) as (vsim, url):  # a 10 s stream, abandoned early
        async with StreamClient(StreamTarget(url + "/v1"), 1, 10) as sc:
            task = asyncio.ensure_future(run_cell(sc, "m", _prompts(), 1, 1, 200, 30))
            assert await eventually(lambda: vsim.state.in_flight)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert await eventually(lambda: vsim.state.in_flight == 0)
        assert vsim.state.in_flight == 0 and len(vsim.state.spans) == 1  # the stream stopped, span recorded


async def test_stream_errors_are_counted_and_connections_are_reused() -> None:
    with running_sim(ttft_s=0.005, token_delay_s=0.001, stream_error_after=3) as (vsim, url):
        async with StreamClient(StreamTarget(url + "/v1"), 2, 10) as sc:
            recs, _ = await run_cell(sc, "m", _prompts(), 6, 2, 8, 10)
    assert [r.error for r in recs] == ["stream error: simulated engine failure"] * 6
    assert not any(r.ok for r in recs) and all(r.ttft is not None for r in recs)
    assert len(set(vsim.state.peers)) == 2  # 6 requests over the 2 workers' keep-alive connections

    with running_sim(ttft_s=0.005, token_delay_s=0.001) as (vsim, url):
        async with StreamClient(StreamTarget(url + "/v1"), 3, 10) as sc:
            recs, _ = await run_cell(sc, "m", _prompts(), 12, 3, 4, 10)
    assert all(r.ok and r.output_tokens == 4 and r.sent >= r.start for r in recs)
    assert len(vsim.state.peers) == 12 and len(set(vsim.state.peers)) == 3


def test_a_bad_endpoint_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(InvalidInput):
        StreamClient(StreamTarget("ftp://model.example/v1"))
    with pytest.raises(InvalidInput):
        StreamClient(StreamTarget("http://127.0.0.1:1/v1", {"Authorization": "Bearer a\r\nX-Injected: 1"}))

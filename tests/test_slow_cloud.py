"""A slow cloud degrades only the commands that need it: with Cloud Monitoring blackholed (a gRPC stand-in
that accepts calls and never answers), `/gemma status` keeps Monitoring's own threads busy, and a scale plan
(Cloud Run only) still answers while those Monitoring calls are still blocked. The time it takes is a
figure for bench/slow_cloud.py, not an assertion here."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import pytest

from bot.adapters.blocking import BlockingPool
from bot.adapters.cloud_monitoring import CloudMonitoringMetrics
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.monitoring_grpc import MonitoringStandIn, serve_monitoring
from bot.sandbox.slack_api import SlackStandIn
from bot.sandbox.slack_signing import command_body, signed_headers
from bot.settings import Settings
from bot.web import create_app
from bot.wiring import build_deps, close_deps
from skills.errors import CloudUnavailable, UserFacingError
from tests.conftest import SIGNING_SECRET
from tests.eventually import eventually


@pytest.fixture
def blackholed() -> Iterator[tuple[MonitoringStandIn, str]]:
    standin = MonitoringStandIn()
    standin.blackhole()
    with serve_monitoring(standin, workers=64) as addr:
        yield standin, addr


async def test_scale_plan_answers_while_monitoring_calls_are_still_blocked(
    settings: Settings, redis_client: object, slack: SlackStandIn, cloud_run: CloudRunStandIn, blackholed
) -> None:
    standin, addr = blackholed
    cloud_run.seed_service("vllm-gemma4", min_instances=0, max_instances=1)
    # A long deadline: what keeps the plan fast here is the separate pool, not a short timeout.
    deps = build_deps(
        settings.model_copy(
            update={"cloud_monitoring_api_endpoint": addr, "cloud_call_deadline_s": 120, "cloud_client_threads": 2}
        )
    )
    app = create_app(deps)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test") as client:

        async def command(text: str, rid: str, user: str = "U1") -> None:
            body = command_body(text, slack.response_url(rid), trigger_id=f"t-{rid}", user_id=user)
            resp = await client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
            assert resp.status_code == 200

        for i in range(8):  # a flurry of /gemma status: 6 Monitoring calls each, all left hanging
            await command("status --fresh", f"s{i}")
        assert await eventually(lambda: standin.blocked >= 2, timeout=20)
        await command("scale 1 2", "plan", user="UDEPLOYER")
        plan = await eventually(lambda: [r for r in slack.responses if r["_rid"] == "plan"], timeout=20)
        assert plan, "the scale plan never answered while Monitoring was blackholed"
        assert "Plan:" in json.dumps(plan[0])
        assert standin.blocked >= 1 and standin.blackholed, "Monitoring calls had already finished"
        # status still answers too: without Monitoring's figures, saying so
        statuses = await eventually(lambda: len([r for r in slack.responses if r["_rid"].startswith("s")]) == 8)
        assert statuses
        assert "unavailable" in json.dumps([r for r in slack.responses if r["_rid"] == "s0"])
        standin.release()
        await deps.drain(timeout_s=30)
    await close_deps(deps)  # closes the Monitoring channel too, cancelling the calls left hanging


async def test_a_full_pool_refuses_at_once_instead_of_queueing_forever() -> None:
    pool = BlockingPool("Cloud Monitoring", threads=1, max_waiting=1)
    gate = asyncio.Event()
    loop = asyncio.get_running_loop()
    release = __import__("threading").Event()

    def blocked() -> str:
        loop.call_soon_threadsafe(gate.set)
        release.wait(30)
        return "done"

    first = asyncio.ensure_future(pool.run(blocked))
    await gate.wait()
    second = asyncio.ensure_future(pool.run(lambda: "queued"))  # waits for the one thread
    await asyncio.sleep(0)
    with pytest.raises(CloudUnavailable, match="calls are already waiting"):
        await pool.run(lambda: "refused")
    release.set()
    assert await first == "done" and await second == "queued"
    assert pool.in_flight == 0
    pool.shutdown()


async def test_closing_the_monitoring_adapter_ends_a_call_left_hanging(settings: Settings, blackholed) -> None:
    """close_deps closes the gRPC channel: a call blackholed for its whole (long) deadline ends now, so no thread
    sits in gRPC while the process exits (a channel left to interpreter shutdown crashed the test run once)."""
    standin, addr = blackholed
    metrics = CloudMonitoringMetrics(
        settings.model_copy(update={"cloud_monitoring_api_endpoint": addr, "cloud_call_deadline_s": 120})
    )
    call = asyncio.create_task(metrics.series("vllm-gemma4", "container/instance_count", 10))
    assert await eventually(lambda: standin.blocked >= 1, timeout=20)
    await metrics.aclose()
    with pytest.raises(UserFacingError, match="Channel closed"):
        await asyncio.wait_for(call, timeout=20)
    assert await eventually(lambda: standin.blocked == 0, timeout=20)

"""The deploy watch rides out 429/5xx from Cloud Run's API (backoff with an injected clock: nothing sleeps)."""

from __future__ import annotations

from typing import Any

from bot.adapters.cloud_run import CloudRunRuntime
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.settings import Settings
from skills.deploy.execute import Progress, execute
from skills.deploy.plan_builder import build_plan
from skills.targets.cloud_run.target import CloudRunTarget
from tests.fake_time import FakeTime

pytest_plugins = ["tests.deploy_fixtures"]


def runtime(settings: Settings, t: FakeTime, budget_s: float = 300.0) -> CloudRunTarget:
    return CloudRunTarget(CloudRunRuntime(settings, clock=t.clock, sleep=t.sleep, retry_budget_s=budget_s))


async def deploy(rt: CloudRunTarget, deps: Any) -> tuple[Any, list[Progress]]:
    plan = await build_plan("deploy", {"profile": "gemma4-12b-qat-l4"}, rt, deps.writes.env)
    seen: list[Progress] = []

    async def progress(p: Progress) -> None:
        seen.append(p)

    return await execute(rt, plan, progress=progress, poll_s=0.0, progress_every_s=0.0), seen


async def test_watch_rides_out_429_and_503_with_backoff(
    deps: Any, fast_settings: Settings, cloud_run: CloudRunStandIn
) -> None:
    t = FakeTime(1000.0)
    rt = runtime(fast_settings, t)
    cloud_run.op_polls = 2
    for method, status, message in [
        ("GET_OPERATION", 429, "Rate exceeded."),
        ("GET_OPERATION", 503, "The service is currently unavailable."),
        ("GET_OPERATION", 503, "The service is currently unavailable."),
        ("GET", 503, "The service is currently unavailable."),
        ("GET_REVISION", 500, "Internal error encountered."),
        ("GET_REVISION", 502, "Bad gateway."),
    ]:
        cloud_run.fail_next(method, status, message)
    result, _ = await deploy(rt, deps)
    assert result.ok, result.detail
    assert cloud_run.faults == []  # every injected failure was met and ridden out
    assert len(t.sleeps) >= 6 and all(s > 0 for s in t.sleeps)
    # Backoff grows between consecutive failures of one call (1 s, then ~2 s, ... with jitter).
    assert max(t.sleeps) > min(t.sleeps)
    svc = cloud_run.services["vllm-gemma4"]
    assert svc["latestReadyRevision"] == svc["latestCreatedRevision"]


async def test_past_the_adapter_budget_the_watch_keeps_watching(
    deps: Any, fast_settings: Settings, cloud_run: CloudRunStandIn
) -> None:
    t = FakeTime(1000.0)
    rt = runtime(fast_settings, t, budget_s=5.0)
    for _ in range(8):  # more failures than 5 s of backoff allows: the adapter gives up, the watch does not
        cloud_run.fail_next("GET_REVISION", 503, "The service is currently unavailable.")
    result, seen = await deploy(rt, deps)
    assert result.ok, result.detail
    assert cloud_run.faults == []
    assert any("server error" in p.detail for p in seen if not p.done)  # said while still watching
    assert seen[-1].ok is True and seen[-1].phase == "ready"


async def test_a_terminal_failure_after_transient_errors_is_still_reported(
    deps: Any, fast_settings: Settings, cloud_run: CloudRunStandIn
) -> None:
    t = FakeTime(1000.0)
    rt = runtime(fast_settings, t)
    cloud_run.next_revision_outcome = "probe_failed"
    cloud_run.fail_next("GET_OPERATION", 503, "The service is currently unavailable.")
    cloud_run.fail_next("GET_REVISION", 429, "Rate exceeded.")
    result, _ = await deploy(rt, deps)
    assert not result.ok and "failed the configured startup probe" in result.detail


async def test_client_errors_are_not_retried(deps: Any, fast_settings: Settings, cloud_run: CloudRunStandIn) -> None:
    t = FakeTime(1000.0)
    rt = runtime(fast_settings, t)
    cloud_run.fail_next("GET_REVISION", 403, "Permission 'run.revisions.get' denied.")
    result, _ = await deploy(rt, deps)
    assert not result.ok and "permission denied" in result.detail
    assert t.sleeps == []  # a 403 is final: no backoff

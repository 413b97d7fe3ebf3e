"""The sandbox's simulated project: revisions start and fail on its clock (driven here without sleeping), the
lines they write are read back with the real Logging client and diagnosed as the field failure each scenario
stands for, and what fits becomes ready."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from bot.adapters.cloud_logging import CloudLoggingLogs
from bot.adapters.cloud_run import CloudRunRuntime
from bot.sandbox.attach import no_google_credentials
from bot.sandbox.clock import SandboxClock
from bot.sandbox.cloud import Sandbox
from bot.sandbox.lifecycle import PULL_S
from bot.sandbox.scenarios import SCENARIOS
from bot.settings import Settings, load_settings
from skills.deploy.plan_builder import build_plan
from skills.diagnosis.diagnose import diagnose_service
from skills.ports import LogQuery
from skills.targets.cloud_run.target import CloudRunTarget
from skills.targets.env import DeployEnv

DEPLOY_SCENARIOS = [name for name, s in SCENARIOS.items() if not s.load]


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    # A stopped clock: time moves only by advance(). The image the bot would deploy (VLLM_IMAGE or its default).
    sb = Sandbox(clock=SandboxClock(speed=0), image=load_settings().vllm_image).start()
    yield sb
    sb.close()


@pytest.fixture
def sb_settings(sandbox: Sandbox, key_prefix: str) -> Settings:
    return sandbox.configure(load_settings(key_prefix=key_prefix))


def _texts(sandbox: Sandbox, revision: str) -> list[str]:
    labels = [(e["resource"]["labels"]["revision_name"], e.get("textPayload", "")) for e in sandbox.logging.entries]
    return [t for r, t in labels if r == revision]


async def _kinds(settings: Settings, revision: str) -> list[str]:
    query = LogQuery(service="vllm-gemma4", since=datetime.now(UTC) - timedelta(hours=2), revision=revision)
    return (await diagnose_service(CloudLoggingLogs(settings), query, token_budget=3000)).kinds()


async def test_seeded_service_is_ready_and_its_startup_log_diagnoses_clean(
    sandbox: Sandbox, sb_settings: Settings
) -> None:
    info = await CloudRunRuntime(sb_settings).get_service("vllm-gemma4")
    assert info.ready is True and info.uri == sandbox.urls["vllm"]
    rev = info.latest_ready_revision
    texts = _texts(sandbox, rev)
    assert any("Starting to load model" in t for t in texts)
    assert texts[-1] == "INFO:     Application startup complete."
    assert await _kinds(sb_settings, rev) == []


@pytest.mark.parametrize("name", DEPLOY_SCENARIOS)
async def test_a_bad_deploy_fails_the_way_vllm_fails_and_diagnoses_as_its_kind(
    sandbox: Sandbox, sb_settings: Settings, name: str
) -> None:
    scenario = SCENARIOS[name]
    rev = await sandbox.deploy_by_hand(scenario)
    sandbox.tick()
    assert rev in sandbox.lifecycle.active  # nothing happens while the clock stands still
    assert _texts(sandbox, rev) and all("Traceback" not in t for t in _texts(sandbox, rev))

    sandbox.clock.advance(3 * 3600)
    sandbox.tick()
    startup = sandbox.lifecycle.finished[rev]
    assert (startup.outcome, startup.kind) == ("failed", scenario.kind)
    revision = await CloudRunRuntime(sb_settings).get_revision("vllm-gemma4", rev)
    assert revision.ready is False and "is not ready and cannot serve traffic" in revision.message
    assert scenario.kind in await _kinds(sb_settings, rev)
    # The previous revision keeps serving, as on Cloud Run.
    info = await CloudRunRuntime(sb_settings).get_service("vllm-gemma4")
    assert info.latest_ready_revision != rev and info.latest_created_revision == rev


@pytest.mark.parametrize("name", DEPLOY_SCENARIOS)
async def test_the_fix_the_diagnosis_proposes_recovers(sandbox: Sandbox, sb_settings: Settings, name: str) -> None:
    """diagnose -> its first redeploy action -> the planner's plan (real Cloud Run client) -> ready."""
    rev = await sandbox.deploy_by_hand(SCENARIOS[name])
    sandbox.clock.advance(3 * 3600)
    sandbox.tick()
    query = LogQuery(service="vllm-gemma4", since=datetime.now(UTC) - timedelta(hours=2), revision=rev)
    diagnosis = await diagnose_service(CloudLoggingLogs(sb_settings), query, token_budget=3000)
    finding = next(f for f in diagnosis.findings if f.kind == SCENARIOS[name].kind)
    action = next(a for a in finding.remediation.actions if a.action == "redeploy")
    runtime = CloudRunTarget(CloudRunRuntime(sb_settings))
    env = DeployEnv(service="vllm-gemma4", region=sb_settings.google_cloud_location, image=sb_settings.vllm_image)
    plan = await build_plan("redeploy", dict(action.params), runtime, env)
    assert plan.blocked() == "" and plan.spec is not None
    await runtime.apply_service("vllm-gemma4", plan.spec, create=False)
    fixed = (await runtime.get_service("vllm-gemma4")).latest_created_revision
    assert fixed != rev
    sandbox.clock.advance(3 * 3600)
    sandbox.tick()
    assert sandbox.lifecycle.finished[fixed].outcome == "ready", (action.params, sandbox.lifecycle.finished[fixed])
    assert (await runtime.get_service("vllm-gemma4")).latest_ready_revision == fixed


async def test_phases_appear_in_order_as_the_clock_runs(sandbox: Sandbox) -> None:
    scenario = SCENARIOS["kv-cache-too-small"]
    rev = await sandbox.deploy_by_hand(scenario)
    sandbox.clock.advance(PULL_S + 5)
    sandbox.tick()
    texts = _texts(sandbox, rev)
    assert any("Starting to load model" in t for t in texts)
    assert not any("checkpoint shards" in t for t in texts)
    sandbox.clock.advance(200)
    sandbox.tick()
    assert any("checkpoint shards" in t for t in _texts(sandbox, rev))
    assert rev in sandbox.lifecycle.active


def test_no_credentials_means_the_sandbox(tmp_path: object) -> None:
    s = load_settings()
    assert no_google_credentials(s, {"CLOUDSDK_CONFIG": "/nonexistent"})
    assert not no_google_credentials(s, {"GOOGLE_APPLICATION_CREDENTIALS": "/k.json"})
    assert not no_google_credentials(s, {"K_SERVICE": "gemma-sre"})
    assert not no_google_credentials(load_settings(google_cloud_project="p"), {"CLOUDSDK_CONFIG": "/nonexistent"})


def test_the_clock_runs_at_its_speed_and_only_forward() -> None:
    now = [100.0]
    clock = SandboxClock(speed=30, monotonic=lambda: now[0])
    now[0] += 2
    assert clock.now() == 60
    clock.advance(40)
    assert clock.now() == 100
    assert clock.real_seconds(300) == 10
    with pytest.raises(ValueError):
        clock.advance(-1)

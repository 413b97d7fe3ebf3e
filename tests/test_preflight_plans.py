"""Preflight in deploy and redeploy plans, through the command surface and the write flow: a failed check shows
its fix and the plan has no Confirm (a forged one is refused); a check that could not run is a warning and
Confirm stays; a redeploy to another catalog model (what the agent may propose) is checked the same way."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from bot.deps import Deps
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.preflight_standins import PreflightStandIns
from bot.settings import Settings
from bot.wiring import build_deps, close_deps
from handlers.reply import CANCEL_ACTION, CONFIRM_ACTION
from skills.capacity.fit import load_catalog
from skills.capacity.gpu_quota import GPU_QUOTA_IDS, QUOTA_SERVICE
from skills.capacity.image_compat import default_image
from skills.diagnosis.findings import ProposedAction
from skills.diagnosis.remediation import sanitize_action
from tests.deploy_helpers import click, command, plan_id_of

PROFILE_REPO = load_catalog().model("gemma-4-12b-qat").hf_repo


@pytest.fixture(scope="module")
def standins() -> Iterator[PreflightStandIns]:
    s = PreflightStandIns().start()
    yield s
    s.close()


@pytest.fixture
async def deps(settings: Settings, standins: PreflightStandIns, redis_client: Any) -> AsyncIterator[Deps]:
    standins.seed()
    st = settings.model_copy(update={**standins.settings_update(), "google_cloud_location": "europe-west1"})
    d = build_deps(st)
    yield d
    await close_deps(d)


def _preflight_text(reply: Any) -> str:
    return next(s.text or "" for s in reply.sections if s.heading == "Preflight")


async def test_healthy_deploy_plan_lists_every_check_and_can_be_confirmed(deps: Deps) -> None:
    reply, _ = await command(deps, "deploy gemma4-12b-qat-l4")
    text = _preflight_text(reply)
    assert text.count("✓") == 4, text  # checkpoint, region, image, quota
    assert f"checkpoint `{PROFILE_REPO}` exists" in text and "could not check" not in text
    assert plan_id_of(reply)


async def test_missing_tag_is_refused_at_plan_time_with_the_fix(
    deps: Deps, standins: PreflightStandIns, cloud_run: CloudRunStandIn
) -> None:
    standins.registry.remove(default_image("nvidia-l4"))
    reply, _ = await command(deps, "deploy gemma4-12b-qat-l4")
    assert reply is not None
    text = _preflight_text(reply)
    assert "✗ image `vllm/vllm-openai:v0.25.1-cu129` does not exist" in text and "Fix:" in text
    assert not any(b.action_id == CONFIRM_ACTION for b in reply.buttons)
    assert any("Preflight failed" in (s.text or "") for s in reply.sections)
    plan_id = next(b.value for b in reply.buttons if b.action_id == CANCEL_ACTION)
    refusal, _ = await click(deps, CONFIRM_ACTION, plan_id)  # a forged Confirm
    assert refusal is not None and "cannot be confirmed" in refusal.title
    assert not [r for r in cloud_run.requests if r[0] != "GET"]


async def test_missing_checkpoint_and_zero_quota_both_show(deps: Deps, standins: PreflightStandIns) -> None:
    del standins.hub.repos[PROFILE_REPO]
    standins.quotas.set(QUOTA_SERVICE, GPU_QUOTA_IDS["nvidia-l4"], "europe-west1", 0)
    reply, _ = await command(deps, "deploy gemma4-12b-qat-l4")
    text = _preflight_text(reply)
    assert "✗ checkpoint" in text and "✗ the project has no nvidia-l4 quota in europe-west1" in text
    assert not any(b.action_id == CONFIRM_ACTION for b in reply.buttons)


async def test_a_check_that_could_not_run_warns_but_does_not_block(deps: Deps, standins: PreflightStandIns) -> None:
    standins.quotas.values.clear()  # the API does not know the quota id
    reply, _ = await command(deps, "deploy gemma4-12b-qat-l4")
    text = _preflight_text(reply)
    assert "? could not check: the Cloud Quotas API does not know" in text
    assert "they do not block Confirm" in text
    assert plan_id_of(reply)


async def test_redeploy_to_another_catalog_model_goes_through_the_same_preflight(
    deps: Deps, standins: PreflightStandIns
) -> None:
    ok, _ = await command(deps, "deploy gemma4-12b-qat-l4")
    await click(deps, CONFIRM_ACTION, plan_id_of(ok))
    other = load_catalog().model("gemma-4-e4b-qat")
    del standins.hub.repos[other.hf_repo]
    # what the agent may propose: a catalog name only (a repo id or path is not one)
    smuggled, note = sanitize_action(ProposedAction(action="redeploy", params={"model": "evil/gemma-4-12b"}))
    assert smuggled is None and note
    action, _ = sanitize_action(ProposedAction(action="redeploy", params={"model": other.name, "model_source": "hub"}))
    assert action is not None
    plan = await deps.writes.propose(action.action, action.params, user_id="UDEPLOYER", channel_id="C1")
    checks = {c.name: c for c in plan.preflight}
    assert checks["checkpoint"].status == "fail" and other.hf_repo in checks["checkpoint"].text
    assert "Preflight failed" in plan.blocked()


async def test_redeploy_to_another_catalog_image_goes_through_the_same_preflight(
    deps: Deps, standins: PreflightStandIns
) -> None:
    ok, _ = await command(deps, "deploy gemma4-12b-qat-l4")
    await click(deps, CONFIRM_ACTION, plan_id_of(ok))
    # an image outside the compatibility data is not a fix the agent can propose
    smuggled, note = sanitize_action(ProposedAction(action="redeploy", params={"image": "evil/vllm:latest"}))
    assert smuggled is None and note
    # a catalog image the registry no longer has is caught at plan time, like a deploy's
    other = "vllm/vllm-openai:v0.24.0-cu129"
    standins.registry.remove(other)
    action, _ = sanitize_action(ProposedAction(action="redeploy", params={"image": other}))
    assert action is not None
    plan = await deps.writes.propose(action.action, action.params, user_id="UDEPLOYER", channel_id="C1")
    checks = {c.name: c for c in plan.preflight}
    assert checks["image"].status == "fail" and other in checks["image"].text
    assert "Preflight failed" in plan.blocked()


async def test_quota_command_reads_the_cloud_quotas_api(deps: Deps, standins: PreflightStandIns) -> None:
    standins.quotas.set(QUOTA_SERVICE, GPU_QUOTA_IDS["nvidia-l4"], "europe-west1", 0)
    reply, _ = await command(deps, "quota")
    assert reply is not None
    lines = (reply.sections[0].text or "").splitlines()
    assert lines[0] == "• `europe-west1` (deploys go here): :x: 0 GPU(s)"
    assert "• `us-east4`: :white_check_mark: 3 GPU(s)" in lines
    assert "NvidiaL4GpuAllocNoZonalRedundancyPerProjectRegion" in (reply.sections[1].text or "")
    standins.quotas.hold_s = 10.0  # a slow API: each region says it could not be read, within the limit
    try:
        slow = deps.settings.model_copy(update={"preflight_timeout_s": 0.3})
        d = build_deps(slow)
        reply, _ = await command(d, "quota nvidia-rtx-pro-6000")
        assert reply is not None and "could not read (no answer within 0.3 s)" in (reply.sections[0].text or "")
        await close_deps(d)
    finally:
        standins.quotas.hold_s = 0.0


async def test_deploy_from_a_bucket_checks_the_folder_it_will_read(
    settings: Settings, standins: PreflightStandIns, redis_client: Any
) -> None:
    standins.seed()
    standins.gcs.buckets.clear()
    standins.stock_bucket("weights")
    folder = PROFILE_REPO.rsplit("/", 1)[-1]
    update = {
        **standins.settings_update(),
        "google_cloud_location": "europe-west1",
        "model_bucket": "weights",
        "preflight_cache_s": 0,  # the bucket changes between the two plans below
    }
    d = build_deps(settings.model_copy(update=update))
    try:
        reply, _ = await command(d, "deploy gemma4-12b-qat-l4")
        text = _preflight_text(reply)
        assert f"✓ gs://weights/{folder}/ holds config.json and 1 safetensors file(s)." in text
        assert "checkpoint" not in text  # the Hub is not where this service reads its weights
        del standins.gcs.buckets["weights"][f"{folder}/model-00001-of-00001.safetensors"]
        reply, _ = await command(d, "deploy gemma4-12b-qat-l4")
        text = _preflight_text(reply)
        assert f"✗ gs://weights/{folder}/ has no *.safetensors." in text and f"hf download {PROFILE_REPO}" in text
        assert not any(b.action_id == CONFIRM_ACTION for b in reply.buttons)
    finally:
        await close_deps(d)


async def test_quota_command_shows_increase_requests(deps: Deps, standins: PreflightStandIns) -> None:
    qid = GPU_QUOTA_IDS["nvidia-l4"]
    standins.quotas.set(QUOTA_SERVICE, qid, "europe-west1", 0)
    standins.quotas.preferences.clear()
    for i in range(3):  # other quotas' preferences, over more than one page of the listing
        standins.quotas.request("compute.googleapis.com", f"Other{i}", "europe-west1", 8, 8, False)
    standins.quotas.request(QUOTA_SERVICE, qid, "europe-west1", 3, 0, True)
    standins.quotas.request(QUOTA_SERVICE, qid, "us-east4", 3, 3, False)
    standins.quotas.page_size = 2
    asked_before = len(standins.quotas.requests)
    try:
        reply, _ = await command(deps, "quota")
    finally:
        standins.quotas.preferences.clear()
        standins.quotas.page_size = 100
    listed = [r for r in standins.quotas.requests[asked_before:] if r.endswith("/quotaPreferences")]
    assert len(listed) == 3  # 5 preferences, 2 a page: the client followed nextPageToken
    assert reply is not None
    lines = (reply.sections[0].text or "").splitlines()
    assert lines[0] == (
        "• `europe-west1` (deploys go here): :x: 0 GPU(s) · request for 3, granted 0 (pending Google's review)"
    )
    assert "• `us-east4`: :white_check_mark: 3 GPU(s) · request for 3, granted 3 (decided)" in lines


# --- GPU quota in its unit, max instances against it (issue 50) -----------------------------------------------


@pytest.fixture
async def rtx_deps(settings: Settings, standins: PreflightStandIns, redis_client: Any) -> AsyncIterator[Deps]:
    """A project in europe-west4, where Cloud Run offers the RTX Pro 6000 (prices.yaml)."""
    standins.seed()
    st = settings.model_copy(update={**standins.settings_update(), "google_cloud_location": "europe-west4"})
    d = build_deps(st)
    yield d
    await close_deps(d)


RTX_QUOTA = GPU_QUOTA_IDS["nvidia-rtx-pro-6000"]


async def test_rtx_quota_reads_in_milli_gpus_and_max_instances_above_it_is_refused(
    rtx_deps: Deps, standins: PreflightStandIns
) -> None:
    """`quotas info` gives 1000 for one RTX Pro 6000 (milli-GPUs); max instances 3 is a deploy Cloud Run refuses
    ("Max instances must be set to 1 or fewer in order to set GPU requirements"): ✗ with both fixes."""
    standins.quotas.set(QUOTA_SERVICE, RTX_QUOTA, "europe-west4", 1000)
    reply, _ = await command(rtx_deps, "deploy gemma4-31b-qat-rtx --max-instances 3")
    assert reply is not None
    text = _preflight_text(reply)
    assert "1000 GPU" not in text, text
    assert "✗" in text and "1 GPU" in text and "max instances 3" in text, text
    assert "--max-instances 1" in text and RTX_QUOTA in text, text  # lower max instances, or request quota
    assert not any(b.action_id == CONFIRM_ACTION for b in reply.buttons)
    # the same quota holds one instance: the default profile (max instances 1) passes
    reply, _ = await command(rtx_deps, "deploy gemma4-31b-qat-rtx")
    text = _preflight_text(reply)
    assert "✓ `NvidiaRtxPro6000GpuAllocNoZonalRedundancyPerProjectRegion` in europe-west4: 1 GPU" in text, text
    assert plan_id_of(reply)


async def test_l4_quota_below_max_instances_is_refused_not_noted(deps: Deps, standins: PreflightStandIns) -> None:
    standins.quotas.set(QUOTA_SERVICE, GPU_QUOTA_IDS["nvidia-l4"], "europe-west1", 2)
    reply, _ = await command(deps, "deploy gemma4-12b-qat-l4 --max-instances 3")
    assert reply is not None
    text = _preflight_text(reply)
    assert "✗" in text and "2 GPU(s)" in text and "--max-instances 2" in text, text
    assert not any(b.action_id == CONFIRM_ACTION for b in reply.buttons)


# --- the HF token: optional for Gemma 4, needed for a gated or private checkpoint (issue 50) --------------------


async def test_a_gemma4_checkpoint_is_pulled_without_an_hf_token(deps: Deps, standins: PreflightStandIns) -> None:
    """Gemma 4 checkpoints are Apache-2.0 and not gated: the plan pulls them with no HF_TOKEN (no secret to
    create), preflight says so, and a token is named as needed only for a gated or private checkpoint."""
    plan = await deps.writes.propose("deploy", {"profile": "gemma4-12b-qat-l4"}, user_id="UDEPLOYER", channel_id="C1")
    container = (plan.spec or {})["template"]["containers"][0]
    assert all(e.get("name") != "HF_TOKEN" for e in container.get("env") or []), container.get("env")
    checks = {c.name: c for c in plan.preflight}
    assert checks["checkpoint"].status == "ok" and "not gated" in checks["checkpoint"].text, checks["checkpoint"]
    note = next(n for n in plan.notes if "Hub" in n and "token" in n)
    assert "without an HF token" in note and "gated or private" in note, note


async def test_a_gated_checkpoint_without_a_token_is_refused_with_the_fix(
    deps: Deps, standins: PreflightStandIns
) -> None:
    # Should the Hub gate a catalog checkpoint (as it gates Gemma 3), a service with no HF_TOKEN could not pull it.
    standins.hub.add(PROFILE_REPO, gated="manual")
    plan = await deps.writes.propose("deploy", {"profile": "gemma4-12b-qat-l4"}, user_id="UDEPLOYER", channel_id="C1")
    c = {c.name: c for c in plan.preflight}["checkpoint"]
    assert c.status == "fail" and "gated" in c.text and "no HF_TOKEN" in c.text, c
    assert "hf_token_from_secret=True" in c.fix, c.fix


async def test_quota_command_shows_the_rtx_quota_in_gpus(rtx_deps: Deps, standins: PreflightStandIns) -> None:
    standins.quotas.set(QUOTA_SERVICE, RTX_QUOTA, "europe-west4", 1000)
    standins.quotas.request(QUOTA_SERVICE, RTX_QUOTA, "europe-west4", 2000, None, True)
    try:
        reply, _ = await command(rtx_deps, "quota nvidia-rtx-pro-6000")
    finally:
        standins.quotas.preferences.clear()
    assert reply is not None
    text = "\n".join(s.text or "" for s in reply.sections)
    assert "1000 GPU" not in text and "request for 2000" not in text, text
    assert "• `europe-west4` (deploys go here): :white_check_mark: 1 GPU(s) · request for 2 (pending" in text, text

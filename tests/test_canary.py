"""Canary deploys on the sandbox, on its stopped clock (time moves only when the test advances it): `--canary N`
plans a tagged traffic split with its cost and quota, the comparison is posted in the deploy's thread and
updated, a regressing canary is proposed for rollback (or rolled back on its own when enabled), a holding one is
promoted, nothing is judged below the minimum sample, and a canary the GPU quota cannot hold is refused."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from bot.deps import Deps
from bot.mcp_tools import Call, build_tools
from bot.sandbox.attach import build_sandbox_deps
from bot.sandbox.clock import SandboxClock
from bot.sandbox.cloud import Sandbox
from bot.settings import load_settings
from bot.wiring import close_deps
from handlers.arg_models import ServiceArgs
from handlers.reply import CONFIRM_ACTION, PLAN_ACTION, Reply
from skills.audit import latest
from skills.capacity.gpu_quota import GPU_QUOTA_IDS, QUOTA_SERVICE
from skills.observe.model_metrics import Percentiles
from skills.observe.revision_compare import RevisionEvidence, Thresholds, compare
from tests.conftest import REDIS_URL
from tests.deploy_helpers import RecordingResponder, click, command, plan_id_of
from tests.eventually import eventually

SERVICE = "vllm-gemma4"
DEPLOY = "deploy gemma4-12b-qat-l4 --max-model-len 8192 --canary 20"


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    sb = Sandbox(clock=SandboxClock(speed=0), image=load_settings().vllm_image).start()
    yield sb
    sb.close()


async def _deps(sandbox: Sandbox, key_prefix: str, **settings: Any) -> Deps:
    base = load_settings(key_prefix=key_prefix, redis_url=REDIS_URL, deployer_user_ids="UDEPLOYER", **settings)
    return build_sandbox_deps(sandbox.configure(base), sandbox, None)


@pytest.fixture
async def deps(sandbox: Sandbox, key_prefix: str, redis_client: Any) -> AsyncIterator[Deps]:
    d = await _deps(sandbox, key_prefix)
    yield d
    await close_deps(d)


def shown(reply: Reply) -> str:
    parts = [reply.title, reply.context or ""]
    for s in reply.sections:
        parts += [s.heading or "", s.text or "", s.code or ""]
    return "\n".join(parts)


def traffic(sandbox: Sandbox) -> dict[str, int]:
    statuses = sandbox.cloud_run.services[SERVICE].get("trafficStatuses") or []
    return {s["revision"]: s["percent"] for s in statuses if s.get("percent")}


async def run_on_clock(sandbox: Sandbox, work: Any, step_s: float = 60.0) -> Any:
    """Run `work` while the sandbox's clock moves `step_s` every 20 ms of real time (cold starts, windows)."""
    task = asyncio.ensure_future(work)

    def moved() -> bool:
        if not task.done():
            sandbox.clock.advance(step_s)
        return task.done()

    assert await eventually(moved, timeout=60.0)
    return task.result()


async def canary_thread(deps: Deps, sandbox: Sandbox) -> tuple[RecordingResponder, Reply]:
    """Plan a 20% canary, confirm it, and follow it to its proposal; (the thread's responder, the proposal)."""
    plan, _ = await command(deps, DEPLOY)
    responder = RecordingResponder()
    await run_on_clock(sandbox, click(deps, CONFIRM_ACTION, plan_id_of(plan), responder=responder))
    return responder, responder.posts[-1][1]


def comparisons(responder: RecordingResponder) -> list[str]:
    titles = [r.title for _, r, _ in responder.posts] + [r.title for _, r in responder.updates]
    return [t for t in titles if t.startswith("Canary `")]


def button(reply: Reply, starts: str) -> str:
    return next(b.value for b in reply.buttons if b.label.startswith(starts) and b.action_id == PLAN_ACTION)


async def test_the_plan_states_cost_cold_start_quota_and_the_tagged_split(deps: Deps, sandbox: Sandbox) -> None:
    before = traffic(sandbox)
    plan, _ = await command(deps, DEPLOY)
    assert plan is not None
    baseline = next(iter(before))
    assert "20% of traffic to `vllm-gemma4-canary-" in plan.title and f"80% stays on `{baseline}`" in plan.title
    text = shown(plan)
    assert "Canary cost: a second GPU instance" in text and "/h while the canary runs" in text
    assert "The canary serves only once ready: a cold start of" in text
    assert "the canary needs 2 (the serving revision's max 1 + the canary's 1)" in text
    assert f"traffic: latest=100% -> {baseline}=80%, vllm-gemma4-canary-" in text
    assert "--no-traffic --tag=canary" in text and "update-traffic" in text
    assert traffic(sandbox) == before  # a plan changes nothing


async def test_a_regressing_canary_is_proposed_for_rollback_and_a_click_rolls_it_back(
    deps: Deps, sandbox: Sandbox
) -> None:
    sandbox.fleet.arm("canary-regresses")
    baseline = next(iter(traffic(sandbox)))
    responder, proposal = await canary_thread(deps, sandbox)
    seen = comparisons(responder)
    assert seen[0].endswith("not enough traffic yet")  # posted at once, then updated in place
    assert seen[-1].endswith("the canary regresses")
    canary = next(r for r in traffic(sandbox) if r != baseline)
    assert traffic(sandbox) == {baseline: 80, canary: 20}
    assert proposal.title == f":x: Canary `{canary}` regresses: roll it back?"
    why = shown(proposal)
    assert "error rate 8.0% against 0.2%" in why and "p95 latency" in why  # per revision: filtered by revision
    assert proposal.buttons[0].label.startswith("Roll back: 100% to")  # the recommended action first

    plan, _ = await click(deps, PLAN_ACTION, button(proposal, "Roll back"))
    assert plan is not None and plan.title.startswith(":clipboard: Plan: Roll `vllm-gemma4` back")
    await run_on_clock(sandbox, click(deps, CONFIRM_ACTION, plan_id_of(plan)))
    assert traffic(sandbox) == {baseline: 100}  # the canary at 0%
    entries = await latest(deps.redis, deps.settings.key("audit"))
    assert (entries[0].action, entries[0].user_id, entries[0].result) == ("rollback", "UDEPLOYER", "ok")


async def test_a_holding_canary_is_proposed_for_promotion_and_promoted(deps: Deps, sandbox: Sandbox) -> None:
    sandbox.fleet.arm("canary-holds")
    baseline = next(iter(traffic(sandbox)))
    responder, proposal = await canary_thread(deps, sandbox)
    assert comparisons(responder)[-1].endswith("the canary holds")
    canary = next(r for r in traffic(sandbox) if r != baseline)
    assert proposal.title == f":white_check_mark: Canary `{canary}` holds: promote it?"
    assert proposal.buttons[0].label == f"Promote: 100% to {canary}"

    plan, _ = await click(deps, PLAN_ACTION, button(proposal, "Promote"))
    assert (
        plan is not None
        and plan.title == f":clipboard: Plan: Promote `{canary}` on `vllm-gemma4`: 100% of traffic to it"
    )
    await run_on_clock(sandbox, click(deps, CONFIRM_ACTION, plan_id_of(plan)))
    assert traffic(sandbox) == {canary: 100}
    entries = await latest(deps.redis, deps.settings.key("audit"))
    assert (entries[0].action, entries[0].target, entries[0].result) == ("promote", canary, "ok")
    # The same button again: the promote would change nothing, so it is refused with the reason (issue 25).
    again, _ = await click(deps, PLAN_ACTION, button(proposal, "Promote"))
    assert again is not None and "the promote would change nothing" in shown(again)
    assert not [b for b in again.buttons if b.action_id == CONFIRM_ACTION]


async def test_after_a_promoted_canary_the_next_deploy_gets_a_revision_name_of_its_own(
    deps: Deps, sandbox: Sandbox
) -> None:
    sandbox.fleet.arm("canary-holds")
    _, proposal = await canary_thread(deps, sandbox)
    plan, _ = await click(deps, PLAN_ACTION, button(proposal, "Promote"))
    await run_on_clock(sandbox, click(deps, CONFIRM_ACTION, plan_id_of(plan)))
    canary = next(iter(traffic(sandbox)))
    # The service's template still names the canary's revision; a write that reused the name would be refused.
    plain, _ = await command(deps, DEPLOY.replace("8192 --canary 20", "4096"))
    assert plain is not None and "- template.revision: " + canary in shown(plain)
    await run_on_clock(sandbox, click(deps, CONFIRM_ACTION, plan_id_of(plain)))
    new = next(iter(traffic(sandbox)))
    assert new != canary and not new.startswith("vllm-gemma4-canary") and traffic(sandbox) == {new: 100}


@pytest.mark.parametrize("write", ["scale 0 2", "redeploy"])
async def test_after_a_promoted_canary_other_writes_do_not_reuse_its_revision_name(
    deps: Deps, sandbox: Sandbox, write: str
) -> None:
    sandbox.fleet.arm("canary-holds")
    _, proposal = await canary_thread(deps, sandbox)
    plan, _ = await click(deps, PLAN_ACTION, button(proposal, "Promote"))
    await run_on_clock(sandbox, click(deps, CONFIRM_ACTION, plan_id_of(plan)))
    canary = next(iter(traffic(sandbox)))
    if write == "redeploy":
        reply, _ = await click(deps, PLAN_ACTION, json.dumps({"action": "redeploy", "params": {"max_model_len": 4096}}))
    else:
        reply, _ = await command(deps, write)
    assert reply is not None and "- template.revision: " + canary in shown(reply)
    await run_on_clock(sandbox, click(deps, CONFIRM_ACTION, plan_id_of(reply)))
    svc = sandbox.cloud_run.services[SERVICE]
    new = svc["latestReadyRevision"].rsplit("/", 1)[-1]  # created under a name of Cloud Run's, and ready
    assert new == svc["latestCreatedRevision"].rsplit("/", 1)[-1] and new != canary


async def test_a_clear_regression_is_rolled_back_automatically_when_enabled(
    sandbox: Sandbox, key_prefix: str, redis_client: Any
) -> None:
    deps = await _deps(sandbox, key_prefix, canary_auto_rollback=True, canary_rollback_identity="canary-bot")
    try:
        sandbox.fleet.arm("canary-regresses")
        baseline = next(iter(traffic(sandbox)))
        responder, said = await canary_thread(deps, sandbox)
        assert comparisons(responder)[-1].endswith("the canary regresses")  # the thread shows what it acted on
        assert said.title.startswith(f":rewind: Rolled back automatically: 100% of traffic on `{baseline}`")
        assert "Why: error rate 8.0% against 0.2%" in shown(said)
        assert "by `canary-bot`" in (said.context or "")
        assert traffic(sandbox) == {baseline: 100}
        entries = await latest(deps.redis, deps.settings.key("audit"))
        auto = entries[0]
        assert (auto.action, auto.user_id, auto.result, auto.target) == ("rollback", "canary-bot", "ok", baseline)
        assert auto.params["automatic"] is True and "error rate" in auto.params["reason"]
        assert not await deps.writes.gate.lock(SERVICE).holder()  # the lock it took is released
    finally:
        await close_deps(deps)


async def test_no_verdict_below_the_minimum_sample(sandbox: Sandbox, key_prefix: str, redis_client: Any) -> None:
    # Even a canary that fails 8% of its requests is not judged on fewer requests than the minimum.
    deps = await _deps(sandbox, key_prefix, canary_min_requests=100_000, canary_max_wait_s=1800)
    try:
        sandbox.fleet.arm("canary-regresses")
        responder, said = await canary_thread(deps, sandbox)
        assert all(t.endswith("not enough traffic yet") for t in comparisons(responder))
        assert said.title.startswith(":warning: Canary `") and "no verdict (not enough traffic after" in said.title
        assert {b.label.split(":")[0] for b in said.buttons} == {"Roll back", "Promote"}  # a human may still decide
    finally:
        await close_deps(deps)


def test_compare_needs_the_minimum_on_both_revisions_before_any_verdict() -> None:
    slow = Percentiles(count=40, p95=9.0)
    base = RevisionEvidence(
        revision="a", role="baseline", requests=500, error_rate=0.0, e2e=Percentiles(count=500, p95=2)
    )
    canary = RevisionEvidence(revision="b", role="canary", requests=40, error_rate=0.5, e2e=slow)
    out = compare(base, canary, Thresholds(min_requests=50), window_s=600)
    assert out.verdict == "not_enough_traffic" and out.reasons == ["`b` (canary) finished 40 of the 50 requests needed"]
    canary.requests = 50
    assert compare(base, canary, Thresholds(min_requests=50), window_s=600).verdict == "regresses"


async def test_a_canary_the_gpu_quota_cannot_hold_is_refused(deps: Deps, sandbox: Sandbox) -> None:
    # One L4 in the region: enough for the serving revision, not for a second one beside it.
    sandbox.preflight.quotas.set(QUOTA_SERVICE, GPU_QUOTA_IDS["nvidia-l4"], "us-central1", 1)
    plan, _ = await command(deps, DEPLOY)
    assert plan is not None
    text = shown(plan)
    assert "Canary refused: it needs 2 nvidia-l4 GPU(s) at once in us-central1" in text
    assert "quota `NvidiaL4GpuAllocNoZonalRedundancyPerProjectRegion` is 1 GPU(s)" in text
    assert not any(b.action_id == CONFIRM_ACTION for b in plan.buttons)
    # Without --canary the same deploy fits the quota.
    plain, _ = await command(deps, DEPLOY.replace(" --canary 20", ""))
    assert plain is not None and any(b.action_id == CONFIRM_ACTION for b in plain.buttons)


async def test_a_redeploy_can_be_a_canary_too(deps: Deps, sandbox: Sandbox) -> None:
    baseline = next(iter(traffic(sandbox)))
    plan = await deps.writes.propose("redeploy", {"max_model_len": 8192, "canary": 10}, user_id="U1", channel_id="C1")
    assert plan.kind == "redeploy" and plan.params["canary"] == 10 and plan.canary["baseline"] == baseline
    assert plan.spec is not None and [t["percent"] for t in plan.spec["traffic"]] == [90, 10]
    assert [t["tag"] for t in plan.spec["traffic"]] == ["stable", "canary"]
    assert plan.spec["template"]["revision"] == plan.canary["revision"] and not plan.blocked()


async def test_a_canary_needs_one_revision_serving_everything(deps: Deps, sandbox: Sandbox) -> None:
    sandbox.fleet.arm("canary-holds")
    await canary_thread(deps, sandbox)  # a canary is running: traffic is split
    reply, _ = await command(deps, DEPLOY.replace("8192", "4096"))
    assert reply is not None and "is split" in reply.title
    assert "Promote or roll back the running canary first" in shown(reply)


async def test_a_scale_during_a_canary_is_refused_and_changes_nothing(deps: Deps, sandbox: Sandbox) -> None:
    """A scale sends 100% to the revision it makes: during a canary it would end the comparison unjudged (the
    console model's long run saw one quietly promote the canary)."""
    sandbox.fleet.arm("canary-holds")
    await canary_thread(deps, sandbox)
    split = traffic(sandbox)
    reply, _ = await command(deps, "scale 0 1")
    assert reply is not None and "is split" in reply.title and "end the canary unjudged" in reply.title
    assert "Promote or roll back the running canary first" in shown(reply) and traffic(sandbox) == split


async def test_a_plain_rollback_during_a_canary_goes_back_to_the_stable_revision(deps: Deps, sandbox: Sandbox) -> None:
    sandbox.fleet.arm("canary-holds")
    baseline = next(iter(traffic(sandbox)))
    await canary_thread(deps, sandbox)
    plan, _ = await command(deps, "rollback")
    assert (
        plan is not None and plan.title == f":clipboard: Plan: Roll `vllm-gemma4` back: 100% of traffic to `{baseline}`"
    )


@pytest.mark.parametrize("pct", ["0", "51", "x"])
async def test_a_canary_percent_out_of_range_is_refused(deps: Deps, pct: str) -> None:
    reply, _ = await command(deps, DEPLOY.replace("--canary 20", f"--canary {pct}"))
    assert reply is not None and reply.title.startswith(":warning: Invalid canary")


async def test_revisions_show_the_canarys_traffic_tags(deps: Deps, sandbox: Sandbox) -> None:
    sandbox.fleet.arm("canary-holds")
    baseline = next(iter(traffic(sandbox)))
    await canary_thread(deps, sandbox)  # the split stays until Promote or Roll back
    canary = next(r for r in traffic(sandbox) if r != baseline)
    reply, _ = await command(deps, "revisions")
    assert reply is not None
    rows = {line.split("`")[1]: line for line in shown(reply).splitlines() if line.startswith("`")}
    assert "20% traffic" in rows[canary] and "tags: `canary` (http" in rows[canary]
    assert "80% traffic" in rows[baseline] and "tags: `stable` (http" in rows[baseline]
    # The MCP revisions tool says the same, and carries each tag's URL in its structured answer.
    result = await build_tools()["revisions"].run(Call(deps=deps, caller="U1"), ServiceArgs())
    assert f"{canary}: ready, 20% traffic, tags: canary" in result.text
    listed = {r["name"]: r for r in result.structured["revisions"]}
    assert set(listed[baseline]["tags"]) == {"stable"} and listed[canary]["tags"]["canary"].startswith("http")


async def test_no_error_share_is_shown_before_the_window_holds_a_request(deps: Deps, sandbox: Sandbox) -> None:
    """The comparison's first row opens the window: no request in it yet, so no error share either (Cloud
    Monitoring's share over the minutes before it would sit beside vLLM's count of 0)."""
    sandbox.fleet.arm("canary-regresses")  # a canary that fails requests: an error share would show at once
    responder, _ = await canary_thread(deps, sandbox)
    tables = [s.code or "" for _, r, _ in responder.posts for s in r.sections if r.title.startswith("Canary `")]
    tables += [s.code or "" for _, r in responder.updates for s in r.sections if r.title.startswith("Canary `")]
    rows = [line.split() for t in tables for line in t.splitlines()[1:] if line.strip()]
    assert rows, tables
    for row in rows:  # role, revision, requests, errors, ...
        assert row[2] != "0" or row[3] == "—", rows


async def test_the_rtx_quota_in_milli_gpus_holds_one_instance_not_a_canary_beside_it(
    deps: Deps, sandbox: Sandbox
) -> None:
    # `quotas info` reads 1000 for one RTX Pro 6000 (milli-GPUs): one instance, not the serving one and a canary.
    sandbox.preflight.quotas.set(QUOTA_SERVICE, GPU_QUOTA_IDS["nvidia-rtx-pro-6000"], "us-central1", 1000)
    plan, _ = await command(deps, "deploy gemma4-31b-qat-rtx --canary 20")
    assert plan is not None
    text = shown(plan)
    assert "Canary refused: it needs 2 nvidia-rtx-pro-6000 GPU(s) at once in us-central1" in text, text
    assert "quota `NvidiaRtxPro6000GpuAllocNoZonalRedundancyPerProjectRegion` is 1 GPU(s)" in text, text
    assert not any(b.action_id == CONFIRM_ACTION for b in plan.buttons)

"""The write gate on real Redis and the Cloud Run stand-in, below the Slack layer: who may confirm, what each
refusal says and audits, and what the audit records when a confirmed run is cut short."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.sandbox.cloud_run_api import CloudRunStandIn
from skills.deploy.audit import latest, pending
from skills.deploy.confirm import Refused, Where, WriteGate, cancel, claim, is_deployer, precheck, run_claimed
from skills.deploy.plans import Plan, PlanStore
from skills.ports import OperationProgress
from tests.eventually import eventually
from tests.fake_target import KIND, NoRevisionsTarget

pytest_plugins = ["tests.deploy_fixtures"]


def _gate(deps: Any, **kw: Any) -> WriteGate:
    s = deps.settings
    plans = PlanStore(deps.redis, s.key("plan"), s.plan_ttl_s)
    fields: dict[str, Any] = {
        "store": deps.redis,
        "plans": plans,
        "lock_prefix": s.key("lock", "service"),
        "lock_ttl_s": 60,
        "audit_key": s.key("audit"),
        "deployers": frozenset({"UDEP"}),
    }
    fields.update(kw)
    return WriteGate(**fields)


async def _plan(gate: WriteGate, **kw: Any) -> Plan:
    fields: dict[str, Any] = {"kind": "scale", "service": "vllm-gemma4", "summary": "scale", "created_by": "UAUTH"}
    fields.update(kw)
    return await gate.plans.save(Plan(**fields))


async def test_a_usergroup_port_without_a_configured_group_grants_nothing(deps: Any) -> None:
    async def everyone(group: str) -> list[str]:
        return ["UANY"]

    assert not await is_deployer(_gate(deps, usergroup_members=everyone), "UANY")  # no DEPLOYER_USERGROUP_ID
    assert await is_deployer(_gate(deps, deployer_usergroup="S1", usergroup_members=everyone), "UANY")
    assert not await is_deployer(_gate(deps, deployer_usergroup="S1"), "UANY")  # the group, but no way to read it


async def test_each_refusal_says_why_and_what_to_do_and_is_audited(deps: Any) -> None:
    gate = _gate(deps)
    plan = await _plan(gate, channel_id="C1", thread_ts="111.1")

    async def refusal(coro: Any) -> Refused:
        with pytest.raises(Refused) as exc:
            await coro
        return exc.value

    r = await refusal(precheck(gate, plan.id, "UDEP", where=Where("C2", "111.1")))
    assert r.message == "This plan was made in another channel; it can only be confirmed or cancelled there."
    r = await refusal(precheck(gate, plan.id, "UDEP", where=Where("C1", "")))
    assert r.message == "This plan was made in another thread; it can only be confirmed or cancelled there."
    assert r.hint == "Use the plan's own buttons, or plan again here."
    r = await refusal(cancel(gate, plan.id, "UDEP", where=Where("C1", "222.2")))
    assert r.message.startswith("This plan was made in another thread")
    r = await refusal(cancel(gate, plan.id, "UOTHER", where=Where("C1", "111.1")))
    assert r.message == "Only <@UAUTH> (who asked for it) or a deployer can cancel this plan."
    assert r.hint == "It expires on its own if nobody confirms it."
    [other, wrong_thread, *_] = await latest(deps.redis, gate.audit_key)
    assert (other.result, other.detail) == ("refused", "cancel by someone other than the author or a deployer")
    assert (wrong_thread.result, wrong_thread.detail) == ("refused", "cancel from another channel or thread")
    assert other.plan_id == plan.id and other.user_id == "UOTHER" and other.action == "scale"

    await cancel(gate, plan.id, "UAUTH", where=Where("C1", "111.1"))
    [done, *_] = await latest(deps.redis, gate.audit_key)
    assert (done.result, done.detail, done.user_id, done.plan_id) == ("cancelled", "", "UAUTH", plan.id)
    r = await refusal(cancel(gate, plan.id, "UAUTH", where=Where("C1", "111.1")))
    assert r.message == "This plan is no longer pending (expired, cancelled or already confirmed)."


async def test_a_run_cut_short_stays_pending_and_leaves_no_lock_or_plan(deps: Any, cloud_run: CloudRunStandIn) -> None:
    """A watch cut short says nothing it did not see: the write stays `pending` (its outcome owed, reconciled from
    the service's real state later; issue 25), and the lock and plan are released."""
    cloud_run.seed_service("vllm-gemma4", min_instances=0, max_instances=1)
    cloud_run.op_polls = 10_000  # the operation never finishes while the test watches
    flow = deps.writes
    gate = flow.gate
    plan = await flow.propose("scale", {"min_instances": 1, "max_instances": 2}, user_id="UDEP", channel_id="C1")
    claimed, lock = await claim(gate, plan.id, "UDEPLOYER")
    task = asyncio.create_task(run_claimed(gate, claimed, lock, "UDEPLOYER", flow.runtime, poll_s=0.01))
    assert await eventually(lambda: [r for r in cloud_run.requests if r[0] != "GET"])  # the write is under way
    task.cancel()  # e.g. the process is shutting down
    with pytest.raises(asyncio.CancelledError):
        await task
    [entry, *_] = await latest(deps.redis, gate.audit_key)
    assert (entry.result, entry.plan_id) == ("pending", plan.id)
    assert [e.plan_id for e in await pending(deps.redis, gate.audit_key)] == [plan.id]
    assert await gate.plans.get(plan.id) is None and await lock.holder() is None


async def test_a_confirmed_write_records_the_revision_it_produced(deps: Any, cloud_run: CloudRunStandIn) -> None:
    """The outcome names the revision the write made: what "what changed" in an incident thread attributes."""
    cloud_run.seed_service("vllm-gemma4", min_instances=0, max_instances=1)
    flow = deps.writes
    gate = flow.gate
    plan = await flow.propose("scale", {"min_instances": 1, "max_instances": 2}, user_id="UDEP", channel_id="C1")
    claimed, lock = await claim(gate, plan.id, "UDEPLOYER")
    result = await run_claimed(gate, claimed, lock, "UDEPLOYER", flow.runtime, poll_s=0.01)
    assert result.ok, result.detail
    made = (await flow.runtime.get_service("vllm-gemma4")).latest_created_revision
    [entry, *_] = await latest(deps.redis, gate.audit_key)
    assert (entry.result, entry.plan_id, entry.revision) == ("ok", plan.id, made)
    assert entry.revision and entry.duration_s >= 0


class _BrokenTarget(NoRevisionsTarget):
    """A target with a bug: its operation poll raises something no adapter turns into a user-facing error."""

    async def wait_operation(self, operation: str, timeout_s: float) -> OperationProgress:
        raise KeyError(operation)


async def test_a_write_that_crashes_is_audited_failed_and_releases_everything(deps: Any, model_server: Any) -> None:
    """An unexpected exception mid-write is never recorded as success: the outcome says failed and names the
    error's type, and the lock and the plan are released (nothing left held for the next write)."""
    target = _BrokenTarget(endpoint=model_server.base_url)
    target.seed("tpu-svc")
    deps.extra_targets[KIND] = target
    deps.service_targets["tpu-svc"] = KIND
    flow = deps.writes
    gate = flow.gate
    plan = await flow.propose(
        "scale", {"min_instances": 1, "max_instances": 2, "service": "tpu-svc"}, user_id="UDEP", channel_id="C1"
    )
    claimed, lock = await claim(gate, plan.id, "UDEPLOYER")
    with pytest.raises(KeyError):
        await run_claimed(gate, claimed, lock, "UDEPLOYER", target, poll_s=0.01)
    [entry, *_] = await latest(deps.redis, gate.audit_key)
    assert (entry.result, entry.plan_id, entry.detail) == ("failed", plan.id, "unexpected error: KeyError")
    assert await pending(deps.redis, gate.audit_key) == []
    assert await gate.plans.get(plan.id) is None and await lock.holder() is None


async def test_a_second_confirm_names_who_confirmed_first(deps: Any, cloud_run: CloudRunStandIn) -> None:
    """A second confirm of one plan is told who confirmed it, and that it runs once."""
    cloud_run.seed_service("vllm-gemma4", min_instances=0, max_instances=1)
    flow = deps.writes
    gate = flow.gate
    plan = await flow.propose("scale", {"min_instances": 1, "max_instances": 2}, user_id="UDEP", channel_id="C1")
    claimed, lock = await claim(gate, plan.id, "UDEPLOYER")
    try:
        with pytest.raises(Refused) as second:
            await claim(gate, plan.id, "UDEPLOYER")  # a double click
        r = second.value
        assert (r.message, r.hint, r.mentions) == (
            "This plan was already confirmed by <@UDEPLOYER>.",
            "It runs once.",
            ("UDEPLOYER",),
        )
    finally:
        await run_claimed(gate, claimed, lock, "UDEPLOYER", flow.runtime, poll_s=0.01)


async def test_a_confirm_while_the_service_is_busy_names_the_holder_and_keeps_the_plan(
    deps: Any, cloud_run: CloudRunStandIn
) -> None:
    cloud_run.seed_service("vllm-gemma4", min_instances=0, max_instances=1)
    flow = deps.writes
    gate = flow.gate
    plan = await flow.propose("scale", {"min_instances": 1, "max_instances": 2}, user_id="UDEP", channel_id="C1")
    other = gate.lock("vllm-gemma4")
    await other.acquire("UOTHER", "deploy")
    try:
        with pytest.raises(Refused) as busy:
            await claim(gate, plan.id, "UDEPLOYER")
        r = busy.value
        assert r.message.startswith("`vllm-gemma4` is busy: ") and "<@UOTHER>" in r.message
        assert (r.hint, r.mentions) == ("Confirm again when it has finished.", ("UOTHER",))
        assert await gate.plans.get(plan.id) is not None  # still pending: it can be confirmed later
    finally:
        await other.release()

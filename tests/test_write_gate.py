"""The write gate on real Redis and the Cloud Run stand-in, below the Slack layer: who may confirm, what each
refusal says and audits, and what the audit records when a confirmed run is cut short."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from bot.sandbox.cloud_run_api import CloudRunStandIn
from skills.audit import latest, pending, since
from skills.deploy.confirm import Refused, Where, WriteGate, cancel, claim, is_deployer, precheck, run_claimed
from skills.deploy.plans import PlanStore
from skills.errors import InvalidInput
from skills.ports import OperationProgress
from skills.targets.plan import Plan
from tests.eventually import eventually
from tests.fake_target import KIND, NoRevisionsTarget
from tests.fake_time import FakeTime

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


async def _run(flow: Any, plan: Plan, typed_name: str | None = None) -> None:
    claimed, lock = await claim(flow.gate, plan.id, "UDEPLOYER", typed_name)
    result = await run_claimed(flow.gate, claimed, lock, "UDEPLOYER", flow.targets.for_kind(plan.target), poll_s=0.01)
    assert result.ok, result.detail


async def _pending_record(flow: Any, plan: Plan) -> Any:
    """The record a confirmed write starts with (the stream keeps it beside the outcome)."""
    entries = await since(flow.gate.store, flow.gate.audit_key, 0)
    [entry] = [e for e in entries if e.plan_id == plan.id and e.result == "pending"]
    return entry


async def test_the_pending_record_names_the_revision_a_new_revision_comes_after(
    deps: Any, cloud_run: CloudRunStandIn
) -> None:
    """A write that makes a revision records, before it starts, the revision that was latest: a reconciliation
    after a crash tells this write's revision from earlier ones by it. A rollback, a promote (traffic moves) or a
    destroy makes no revision and records none; the pending record says the write was confirmed and is watched."""
    cloud_run.seed_service("vllm-gemma4", min_instances=0, max_instances=1)
    flow = deps.writes
    first = (await flow.runtime.get_service("vllm-gemma4")).latest_created_revision
    scale = await flow.propose("scale", {"min_instances": 1, "max_instances": 2}, user_id="UDEP", channel_id="C1")
    await _run(flow, scale)
    started = await _pending_record(flow, scale)
    assert (started.detail, started.user_id, started.action, started.duration_s) == (
        "confirmed; watching",
        "UDEPLOYER",
        "scale",
        0.0,
    )
    assert first and started.before == first
    assert (started.params["min_instances"], started.params["max_instances"]) == (1, 2)
    [outcome, *_] = await latest(deps.redis, flow.gate.audit_key)
    assert outcome.result == "ok" and outcome.revision not in ("", first)

    canary = await flow.propose("redeploy", {"max_model_len": 8192, "canary": 20}, user_id="UDEP", channel_id="C1")
    await _run(flow, canary)
    promote = await flow.propose("promote", {"revision": canary.canary["revision"]}, user_id="UDEP", channel_id="C1")
    await _run(flow, promote)
    promoted = await _pending_record(flow, promote)
    assert (promoted.before, promoted.target) == ("", canary.canary["revision"])  # the revision it moves traffic to
    rollback = await flow.propose("rollback", {"revision": first}, user_id="UDEP", channel_id="C1")
    await _run(flow, rollback)
    assert (await _pending_record(flow, rollback)).before == ""
    destroy = await flow.propose("destroy", {}, user_id="UDEP", channel_id="C1")
    await _run(flow, destroy, typed_name="vllm-gemma4")
    assert (await _pending_record(flow, destroy)).before == ""


async def test_a_second_confirm_after_the_run_names_who_confirmed_and_where_to_look(
    deps: Any, cloud_run: CloudRunStandIn
) -> None:
    """Once a plan has run it is gone, but a late click is told who confirmed it, not that it expired."""
    cloud_run.seed_service("vllm-gemma4", min_instances=0, max_instances=1)
    flow = deps.writes
    plan = await flow.propose("scale", {"min_instances": 1, "max_instances": 2}, user_id="UDEP", channel_id="C1")
    await _run(flow, plan)
    with pytest.raises(Refused) as late:
        await precheck(flow.gate, plan.id, "UDEP")
    r = late.value
    assert (r.message, r.hint, r.mentions) == (
        "This plan was already confirmed by <@UDEPLOYER>.",
        "It runs once; see the progress message.",
        ("UDEPLOYER",),
    )


class _ReportsANameTarget(NoRevisionsTarget):
    """A target without revisions whose status still names its current deployment (a queued resource's id)."""

    async def get_service(self, name: str) -> Any:
        info = await super().get_service(name)
        return info.model_copy(update={"latest_created_revision": "qr-0001"})


class _TimedTarget(NoRevisionsTarget):
    """Each operation poll takes `step_s` on the test's clock (no wall-clock time passes)."""

    def __init__(self, endpoint: str, clock: FakeTime, step_s: float) -> None:
        super().__init__(endpoint)
        self.clock, self.step_s = clock, step_s

    async def wait_operation(self, operation: str, timeout_s: float) -> OperationProgress:
        self.clock.now += self.step_s
        return await super().wait_operation(operation, timeout_s)


class _InterruptedTarget(NoRevisionsTarget):
    """Ctrl-C (or a SystemExit) arrives as the write is about to be sent: nothing was written."""

    async def apply_service(self, name: str, spec: dict[str, Any], *, create: bool) -> str:
        raise KeyboardInterrupt


def _on(deps: Any, target: NoRevisionsTarget) -> Any:
    target.seed("tpu-svc")
    deps.extra_targets[KIND] = target
    deps.service_targets["tpu-svc"] = KIND
    return deps.writes


async def _tpu_scale(flow: Any) -> Plan:
    params = {"min_instances": 1, "max_instances": 2, "service": "tpu-svc"}
    plan: Plan = await flow.propose("scale", params, user_id="UDEP", channel_id="C1")
    return plan


async def test_a_target_without_revisions_records_no_revision_before_a_write(deps: Any, model_server: Any) -> None:
    flow = _on(deps, _ReportsANameTarget(endpoint=model_server.base_url))
    plan = await _tpu_scale(flow)
    await _run(flow, plan)
    assert (await _pending_record(flow, plan)).before == ""


async def test_the_audit_times_a_write_on_the_gates_clock(deps: Any, model_server: Any) -> None:
    """How long a write took is measured on the gate's clock: 4 operation polls of 3.0864 s each."""
    fake = FakeTime(start=1000.0)
    target = _TimedTarget(model_server.base_url, fake, 3.0864)
    flow = _on(deps, target)
    gate = replace(flow.gate, clock=fake.clock)
    plan = await _tpu_scale(flow)
    claimed, lock = await claim(gate, plan.id, "UDEPLOYER")
    result = await run_claimed(gate, claimed, lock, "UDEPLOYER", target, poll_s=0.01)
    assert result.ok, result.detail
    [started, outcome] = await since(deps.redis, gate.audit_key, 0)
    assert (outcome.result, outcome.duration_s) == ("ok", 12.35)  # 12.3456 s, to the hundredth
    assert (started.result, started.duration_s) == ("pending", 0.0)


async def test_a_write_interrupted_before_it_is_sent_is_audited_as_not_started(deps: Any, model_server: Any) -> None:
    """A KeyboardInterrupt or SystemExit is neither a cancellation (the outcome is known: nothing was sent) nor
    an error of the write: the outcome says it did not start, and the lock and the plan are released."""
    target = _InterruptedTarget(endpoint=model_server.base_url)
    flow = _on(deps, target)
    plan = await _tpu_scale(flow)
    claimed, lock = await claim(flow.gate, plan.id, "UDEPLOYER")
    with pytest.raises(KeyboardInterrupt):
        await run_claimed(flow.gate, claimed, lock, "UDEPLOYER", target, poll_s=0.01)
    [entry, *_] = await latest(deps.redis, flow.gate.audit_key)
    assert (entry.result, entry.plan_id, entry.detail, entry.revision) == ("failed", plan.id, "did not start", "")
    assert await pending(deps.redis, flow.gate.audit_key) == []
    assert await flow.gate.plans.get(plan.id) is None and await lock.holder() is None


class _ExpiresAfterAFailedSetNX:
    """Redis as the gate sees it when a key under `prefix` (another write's lock, another click's claim) expires
    between our failed SET NX and the read of who holds it (its TTL ran out in that instant): nobody to name."""

    def __init__(self, redis: Any, prefix: str) -> None:
        self._redis, self._prefix = redis, prefix

    def __getattr__(self, name: str) -> Any:
        return getattr(self._redis, name)

    async def set(self, key: str, value: Any, **kw: Any) -> Any:
        done = await self._redis.set(key, value, **kw)
        if not done and kw.get("nx") and key.startswith(self._prefix):
            await self._redis.delete(key)
        return done


class _DeletedByAnother:
    """Redis as a cancel sees it when a confirm retires the plan between the cancel's read and its delete."""

    def __init__(self, redis: Any) -> None:
        self._redis = redis

    def __getattr__(self, name: str) -> Any:
        return getattr(self._redis, name)

    async def delete(self, *keys: str) -> int:
        await self._redis.delete(*keys)
        return 0  # someone else's delete came first


async def test_a_busy_refusal_with_no_holder_left_mentions_nobody(deps: Any, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service("vllm-gemma4", min_instances=0, max_instances=1)
    flow = deps.writes
    gate = replace(flow.gate, store=_ExpiresAfterAFailedSetNX(deps.redis, flow.gate.lock_prefix))
    plan = await flow.propose("scale", {"min_instances": 1, "max_instances": 2}, user_id="UDEP", channel_id="C1")
    await flow.gate.lock("vllm-gemma4").acquire("UOTHER", "deploy")
    with pytest.raises(Refused) as busy:
        await claim(gate, plan.id, "UDEPLOYER")
    r = busy.value
    assert (r.message, r.hint, r.mentions) == (
        "`vllm-gemma4` is busy: another change is in progress.",
        "Confirm again when it has finished.",
        (),
    )
    assert await gate.plans.claimed_by(plan.id) is None  # handed back: it can be confirmed again


class _VerboseRefusalTarget(NoRevisionsTarget):
    """A target whose API refuses a write with a very long message (a stack of validation errors)."""

    async def apply_service(self, name: str, spec: dict[str, Any], *, create: bool) -> str:
        raise InvalidInput("Refused: " + "x" * 2000)


async def test_the_audit_keeps_at_most_500_characters_of_a_failure(deps: Any, model_server: Any) -> None:
    target = _VerboseRefusalTarget(endpoint=model_server.base_url)
    flow = _on(deps, target)
    plan = await _tpu_scale(flow)
    claimed, lock = await claim(flow.gate, plan.id, "UDEPLOYER")
    result = await run_claimed(flow.gate, claimed, lock, "UDEPLOYER", target, poll_s=0.01)
    assert not result.ok and len(result.detail) > 2000
    [entry, *_] = await latest(deps.redis, flow.gate.audit_key)
    assert entry.result == "failed" and entry.detail.startswith("Refused: xxx")
    assert len(entry.detail) == 500 and entry.detail.endswith("…")  # cut inside the word, and says so


async def test_a_second_confirm_whose_first_claim_just_expired_names_nobody(
    deps: Any, cloud_run: CloudRunStandIn
) -> None:
    cloud_run.seed_service("vllm-gemma4", min_instances=0, max_instances=1)
    flow = deps.writes
    s = deps.settings
    plans = PlanStore(_ExpiresAfterAFailedSetNX(deps.redis, s.key("plan")), s.key("plan"), s.plan_ttl_s)
    gate = replace(flow.gate, plans=plans)
    plan = await flow.propose("scale", {"min_instances": 1, "max_instances": 2}, user_id="UDEP", channel_id="C1")
    assert await flow.gate.plans.claim(plan.id, "UFIRST")
    with pytest.raises(Refused) as second:
        await claim(gate, plan.id, "UDEPLOYER")
    r = second.value
    assert (r.message, r.hint, r.mentions) == ("This plan was already confirmed.", "It runs once.", ())
    assert await gate.lock("vllm-gemma4").holder() is None  # refused before the lock


async def test_a_cancel_that_loses_the_race_to_a_confirm_says_the_plan_is_gone(
    deps: Any, cloud_run: CloudRunStandIn
) -> None:
    cloud_run.seed_service("vllm-gemma4", min_instances=0, max_instances=1)
    flow = deps.writes
    s = deps.settings
    gate = replace(flow.gate, plans=PlanStore(_DeletedByAnother(deps.redis), s.key("plan"), s.plan_ttl_s))
    plan = await flow.propose("scale", {"min_instances": 1, "max_instances": 2}, user_id="UDEP", channel_id="C1")
    with pytest.raises(Refused) as gone:
        await cancel(gate, plan.id, "UDEP")
    assert gone.value.message == "This plan is no longer pending (expired, cancelled or already confirmed)."
    assert [e.result for e in await since(deps.redis, gate.audit_key, 0)] == []  # no "cancelled" record


async def test_a_confirm_of_an_expired_plan_and_one_from_elsewhere_say_why(deps: Any) -> None:
    """An expired (or cancelled) plan is refused with what to do; a click from another thread is refused and
    audited as such (the plan stays, to be confirmed where it was made)."""
    gate = _gate(deps)
    plan = await _plan(gate, channel_id="C1", thread_ts="111.1")
    with pytest.raises(Refused) as elsewhere:
        await precheck(gate, plan.id, "UDEP", where=Where("C1", "222.2"))
    assert elsewhere.value.message.startswith("This plan was made in another thread")
    [entry] = await since(deps.redis, gate.audit_key, 0)
    assert (entry.result, entry.detail, entry.user_id, entry.plan_id) == (
        "refused",
        "wrong channel or thread",
        "UDEP",
        plan.id,
    )
    assert await gate.plans.discard(plan.id)  # it expired
    with pytest.raises(Refused) as expired:
        await precheck(gate, plan.id, "UDEP", where=Where("C1", "111.1"))
    r = expired.value
    assert (r.message, r.hint, r.mentions) == (
        "This plan has expired (or was cancelled).",
        "Run the command again to re-plan.",
        (),
    )


async def test_the_refusals_before_a_write_say_why_and_what_to_do(deps: Any) -> None:
    """A plan that does not fit, a destroy with the wrong name typed and a confirm by someone who may not: each
    refusal's sentence and hint, and what the audit records (the typed name is not audited: it is a typo)."""
    gate = _gate(deps)

    async def refusal(g: WriteGate, plan: Plan, user: str = "UDEP", typed: str | None = None) -> Refused:
        with pytest.raises(Refused) as exc:
            await precheck(g, plan.id, user, typed)
        return exc.value

    too_big = await _plan(gate, verdict="does_not_fit")
    r = await refusal(gate, too_big)
    assert (r.message, r.hint) == ("This plan cannot be confirmed.", too_big.blocked())
    assert r.hint.startswith("The capacity planner says this configuration does not fit")
    destroy = await _plan(gate, kind="destroy", summary="destroy")
    r = await refusal(gate, destroy, typed="vllm-gemma")
    assert (r.message, r.hint) == (
        "The name typed does not match `vllm-gemma4`; nothing was deleted.",
        "Type the service name exactly to confirm.",
    )
    scale = await _plan(gate)
    r = await refusal(gate, scale, user="UNOBODY")
    assert (r.message, r.hint, r.mentions) == (
        "<@UNOBODY> is not allowed to confirm scale actions.",
        "Ask someone in the deployers group to confirm.",
        ("UNOBODY",),
    )
    grouped = _gate(deps, deployers=frozenset(), deployer_usergroup="S1")  # a group but no way to read it
    r = await refusal(grouped, scale, user="UNOBODY")
    assert r.hint == "Ask someone in the deployers group to confirm."
    r = await refusal(_gate(deps, deployers=frozenset()), scale, user="UNOBODY")
    assert r.hint == "No deployers are configured: set DEPLOYER_USER_IDS or DEPLOYER_USERGROUP_ID."
    audited = [(e.result, e.detail, e.plan_id) for e in await since(deps.redis, gate.audit_key, 0)]
    assert audited == [
        ("refused", "does_not_fit", too_big.id),
        *[("refused", "not a deployer", scale.id)] * 3,
    ]

"""Confirm a stored plan: every check that stands between a click and a write, then run it and audit it.

Order matters: a missing/expired plan, a does_not_fit verdict, a wrong typed name and a missing role are
refused without consuming the plan (someone else may still confirm it); then a one-shot claim stops double
clicks; then the per-service lock stops concurrent writes (and hands the claim back if taken, so the same
plan can be confirmed once the other change is done).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

from skills.audit import AuditEntry, record, record_pending, settle
from skills.deploy.execute import ExecResult, ProgressFn, execute
from skills.deploy.plans import PlanStore
from skills.errors import UserFacingError
from skills.locks import LockHeld, ServiceLock
from skills.logs.redact import redact
from skills.ports import Logs, Store
from skills.targets.plan import Plan
from skills.targets.port import ServingTarget
from skills.text import shorten

log = logging.getLogger(__name__)

UsergroupMembers = Callable[[str], Awaitable[Collection[str]]]


class Refused(UserFacingError):
    """A confirm that was turned down (expired, not allowed, locked, already done)."""


@dataclass
class WriteGate:
    """Everything confirm needs besides the plan: stores, policy and where the audit goes."""

    store: Store
    plans: PlanStore
    lock_prefix: str  # settings.key("lock")
    lock_ttl_s: int
    audit_key: str  # settings.key("audit")
    deployers: frozenset[str]
    deployer_usergroup: str = ""
    usergroup_members: UsergroupMembers | None = None  # a chat-side port (Slack usergroups.users.list)
    # times a write, for its audit record and its watch's deadline (deps: the sandbox's clock in the sandbox)
    clock: Callable[[], float] = time.monotonic

    def lock(self, service: str) -> ServiceLock:
        return ServiceLock(self.store, f"{self.lock_prefix}:{service}", self.lock_ttl_s)


async def is_deployer(gate: WriteGate, user_id: str) -> bool:
    if user_id in gate.deployers:
        return True
    if gate.deployer_usergroup and gate.usergroup_members is not None:
        try:
            return user_id in set(await gate.usergroup_members(gate.deployer_usergroup))
        except Exception as exc:  # noqa: BLE001 - the chat API failing must not grant (or crash) anything
            log.warning(
                "role check: members of %s unavailable, %s is denied: %s: %s",
                gate.deployer_usergroup,
                user_id,
                type(exc).__name__,
                str(exc)[:200],
            )
            return False
    return False


def _entry(plan: Plan, user_id: str, result: str, detail: str, duration_s: float = 0.0) -> AuditEntry:
    return AuditEntry(
        user_id=user_id,
        action=plan.kind,
        service=plan.service,
        params={**plan.params, **plan.added},
        result=result,
        detail=shorten(redact(detail), 500),  # redacted before it is cut: a cut secret no longer matches its rule
        plan_id=plan.id,
        duration_s=round(duration_s, 2),
        target=plan.target_revision,
    )


_GONE = "This plan is no longer pending (expired, cancelled or already confirmed)."


async def _audit(gate: WriteGate, plan: Plan, user_id: str, result: str, detail: str) -> None:
    await record(gate.store, gate.audit_key, _entry(plan, user_id, result, detail))


async def _audit_refusal(gate: WriteGate, plan: Plan, user_id: str, why: str) -> None:
    await _audit(gate, plan, user_id, "refused", why)


@dataclass(frozen=True)
class Where:
    """Where a click came from: the channel, and the thread of the clicked message ('' at top level)."""

    channel_id: str
    thread_ts: str = ""


def misplaced(plan: Plan, where: Where | None) -> str:
    """Why a click from `where` may not act on `plan` ('' when it may): a plan is bound to the channel and
    thread it was made in, so a button copied elsewhere (or a forged payload) cannot confirm it there."""
    if where is None:
        return ""
    if plan.channel_id and where.channel_id != plan.channel_id:
        return "This plan was made in another channel; it can only be confirmed or cancelled there."
    if where.thread_ts != plan.thread_ts:
        return "This plan was made in another thread; it can only be confirmed or cancelled there."
    return ""


async def _loaded(gate: WriteGate, plan_id: str) -> Plan:
    plan = await gate.plans.get(plan_id)
    if plan is None:
        who = await gate.plans.claimed_by(plan_id)
        if who:
            raise Refused(
                f"This plan was already confirmed by <@{who}>.", "It runs once; see the progress message.", (who,)
            )
        raise Refused("This plan has expired (or was cancelled).", "Run the command again to re-plan.")
    return plan


async def precheck(
    gate: WriteGate, plan_id: str, user_id: str, typed_name: str | None = None, where: Where | None = None
) -> Plan:
    """Every check that does not consume the plan (expired, misplaced, does not fit, typed name, role);
    raises Refused. Modals run it before answering Slack so a refusal shows inline, to that user only."""
    plan = await _loaded(gate, plan_id)
    if why := misplaced(plan, where):
        await _audit_refusal(gate, plan, user_id, "wrong channel or thread")
        raise Refused(why, "Use the plan's own buttons, or plan again here.")
    if why := plan.blocked():
        await _audit_refusal(gate, plan, user_id, "does_not_fit")
        raise Refused("This plan cannot be confirmed.", why)
    if plan.kind == "destroy" and (typed_name or "").strip() != plan.service:
        raise Refused(
            f"The name typed does not match `{plan.service}`; nothing was deleted.",
            "Type the service name exactly to confirm.",
        )
    if not await is_deployer(gate, user_id):
        await _audit_refusal(gate, plan, user_id, "not a deployer")
        hint = (
            "Ask someone in the deployers group to confirm."
            if gate.deployers or gate.deployer_usergroup
            else "No deployers are configured: set DEPLOYER_USER_IDS or DEPLOYER_USERGROUP_ID."
        )
        raise Refused(f"<@{user_id}> is not allowed to confirm {plan.kind} actions.", hint, (user_id,))
    return plan


async def claim(
    gate: WriteGate, plan_id: str, user_id: str, typed_name: str | None = None, where: Where | None = None
) -> tuple[Plan, ServiceLock]:
    """Run the checks and take the claim + lock; raises Refused with a sentence for the user."""
    plan = await precheck(gate, plan_id, user_id, typed_name, where)
    if not await gate.plans.claim(plan.id, user_id):
        if who := await gate.plans.claimed_by(plan.id):
            raise Refused(f"This plan was already confirmed by <@{who}>.", "It runs once.", (who,))
        raise Refused("This plan was already confirmed.", "It runs once.")  # that claim expired since: no name
    lock = gate.lock(plan.service)
    try:
        await lock.acquire(user_id, plan.kind)
    except LockHeld as exc:
        await gate.plans.unclaim(plan.id)
        await _audit_refusal(gate, plan, user_id, f"locked: {exc}")
        raise Refused(
            f"`{plan.service}` is busy: {exc}.",
            "Confirm again when it has finished.",
            (exc.holder.user_id,) if exc.holder else (),
        ) from None
    return plan, lock


async def cancel(gate: WriteGate, plan_id: str, user_id: str, where: Where | None = None) -> Plan:
    """Discard a pending plan: only its author or a deployer may, from where it was made; audited."""
    plan = await gate.plans.get(plan_id)
    if plan is None:
        raise Refused(_GONE)
    if why := misplaced(plan, where):
        await _audit_refusal(gate, plan, user_id, "cancel from another channel or thread")
        raise Refused(why)
    if user_id != plan.created_by and not await is_deployer(gate, user_id):
        await _audit_refusal(gate, plan, user_id, "cancel by someone other than the author or a deployer")
        raise Refused(
            f"Only <@{plan.created_by}> (who asked for it) or a deployer can cancel this plan.",
            "It expires on its own if nobody confirms it.",
            (plan.created_by,),
        )
    if not await gate.plans.discard(plan.id):
        raise Refused(_GONE)  # confirmed or cancelled between the read above and now
    await _audit(gate, plan, user_id, "cancelled", "")
    return plan


async def run_claimed(
    gate: WriteGate,
    plan: Plan,
    lock: ServiceLock,
    user_id: str,
    runtime: ServingTarget,
    *,
    logs: Logs | None = None,
    progress: ProgressFn | None = None,
    poll_s: float = 5.0,
) -> ExecResult:
    """Execute, audit, release the lock and retire the plan — whatever happens.

    The audit gets a pending record first and the outcome once seen. If this is cancelled (the process stops
    mid-watch) nothing is claimed about the outcome: the record stays pending until a later start reconciles
    it from what the service shows (skills/deploy/reconcile.py)."""
    start = gate.clock()
    pending = _entry(plan, user_id, "pending", "confirmed; watching")
    if plan.kind not in ("destroy", "rollback", "promote") and not plan.create and runtime.capabilities.revisions:
        try:  # what a later reconciliation needs to tell this write's revision from earlier ones
            pending.before = (await runtime.get_service(plan.service)).latest_created_revision
        except UserFacingError:
            pass  # execute meets the same failure and says so
    await record_pending(gate.store, gate.audit_key, pending)
    result = ExecResult(ok=False, detail="did not start")
    cancelled = False
    try:
        result = await execute(runtime, plan, logs=logs, progress=progress, poll_s=poll_s, now=gate.clock)
        return result
    except asyncio.CancelledError:
        cancelled = True
        raise
    except Exception as exc:
        result = ExecResult(ok=False, detail=f"unexpected error: {type(exc).__name__}")
        raise
    finally:
        await gate.plans.discard(plan.id)
        await lock.release()
        if not cancelled:
            outcome = _entry(plan, user_id, "ok" if result.ok else "failed", result.detail, gate.clock() - start)
            outcome.revision = result.revision  # the revision it produced ('' for a rollback or a destroy)
            await settle(gate.store, gate.audit_key, outcome)

"""The write flow as one object: propose a plan, then confirm it through the gate and run it.

A surface (a slash command, a plan button, the destroy dialog) parses its input, calls one of these methods and
renders the result; building the plan, storing it, the checks before a write and the write itself all happen
here (skills/deploy/plan_builder.py builds, skills/deploy/plans.py stores, skills/deploy/confirm.py checks and
runs). bot/ wires one per request from its settings (bot/deps.py `Deps.writes`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from skills.audit import AuditEntry
from skills.deploy.confirm import Where, WriteGate, cancel, claim, precheck, run_claimed
from skills.deploy.execute import ExecResult, Progress, ProgressFn
from skills.deploy.plan_builder import build_plan
from skills.deploy.plans import PlanStore
from skills.deploy.preflight import PreflightSources
from skills.deploy.reconcile import reconcile_pending
from skills.locks import ServiceLock
from skills.logs.redact import redact
from skills.targets.env import DeployEnv
from skills.targets.plan import Plan
from skills.targets.port import ServingTarget
from skills.targets.registry import Targets
from skills.text import shorten

log = logging.getLogger(__name__)
T = TypeVar("T")


class IncidentLink(Protocol):
    """What the write flow tells the incident a plan was asked from: the incident pipeline implements it
    (skills/incidents/store.py IncidentStore), so deploy/ knows no incident type and incidents/ sits above it."""

    async def thread_incident(self, channel: str, ts: str) -> str:
        """The id of the incident whose thread this is ('' for any other thread)."""
        ...

    async def fix_landed(
        self,
        inc_id: str,
        action: str,
        revision: str,
        by: str,
        *,
        serving: int | None = None,
        serving_since: datetime | None = None,
    ) -> bool:
        """A write confirmed from the incident's thread completed; False: no such incident. `serving`: the percent
        of traffic `revision` takes as the service shows it right after (None: it could not be read);
        `serving_since`: when it began serving (its Ready condition's time, else when the write began)."""
        ...


@dataclass(frozen=True)
class WriteFlow:
    targets: Targets  # which serving target a plan is for and runs on (skills/targets/registry.py)
    env: DeployEnv
    plans: PlanStore
    gate: WriteGate
    incidents: IncidentLink
    poll_s: float = 5.0
    preflight: PreflightSources | None = None  # deploy/redeploy plans are checked before Confirm
    # Where /gemma status caches its report (`<prefix>:<service>`): a write drops it, so the next status
    # shows the write instead of the report from before it (skills/observe/status.py).
    status_cache_prefix: str = ""

    async def propose(
        self, kind: str, params: dict[str, Any], *, user_id: str, channel_id: str, thread_ts: str = ""
    ) -> Plan:
        """Compute and store a plan (the one entry point for commands and plan buttons). A plan asked for in a
        thread remembers it, and the incident whose thread it is, so progress and outcome land there."""
        target = await self.targets.locate_write(kind, params, self.env.service)
        plan = await build_plan(
            kind,
            params,
            target,
            self.env,
            user_id=user_id,
            channel_id=channel_id,
            preflight=self.preflight,
            targets=self.targets,  # a deploy's name may not be another target's service
        )
        if thread_ts:
            plan.thread_ts = thread_ts
            plan.incident_id = await self.incidents.thread_incident(channel_id, thread_ts)
        await self.plans.save(plan)
        return plan

    @property
    def runtime(self) -> ServingTarget:
        """The default service's target (the name this flow had before targets; kept for callers moving over)."""
        return self.targets.default

    async def plan(self, plan_id: str) -> Plan | None:
        return await self.plans.get(plan_id)

    async def posted_at(self, plan: Plan, message_ts: str) -> None:
        """Remember the message showing the plan (its buttons are removed once it is spent)."""
        await self.plans.set_message(plan, message_ts)

    async def precheck(self, plan_id: str, user_id: str, typed_name: str | None, where: Where) -> None:
        """Every refusal a confirm would give, without consuming the plan (raises Refused)."""
        await precheck(self.gate, plan_id, user_id, typed_name, where)

    async def claim(self, plan_id: str, user_id: str, typed_name: str | None, where: Where) -> tuple[Plan, ServiceLock]:
        """Check, claim the plan once and take the service's lock (raises Refused)."""
        return await claim(self.gate, plan_id, user_id, typed_name, where)

    async def release_unrun(self, plan: Plan, lock: ServiceLock) -> None:
        """Nothing ran after a claim: the plan may be confirmed again and the service is free."""
        await self.plans.unclaim(plan.id)
        await lock.release()

    async def cancel(self, plan_id: str, user_id: str, where: Where) -> Plan:
        return await cancel(self.gate, plan_id, user_id, where)

    async def reconcile(self) -> list[AuditEntry]:
        """At start: the outcome of writes whose watch stopped (skills/deploy/reconcile.py)."""
        return await reconcile_pending(self.gate.store, self.gate.audit_key, self.targets.for_service)

    async def run(self, plan: Plan, lock: ServiceLock, user_id: str, progress: ProgressFn) -> ExecResult:
        """Execute a claimed plan; audits it, releases the lock and retires the plan whatever happens. Each step
        is also recorded beside the plan, so any surface can follow it (MCP's plan_status)."""
        target = self.targets.for_kind(plan.target)

        async def recorded(p: Progress) -> None:
            # Done only once the audit has the outcome (below): a follower that reads "succeeded" finds it there.
            await self._record(plan.id, user_id, p.model_copy(update={"done": False, "ok": None}))
            await progress(p)

        await self._record(plan.id, user_id, Progress(phase="submitted", elapsed_s=0.0, detail=plan.summary))
        await self._forget_status(plan.service)
        began = datetime.now(UTC)
        try:
            result = await run_claimed(
                self.gate, plan, lock, user_id, target, logs=target.logs, progress=recorded, poll_s=self.poll_s
            )
        except Exception as exc:
            failed = Progress(phase="failed", elapsed_s=0.0, done=True, ok=False, detail=f"unexpected error: {exc}")
            await self._record(plan.id, user_id, failed)
            raise
        finally:
            await self._forget_status(plan.service)  # a status read during the rollout cached the rollout
        # Where the name now lives, for the commands that route by name alone (skills/targets/registry.py): a
        # deploy's target holds it even when it failed (a failed queued resource stays until deleted).
        if plan.kind == "deploy":
            self.targets.learn(plan.service, plan.target)
        elif plan.kind == "destroy" and result.ok:
            self.targets.forget(plan.service)
        outcome = ("deleted" if plan.kind == "destroy" else "ready") if result.ok else "failed"
        final = Progress(phase=outcome, elapsed_s=result.duration_s, done=True, ok=result.ok, detail=result.detail)
        await self._record(plan.id, user_id, final.model_copy(update={"revision": result.revision}))
        if result.ok and plan.incident_id:
            # A fix confirmed from an incident's thread: the incident follows it up (condition cleared, or not).
            try:
                serving, since = await _serving(target, plan.service, result.revision, began)
                await self.incidents.fix_landed(
                    plan.incident_id,
                    f"{plan.kind} `{plan.service}`",
                    result.revision,
                    user_id,
                    serving=serving,
                    serving_since=since,
                )
            except Exception:
                log.warning(
                    "could not record the fix of plan %s on incident %s", plan.id, plan.incident_id, exc_info=True
                )
        return result

    async def _forget_status(self, service: str) -> None:
        if not self.status_cache_prefix:
            return
        try:
            await self.gate.store.delete(f"{self.status_cache_prefix}:{service}")
        except Exception:  # a stale status for at most its TTL is not worth failing a write for
            log.warning("could not drop the cached status of %s", service, exc_info=True)

    async def _record(self, plan_id: str, user_id: str, p: Progress) -> None:
        try:
            record = p.model_dump(include={"phase", "done", "ok", "revision"})
            record |= {
                "confirmed_by": user_id,
                "elapsed_s": round(p.elapsed_s, 1),
                "detail": shorten(redact(p.detail), 300),
            }
            await self.plans.set_progress(plan_id, record)
        except Exception:  # following a write is a convenience: the write goes on
            log.warning("could not record the progress of plan %s", plan_id, exc_info=True)


async def _serving(
    target: ServingTarget, service: str, revision: str, began: datetime
) -> tuple[int | None, datetime | None]:
    """What the service shows of a write's revision right after it: the percent of traffic it takes (the traffic
    statuses `/gemma status` shows; a share routed to "latest" counts for the latest ready revision) and since when
    it serves (its Ready condition's time, else `began`, when the write began). (None, None) when it cannot be
    read, or the write made no revision."""
    if not revision:
        return None, None
    try:
        info = await target.get_service(service)
        rev = await target.get_revision(service, revision) if target.capabilities.revisions else None
    except Exception:  # the incident then says the share could not be read
        log.warning("could not read whether revision %s serves", revision, exc_info=True)
        return None, None
    if rev is None:  # a target without revisions (a TPU slice) serves what it runs once it is ready
        return (100 if info.ready else 0), began
    share = sum(
        t.percent
        for t in info.traffic
        if t.revision == revision or (t.latest and info.latest_ready_revision == revision)
    )
    ready = rev.ready
    return (share if ready else 0), rev.ready_at or began


# Watches that go on after whoever confirmed stopped waiting (Ctrl-C in the console): referenced here so they
# are not collected mid-flight, and awaitable by tests and by a process that wants to finish them.
BACKGROUND: set[asyncio.Task[Any]] = set()


async def keep_watching(work: Coroutine[Any, Any, T]) -> T:
    """Run `work` to its end even if the caller is cancelled: the caller stops waiting, the work does not (a
    write's watch records its real outcome in the audit and the thread)."""
    task = asyncio.ensure_future(work)
    BACKGROUND.add(task)
    task.add_done_callback(BACKGROUND.discard)
    return await asyncio.shield(task)


async def settle_background(timeout_s: float) -> bool:
    """Wait for the watches going on in the background; False if some are still running after `timeout_s`."""
    if not BACKGROUND:
        return True
    _, running = await asyncio.wait(set(BACKGROUND), timeout=timeout_s)
    return not running

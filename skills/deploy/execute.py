"""Execute a confirmed plan against its serving target (skills/targets/port.py) and report progress as it goes.

Phases for a new revision: submitted -> revision created -> instance starting -> weights loading -> ready
(or failed, with the revision's condition and the first error log lines). Traffic never moves early: the
rendered traffic is "latest ready revision", so a revision that fails its probe gets none.

A target without revisions reports its own phases while the write runs (e.g. a queued resource's QUEUED,
PROVISIONING), then is ready when its status says so.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from pydantic import BaseModel, Field

from skills.cancellation import raise_if_cancelled
from skills.errors import TransientCloudError, UserFacingError
from skills.logs.redact import redact
from skills.ports import LogQuery, Logs, RevisionInfo, ServiceInfo
from skills.retrying import RetryPolicy, retry_call
from skills.targets.plan import Plan
from skills.targets.port import ServingTarget

log = logging.getLogger(__name__)
T = TypeVar("T")

PHASES = ("submitted", "revision created", "instance starting", "weights loading", "ready")
# vLLM log lines that show the weights are being read (so "instance starting" is over).
_LOADING_MARKERS = ("loading weights", "loading safetensors", "loading model", "starting to load model")
_CONTAINER_START_S = 30.0  # without logs: after this long a started instance is most likely loading weights


class Progress(BaseModel):
    phase: str
    elapsed_s: float
    detail: str = ""
    done: bool = False
    ok: bool | None = None
    revision: str = ""
    log_lines: list[str] = Field(default_factory=list)


ProgressFn = Callable[[Progress], Awaitable[None]]


class ExecResult(BaseModel):
    ok: bool
    detail: str
    revision: str = ""
    duration_s: float = 0.0
    log_lines: list[str] = Field(default_factory=list)


async def _error_lines(logs: Logs | None, service: str, revision: str, since: datetime, n: int = 5) -> list[str]:
    if logs is None:
        return []
    try:
        batch = await logs.fetch(
            LogQuery(service=service, since=since, revision=revision or None, min_severity="ERROR", max_entries=200)
        )
    except Exception as exc:  # noqa: BLE001 - logs are a bonus on a failure report
        log.warning(
            "deploy failure report: logs of %s unavailable: %s: %s", service, type(exc).__name__, str(exc)[:200]
        )
        return []
    return [redact(e.text)[:300] for e in batch.entries[:n]]


async def _loading_seen(logs: Logs | None, service: str, revision: str, since: datetime) -> bool | None:
    if logs is None:
        return None
    try:
        batch = await logs.fetch(LogQuery(service=service, since=since, revision=revision or None, max_entries=500))
    except Exception as exc:  # noqa: BLE001 - logs only refine a progress phase
        log.warning("deploy watch: logs of %s unavailable: %s: %s", service, type(exc).__name__, str(exc)[:200])
        return None
    return any(m in e.text.lower() for e in batch.entries for m in _LOADING_MARKERS)


class _Reporter:
    """Emits a Progress on each phase change, and at most every `every_s` otherwise (Slack edit limits)."""

    def __init__(self, progress: ProgressFn | None, every_s: float, now: Callable[[], float]) -> None:
        self._progress = progress
        self._every_s = every_s
        self._last_phase = ""
        self._last_at = 0.0
        # The watch's one time base: elapsed times and deadlines (the sandbox's clock in the sandbox, so a
        # revision's "ready after" is on the time its vLLM logged); the edit pacing above stays on the wall clock.
        self.now = now
        self.start = now()

    def elapsed(self) -> float:
        return self.now() - self.start

    async def __call__(self, p: Progress, force: bool = False) -> None:
        now = time.monotonic()
        if p.phase != self._last_phase or force or now - self._last_at >= self._every_s:
            self._last_phase, self._last_at = p.phase, now
            if self._progress is not None:
                await self._progress(p)


def traffic_detail(info: ServiceInfo, revision: str) -> str:
    """What the service shows about a ready revision: the share of traffic it serves, and who serves otherwise
    (after a rollback traffic stays pinned, and a new revision is ready without serving)."""
    share = sum(t.percent for t in info.traffic if t.revision == revision)
    if share == 100:
        return f"revision `{revision}` is ready and serving 100% of traffic"
    others = ", ".join(f"`{t.revision}` {t.percent}%" for t in info.traffic if t.revision != revision and t.percent)
    if share:
        return f"revision `{revision}` is ready and serving {share}% of traffic (also {others or 'none'})"
    return f"revision `{revision}` is ready but serves no traffic: {others or 'no revision'} serves"


async def check_unchanged(runtime: ServingTarget, plan: Plan) -> None:
    """Refuse to run a plan computed against a service that has changed since (someone else deployed)."""
    current = await runtime.get_service_spec(plan.service)
    if plan.create and current is not None:
        raise UserFacingError(f"`{plan.service}` was created by someone else after this plan was made.", "Re-plan.")
    if not plan.create and current is None:
        raise UserFacingError(f"`{plan.service}` no longer exists.", "Re-plan (a deploy would create it).")
    if not plan.create and runtime.fingerprint(current) != plan.base_fingerprint:
        raise UserFacingError(f"`{plan.service}` changed after this plan was made.", "Re-plan to see the new diff.")


async def execute(
    runtime: ServingTarget,
    plan: Plan,
    *,
    logs: Logs | None = None,
    progress: ProgressFn | None = None,
    poll_s: float = 5.0,
    progress_every_s: float = 15.0,
    now: Callable[[], float] = time.monotonic,
) -> ExecResult:
    """`now`: the clock the watch's durations and deadline are on (WriteGate.clock: the audit's too)."""
    rep = _Reporter(progress, progress_every_s, now)
    since = datetime.now(UTC) - timedelta(seconds=30)
    try:
        await check_unchanged(runtime, plan)
        if plan.kind == "destroy":
            return await _destroy(runtime, plan, rep, poll_s)
        if plan.spec is None:
            raise UserFacingError("This plan has nothing to apply.", "Re-plan.")
        revisions = runtime.capabilities.revisions
        before = (
            "" if plan.create or not revisions else (await runtime.get_service(plan.service)).latest_created_revision
        )
        op = await runtime.apply_service(plan.service, plan.spec, create=plan.create)
        await rep(Progress(phase="submitted", elapsed_s=rep.elapsed()))
        if plan.kind in ("rollback", "promote"):  # traffic-only writes
            return await _wait_traffic(runtime, plan, op, rep, poll_s)
        if not revisions:
            return await _wait_ready(runtime, plan, op, rep, poll_s, logs, since)
        return await _wait_revision(runtime, plan, op, before, rep, poll_s, logs, since)
    except UserFacingError as exc:
        result = ExecResult(ok=False, detail=str(exc), duration_s=rep.elapsed())
        await rep(Progress(phase="failed", elapsed_s=rep.elapsed(), detail=result.detail, done=True, ok=False), True)
        return result


async def _ride_out(
    what: str,
    deadline: float,
    now: Callable[[], float],
    poll_s: float,
    call: Callable[[], Awaitable[T]],
    on_error: Callable[[TransientCloudError], Awaitable[None]],
) -> T:
    """One watch poll, tried again every `poll_s` while Cloud Run's API is busy or unreachable (the adapter has
    already backed off): the revision may well be starting fine, so the watch keeps going until its deadline,
    saying so each time; past it the last TransientCloudError is raised."""

    async def note(exc: BaseException, _attempt: int, _wait_s: float) -> None:
        assert isinstance(exc, TransientCloudError)
        await on_error(exc)

    policy = RetryPolicy(
        what=f"deploy watch ({what})",
        transient=lambda exc: isinstance(exc, TransientCloudError),
        budget_s=max(0.0, deadline - now()),
        initial_s=poll_s,
        max_s=poll_s,
        jitter_s=0.0,
        log=log,
    )
    return await retry_call(policy, call, on_retry=note)


async def _wait_revision(
    runtime: ServingTarget,
    plan: Plan,
    op: str,
    before: str,
    rep: _Reporter,
    poll_s: float,
    logs: Logs | None,
    since: datetime,
) -> ExecResult:
    deadline = rep.now() + max(plan.wait_budget_s, 60.0)
    revision = ""
    created_at = 0.0
    op_done = False
    op_error = ""
    phase = "submitted"

    async def poll() -> RevisionInfo | None:
        nonlocal revision, created_at, op_done, op_error
        if not op_done:
            status = await runtime.wait_operation(op, timeout_s=poll_s)
            op_done, op_error = status.done, status.error
        else:
            await asyncio.sleep(poll_s)
        info = await runtime.get_service(plan.service)
        if not revision and info.latest_created_revision and info.latest_created_revision != before:
            revision, created_at = info.latest_created_revision, rep.now()
            await rep(Progress(phase="revision created", elapsed_s=rep.elapsed(), revision=revision))
        return await runtime.get_revision(plan.service, revision) if revision else None

    async def still_watching(exc: TransientCloudError) -> None:
        await rep(Progress(phase=phase, elapsed_s=rep.elapsed(), revision=revision, detail=exc.message))

    while True:
        raise_if_cancelled()  # a cancel a Redis write swallowed (skills/cancellation.py)
        try:
            rev = await _ride_out("revision", deadline, rep.now, poll_s, poll, still_watching)
        except TransientCloudError as exc:
            raise UserFacingError(
                f"{runtime.display}'s API kept failing until the watch's deadline ({exc.message}); the revision may "
                "still become ready.",
                "Check `/gemma status` in a few minutes.",
            ) from None
        elapsed = rep.elapsed()
        if rev is None and op_done and not op_error:
            # Done without a new revision: the template came out the same as the latest one's (e.g. a change
            # built on the serving revision after a rollback), so only traffic moved. Said as the service shows it.
            info = await runtime.get_service(plan.service)
            if info.latest_created_revision == before and info.latest_ready_revision:
                detail = "no new revision (same configuration); " + traffic_detail(info, info.latest_ready_revision)
                await rep(Progress(phase="ready", elapsed_s=elapsed, done=True, ok=True, detail=detail), True)
                return ExecResult(ok=True, detail=detail, revision=info.latest_ready_revision, duration_s=elapsed)
        if rev is not None and rev.ready is True:
            # Said as the service shows it (traffic may stay pinned elsewhere), never as intended.
            detail = traffic_detail(await runtime.get_service(plan.service), revision)
            await rep(
                Progress(phase="ready", elapsed_s=elapsed, revision=revision, done=True, ok=True, detail=detail),
                True,
            )
            return ExecResult(ok=True, detail=detail, revision=revision, duration_s=elapsed)
        if (rev is not None and rev.ready is False) or (op_done and op_error):
            reason = f"{rev.reason}: {rev.message}" if rev is not None and rev.ready is False else op_error
            lines = await _error_lines(logs, plan.service, revision, since)
            detail = redact(reason.strip(": ") or "the operation failed")
            await rep(
                Progress(
                    phase="failed",
                    elapsed_s=elapsed,
                    revision=revision,
                    done=True,
                    ok=False,
                    detail=detail,
                    log_lines=lines,
                ),
                True,
            )
            return ExecResult(ok=False, detail=detail, revision=revision, duration_s=elapsed, log_lines=lines)
        if rep.now() >= deadline:
            detail = (
                f"revision `{revision or '?'}` was still not ready after {elapsed:.0f} s; {runtime.display} keeps "
                "trying until its startup probe gives up. Check `/gemma status`."
            )
            await rep(
                Progress(
                    phase="timed out",
                    elapsed_s=elapsed,
                    revision=revision,
                    done=True,
                    ok=False,
                    detail=detail,
                ),
                True,
            )
            return ExecResult(ok=False, detail=detail, revision=revision, duration_s=elapsed)
        if not revision:
            phase = "submitted"
        else:
            seen = await _loading_seen(logs, plan.service, revision, since)
            if seen is None:
                seen = rep.now() - created_at >= _CONTAINER_START_S
            phase = "weights loading" if seen else "instance starting"
        await rep(Progress(phase=phase, elapsed_s=elapsed, revision=revision))


async def _wait_ready(
    runtime: ServingTarget,
    plan: Plan,
    op: str,
    rep: _Reporter,
    poll_s: float,
    logs: Logs | None,
    since: datetime,
) -> ExecResult:
    """A target without revisions: the operation's own phases are the progress (a queued resource may wait a
    long time before it is provisioned), then the service's readiness is the outcome."""
    deadline = rep.now() + max(plan.wait_budget_s, 60.0)
    phase = "submitted"

    async def still_waiting(exc: TransientCloudError) -> None:
        await rep(Progress(phase=phase, elapsed_s=rep.elapsed(), detail=exc.message))

    while True:
        raise_if_cancelled()
        try:
            status = await _ride_out(
                "deployment",
                deadline,
                rep.now,
                poll_s,
                lambda: runtime.wait_operation(op, timeout_s=poll_s),
                still_waiting,
            )
        except TransientCloudError as exc:
            raise UserFacingError(
                f"{runtime.display}'s API kept failing until the watch's deadline ({exc.message}); the deployment "
                "may still become ready.",
                "Check `/gemma status` in a few minutes.",
            ) from None
        elapsed = rep.elapsed()
        if status.done:
            info = await runtime.get_service(plan.service) if not status.error else None
            if info is not None and info.ready is True:
                detail = f"`{plan.service}` is ready" + (f" at {info.uri}" if info.uri else "")
                await rep(Progress(phase="ready", elapsed_s=elapsed, done=True, ok=True, detail=detail), True)
                return ExecResult(ok=True, detail=detail, duration_s=elapsed)
            if status.error or (info is not None and info.ready is False):
                cond = info.terminal_condition if info is not None else None
                reason = status.error or (f"{cond.reason}: {cond.message}" if cond else "not ready")
                detail = redact(reason.strip(": ") or "the operation failed")
                lines = await _error_lines(logs, plan.service, "", since)
                await rep(
                    Progress(phase="failed", elapsed_s=elapsed, done=True, ok=False, detail=detail, log_lines=lines),
                    True,
                )
                return ExecResult(ok=False, detail=detail, duration_s=elapsed, log_lines=lines)
        if rep.now() >= deadline:
            detail = f"`{plan.service}` was still not ready after {elapsed:.0f} s. Check `/gemma status`."
            await rep(Progress(phase="timed out", elapsed_s=elapsed, done=True, ok=False, detail=detail), True)
            return ExecResult(ok=False, detail=detail, duration_s=elapsed)
        phase = status.phase or ("starting" if status.done else "submitted")
        await rep(Progress(phase=phase, elapsed_s=elapsed))
        if status.done:  # done but not ready yet: the operation answers at once from here, so wait a poll
            await asyncio.sleep(poll_s)


async def _wait_traffic(runtime: ServingTarget, plan: Plan, op: str, rep: _Reporter, poll_s: float) -> ExecResult:
    deadline = rep.now() + max(plan.wait_budget_s, 60.0)

    async def still_moving(exc: TransientCloudError) -> None:
        await rep(Progress(phase="moving traffic", elapsed_s=rep.elapsed(), detail=exc.message))

    while True:
        raise_if_cancelled()
        status = await _ride_out(
            "traffic", deadline, rep.now, poll_s, lambda: runtime.wait_operation(op, timeout_s=poll_s), still_moving
        )
        elapsed = rep.elapsed()
        if status.done and status.error:
            await rep(Progress(phase="failed", elapsed_s=elapsed, detail=status.error, done=True, ok=False), True)
            return ExecResult(ok=False, detail=status.error, duration_s=elapsed)
        if status.done:
            info = await runtime.get_service(plan.service)
            share = sum(t.percent for t in info.traffic if t.revision == plan.target_revision)
            if share != 100:
                detail = f"traffic did not move: {traffic_detail(info, plan.target_revision)}"
                await rep(Progress(phase="failed", elapsed_s=elapsed, detail=detail, done=True, ok=False), True)
                return ExecResult(ok=False, detail=detail, duration_s=elapsed)
            detail = f"100% of traffic on `{plan.target_revision}`"
            await rep(
                Progress(
                    phase="ready",
                    elapsed_s=elapsed,
                    detail=detail,
                    done=True,
                    ok=True,
                    revision=plan.target_revision,
                ),
                True,
            )
            return ExecResult(ok=True, detail=detail, revision=plan.target_revision, duration_s=elapsed)
        if rep.now() >= deadline:
            return ExecResult(
                ok=False, detail="traffic change still running; check `/gemma revisions`", duration_s=elapsed
            )
        await rep(Progress(phase="moving traffic", elapsed_s=elapsed))


async def _destroy(runtime: ServingTarget, plan: Plan, rep: _Reporter, poll_s: float) -> ExecResult:
    op = await runtime.delete_service(plan.service)
    await rep(Progress(phase="submitted", elapsed_s=rep.elapsed()))
    deadline = rep.now() + max(plan.wait_budget_s, 60.0)
    while True:
        raise_if_cancelled()
        status = await runtime.wait_operation(op, timeout_s=poll_s)
        elapsed = rep.elapsed()
        if status.done:
            ok = not status.error
            detail = status.error or f"service `{plan.service}` deleted"
            await rep(
                Progress(phase="deleted" if ok else "failed", elapsed_s=elapsed, detail=detail, done=True, ok=ok),
                True,
            )
            return ExecResult(ok=ok, detail=detail, duration_s=elapsed)
        if rep.now() >= deadline:
            detail = "delete still running; check `/gemma status`"
            # said where the progress is shown, not only in the result: the watch ends here
            await rep(Progress(phase="timed out", elapsed_s=elapsed, detail=detail, done=True, ok=False), True)
            return ExecResult(ok=False, detail=detail, duration_s=elapsed)
        await rep(Progress(phase="deleting", elapsed_s=elapsed))

"""After a canary deploy: compare it with the stable revision on the injectable clock, until a verdict.

Every `poll_s` (on the Clock: the sandbox's or a test's, so no real waiting) both revisions' evidence is read
(skills/observe/revision_compare.py) and reported; a verdict is given only once the window has passed and each
revision finished the minimum number of requests. The watch stops at a verdict, when traffic no longer holds the
canary (someone promoted or rolled back), or after `max_wait_s` without enough traffic.

`auto_rollback` is the one write no human clicks: enabled by a setting, for a clear regression only. It runs
under its own identity, takes the service's lock like any write, and the audit records it (pending, then its
outcome) under that identity, with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from skills.cancellation import raise_if_cancelled
from skills.clock import Clock
from skills.deploy.confirm import run_claimed
from skills.deploy.execute import ExecResult
from skills.deploy.flow import WriteFlow
from skills.deploy.plan_builder import build_plan
from skills.errors import UserFacingError
from skills.locks import LockHeld
from skills.observe.model_metrics import Snapshot
from skills.observe.revision_compare import Comparison, RevisionEvidence, Thresholds, compare, gather
from skills.ports import Metrics, ModelServer, Runtime
from skills.targets.canary import CANARY_TAG, STABLE_TAG, CanaryInfo
from skills.targets.plan import Plan

log = logging.getLogger(__name__)

# handed_over: this process lost the watch's lease (skills/deploy/canary_state.py); the holder goes on.
Ending = Literal["verdict", "no_traffic", "traffic_moved", "unreadable", "handed_over"]


class CanaryPolicy(BaseModel):
    window_s: float = Field(default=600.0, gt=0)  # the least evidence time before a verdict
    poll_s: float = Field(default=60.0, gt=0)
    max_wait_s: float = Field(default=3600.0, gt=0)  # past it without enough traffic, the watch gives up
    thresholds: Thresholds = Field(default_factory=Thresholds)
    auto_rollback: bool = False
    identity: str = "gemma-sre-canary"


class CanaryOutcome(BaseModel):
    ending: Ending
    comparison: Comparison | None = None
    detail: str = ""


Report = Callable[[Comparison], Awaitable[None]]
Firsts = dict[str, Snapshot | None]


@dataclass
class CanaryWatch:
    runtime: Runtime
    model_server: ModelServer
    metrics: Metrics | None
    clock: Clock
    policy: CanaryPolicy

    async def _urls(self, service: str, info: CanaryInfo) -> dict[str, str] | None:
        """Each revision's tagged URL; None when traffic no longer holds both revisions."""
        svc = await self.runtime.get_service(service)
        shares = {t.revision: t for t in svc.traffic}
        canary, base = shares.get(info.revision), shares.get(info.baseline)
        if canary is None or base is None or canary.percent == 0 or base.percent == 0:
            return None
        return {
            "baseline": base.uri if base.tag == STABLE_TAG else "",
            "canary": canary.uri if canary.tag == CANARY_TAG else "",
        }

    async def follow(
        self,
        service: str,
        info: CanaryInfo,
        report: Report,
        *,
        started: float | None = None,
        firsts: Firsts | None = None,
        on_firsts: Callable[[Firsts], Awaitable[None]] | None = None,
        still_ours: Callable[[], bool] | None = None,
    ) -> CanaryOutcome:
        """Watch until a verdict. A resumed watch (after a restart) passes when the canary `started` and the
        `firsts` scrapes it kept, so its window and evidence count from the canary's start; `on_firsts` is told
        once the first scrapes are taken (to keep them); `still_ours` False stops the watch (lease lost)."""
        p = self.policy
        start = self.clock.now() if started is None else started
        firsts = {"baseline": None, "canary": None, **(firsts or {})}
        window_minutes = max(1, round(p.window_s / 60))
        last: Comparison | None = None
        while True:
            raise_if_cancelled()  # a cancel a Redis write swallowed (skills/cancellation.py)
            if still_ours is not None and not still_ours():
                return CanaryOutcome(
                    ending="handed_over", comparison=last, detail="another bot process watches this canary now"
                )
            try:
                urls = await self._urls(service, info)
            except UserFacingError as exc:
                return CanaryOutcome(ending="unreadable", comparison=last, detail=exc.message)
            if urls is None:
                return CanaryOutcome(
                    ending="traffic_moved",
                    comparison=last,
                    detail=f"traffic no longer splits between `{info.baseline}` and `{info.revision}`",
                )
            now = self.clock.now()
            had = dict(firsts)
            base, firsts["baseline"] = await self._gather(
                service, info.baseline, "baseline", urls, firsts, now, window_minutes
            )
            can, firsts["canary"] = await self._gather(
                service, info.revision, "canary", urls, firsts, now, window_minutes
            )
            if on_firsts is not None and firsts != had:
                await on_firsts(dict(firsts))
            elapsed = now - start
            last = compare(base, can, p.thresholds, elapsed)
            if last.verdict != "not_enough_traffic" and elapsed < p.window_s:
                last.reasons = [f"the window is {p.window_s:.0f} s; {elapsed:.0f} s so far", *last.reasons]
                last.verdict = "not_enough_traffic"
            await report(last)
            if last.verdict != "not_enough_traffic":
                return CanaryOutcome(ending="verdict", comparison=last)
            if elapsed >= p.max_wait_s:
                return CanaryOutcome(
                    ending="no_traffic",
                    comparison=last,
                    detail=f"not enough traffic after {elapsed:.0f} s (at least {p.thresholds.min_requests} requests "
                    "per revision are needed)",
                )
            await self.clock.sleep(p.poll_s)

    async def _gather(
        self,
        service: str,
        revision: str,
        role: Literal["baseline", "canary"],
        urls: dict[str, str],
        firsts: dict[str, Snapshot | None],
        now: float,
        window_minutes: int,
    ) -> tuple[RevisionEvidence, Snapshot | None]:
        first = firsts[role]
        ev, latest = await gather(
            self.model_server, self.metrics, service, revision, role, urls[role], first, now, window_minutes
        )
        return ev, first if first is not None else latest


async def auto_rollback(flow: WriteFlow, service: str, info: CanaryInfo, reason: str, identity: str) -> ExecResult:
    """Roll the canary back without a click: 100% to the stable revision, under `identity`, with the service lock
    and the audit every confirmed write gets. A held lock (someone else is writing) skips it, and says so."""
    target = flow.targets.for_service(service)
    plan: Plan = await build_plan(
        "rollback", {"revision": info.baseline, "service": service}, target, flow.env, user_id=identity
    )
    plan.summary = f"Automatic rollback of canary `{info.revision}`: 100% of traffic back to `{info.baseline}`"
    plan.added = {"automatic": True, "reason": reason[:300]}
    await flow.plans.save(plan)
    if not await flow.plans.claim(plan.id, identity):
        return ExecResult(ok=False, detail="the automatic rollback's plan was already claimed")
    lock = flow.gate.lock(service)
    try:
        await lock.acquire(identity, "rollback")
    except LockHeld as exc:
        await flow.plans.discard(plan.id)
        return ExecResult(ok=False, detail=f"not rolled back automatically: `{service}` is busy ({exc})")
    return await run_claimed(flow.gate, plan, lock, identity, target, logs=target.logs, poll_s=flow.poll_s)

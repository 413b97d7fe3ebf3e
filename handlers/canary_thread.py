"""A canary deploy's thread: the comparison posted once and edited as evidence comes in, then the proposal.

The proposal is two plan buttons (Promote: 100% to the canary; Roll back: 100% to the stable revision), each
planned and confirmed like any write; the recommended one comes first. With CANARY_AUTO_ROLLBACK a clear
regression is rolled back without a click (skills/deploy/canary_watch.py auto_rollback), and the thread says it
happened, why, and under which identity.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from handlers.context import Responder
from handlers.reply import Reply, plan_button
from skills.deploy.canary import CanaryInfo
from skills.deploy.canary_watch import CanaryOutcome, CanaryPolicy, CanaryWatch, auto_rollback
from skills.deploy.plans import Plan
from skills.durations import format_duration
from skills.observe.model_metrics import Percentiles
from skills.observe.revision_compare import Comparison, RevisionEvidence, Thresholds

if TYPE_CHECKING:
    from handlers.deps import HandlerDeps

log = logging.getLogger(__name__)

_HEADLINE = {
    "not_enough_traffic": ":hourglass_flowing_sand: not enough traffic yet",
    "holds": ":white_check_mark: the canary holds",
    "regresses": ":x: the canary regresses",
}


def policy_of(deps: HandlerDeps) -> CanaryPolicy:
    st = deps.settings
    return CanaryPolicy(
        window_s=st.canary_window_s,
        poll_s=st.canary_poll_s,
        max_wait_s=st.canary_max_wait_s,
        thresholds=Thresholds(
            min_requests=st.canary_min_requests,
            max_error_rate_increase=st.canary_max_error_rate_increase,
            max_latency_ratio=st.canary_max_latency_ratio,
        ),
        auto_rollback=st.canary_auto_rollback,
        identity=st.canary_rollback_identity,
    )


def _p(x: Percentiles | None, attr: str) -> str:
    v = getattr(x, attr, None) if x is not None else None
    return f"{v:.2f} s" if v is not None else "—"


def _row(e: RevisionEvidence) -> list[str]:
    err = f"{e.error_rate:.1%}" if e.error_rate is not None else "—"
    kv = f"{e.kv_usage:.0%}" if e.kv_usage is not None else "—"
    waiting = f"{e.waiting:.0f}" if e.waiting is not None else "—"
    return [
        f"{e.role} {e.revision}"[:34],
        f"{e.requests:.0f}",
        err,
        _p(e.e2e, "p50"),
        _p(e.e2e, "p95"),
        _p(e.ttft, "p95"),
        kv,
        waiting,
    ]


def render_comparison(c: Comparison, info: CanaryInfo, *, final: bool = False) -> Reply:
    reply = Reply(title=f"Canary `{info.revision}` ({info.percent}%) vs `{info.baseline}`: {_HEADLINE[c.verdict]}")
    head = ["revision", "requests", "errors", "p50", "p95", "TTFT p95", "KV", "waiting"]
    rows = [head, _row(c.baseline), _row(c.canary)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    table = "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in rows)
    reply.add(code=table)
    if c.reasons:
        reply.add(text="\n".join(f"• {r}" for r in c.reasons))
    problems = [p for e in (c.baseline, c.canary) for p in e.problems]
    if problems:
        reply.add(text="\n".join(f":warning: {p}" for p in problems))
    reply.context = (
        f"over {format_duration(c.window_s, 'approx')} since the canary took traffic · a verdict needs "
        f"{c.min_requests} requests per revision · errors: Cloud Run's 5xx share (Cloud Monitoring); latency, TTFT, "
        "KV cache, waiting: each revision's vLLM /metrics at its tagged URL"
        + ("" if final else " · updated as evidence comes in")
    )
    return reply


def proposal(outcome: CanaryOutcome, info: CanaryInfo, service: str) -> Reply:
    verdict = outcome.comparison.verdict if outcome.comparison else "not_enough_traffic"
    promote = plan_button(
        "promote", {"revision": info.revision, "service": service}, f"Promote: 100% to {info.revision}"
    )
    rollback = plan_button(
        "rollback", {"revision": info.baseline, "service": service}, f"Roll back: 100% to {info.baseline}"
    )
    if outcome.ending == "verdict" and verdict == "regresses":
        reply = Reply(title=f":x: Canary `{info.revision}` regresses: roll it back?")
        reply.buttons = [rollback, promote]
    elif outcome.ending == "verdict":
        reply = Reply(title=f":white_check_mark: Canary `{info.revision}` holds: promote it?")
        reply.buttons = [promote, rollback]
    else:
        reply = Reply(title=f":warning: Canary `{info.revision}`: no verdict ({outcome.detail})")
        reply.buttons = [] if outcome.ending == "traffic_moved" else [rollback, promote]
    if outcome.comparison and outcome.comparison.reasons and outcome.ending == "verdict":
        reply.add(text="\n".join(f"• {r}" for r in outcome.comparison.reasons))
    if reply.buttons:
        reply.add(text="Each button plans the traffic change; a deployer confirms it.")
    return reply


async def follow_canary(deps: HandlerDeps, plan: Plan, responder: Responder, thread_ts: str) -> CanaryOutcome:
    """Watch the canary a confirmed plan started, in its thread, until a verdict (or the watch gives up)."""
    info = CanaryInfo.model_validate(plan.canary)
    policy = policy_of(deps)
    target = deps.targets.for_kind(plan.target)  # the target the canary runs on: its status and metrics
    watch = CanaryWatch(target, deps.model_server, target.metrics, deps.clock, policy)
    ts = ""

    async def report(c: Comparison) -> None:
        nonlocal ts
        reply = render_comparison(c, info)
        try:
            if not ts:
                ts = await responder.post(reply, thread_ts=thread_ts)
            else:
                await responder.update(ts, reply)
        except Exception:  # the watch goes on; the next report tries again
            log.warning("could not post the canary comparison of plan %s", plan.id, exc_info=True)

    outcome = await watch.follow(plan.service, info, report)
    if outcome.comparison is not None and ts:
        try:
            await responder.update(ts, render_comparison(outcome.comparison, info, final=True))
        except Exception:  # noqa: BLE001 - the proposal below still says the verdict
            log.warning("could not finalise the canary comparison of plan %s", plan.id)
    c = outcome.comparison
    if outcome.ending == "verdict" and c is not None and c.verdict == "regresses" and policy.auto_rollback:
        reason = "; ".join(c.reasons)
        result = await auto_rollback(deps.writes, plan.service, info, reason, policy.identity)
        if result.ok:
            msg = Reply(
                title=f":rewind: Rolled back automatically: 100% of traffic on `{info.baseline}`, "
                f"canary `{info.revision}` at 0%"
            )
            msg.add(text=f"Why: {reason}.")
            msg.context = (
                f"by `{policy.identity}` (CANARY_AUTO_ROLLBACK is on), with the service lock; recorded in "
                "`/gemma audit`"
            )
        else:
            msg = proposal(outcome, info, plan.service)
            msg.add(text=f":warning: The automatic rollback did not happen: {result.detail}")
        await responder.post(msg, thread_ts=thread_ts)
        return outcome
    await responder.post(proposal(outcome, info, plan.service), thread_ts=thread_ts)
    return outcome

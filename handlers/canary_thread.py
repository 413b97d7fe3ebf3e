"""A canary deploy's thread: the comparison posted once and edited as evidence comes in, then the proposal.

The proposal is two plan buttons (Promote: 100% to the canary; Roll back: 100% to the stable revision), each
planned and confirmed like any write; the recommended one comes first. With CANARY_AUTO_ROLLBACK a clear
regression is rolled back without a click (skills/deploy/canary_watch.py auto_rollback), and the thread says it
happened, why, and under which identity.

The watch's state lives in Redis while it runs (skills/deploy/canary_state.py): after a restart,
`resume_canaries` takes up each watch whose split is still in place, and closes one whose split is gone, with
what the service shows now. One process watches a canary at a time (a lease with a TTL).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from handlers.context import Responder
from handlers.reply import Reply, plan_button
from skills.cancellation import raise_if_cancelled
from skills.deploy.canary_state import CanaryRecord, CanaryWatches, split_holds, traffic_now
from skills.deploy.canary_watch import CanaryOutcome, CanaryPolicy, CanaryWatch, Firsts, auto_rollback
from skills.durations import format_duration
from skills.errors import NotFound, UserFacingError
from skills.leases import Lease
from skills.observe.model_metrics import Percentiles
from skills.observe.revision_compare import Comparison, RevisionEvidence, Thresholds
from skills.targets.canary import CanaryInfo
from skills.targets.plan import Plan

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


def render_comparison(
    c: Comparison, info: CanaryInfo, *, final: bool = False, where: str = "Cloud Run", source: str = "Cloud Monitoring"
) -> Reply:
    """`where`: the target as people name it; `source`: where its request counts come from (its Metrics')."""
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
        f"{c.min_requests} requests per revision · errors: 5xx share of the requests {where} counts ({source}); "
        "latency, TTFT, KV cache, waiting: each revision's vLLM /metrics at its tagged URL"
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


def watches_of(deps: HandlerDeps) -> CanaryWatches:
    return CanaryWatches(deps.redis, deps.settings.key("canary", "watches"), deps.settings.canary_lease_ms)


async def follow_canary(
    deps: HandlerDeps, plan: Plan, responder: Responder, thread_ts: str, user_id: str = ""
) -> CanaryOutcome | None:
    """Watch the canary a confirmed plan started, in its thread, until a verdict (or the watch gives up). Its
    state is kept in Redis while it runs, so a restarted bot resumes it (`resume_canaries`)."""
    policy = policy_of(deps)
    record = CanaryRecord(
        plan_id=plan.id,
        service=plan.service,
        target=plan.target,
        info=CanaryInfo.model_validate(plan.canary),
        channel=responder.channel,
        thread_ts=thread_ts,
        user_id=user_id,
        started=deps.clock.now(),
        min_requests=policy.thresholds.min_requests,
        auto_rollback=policy.auto_rollback,
    )
    watches = watches_of(deps)
    lease = watches.lease(plan.service)
    try:
        if not await lease.acquire():  # a canary per service at a time: the split check refuses a second one
            log.warning("canary %s on %s: another bot process holds its watch", record.info.revision, plan.service)
            return None
        await watches.save(record)
    except Exception:  # noqa: BLE001 - Redis away: watch all the same, without a record to resume from
        log.warning("canary %s: its watch is not kept in Redis; it will not resume after a restart", plan.id)
        await lease.release()
        return await _watch(deps, watches, None, record, responder)
    return await _watch(deps, watches, lease, record, responder)


async def _watch(
    deps: HandlerDeps, watches: CanaryWatches, lease: Lease | None, record: CanaryRecord, responder: Responder
) -> CanaryOutcome | None:
    """The watch under its lease (None: Redis was away at its start, so nothing is kept). It ends by removing
    its record; a process stopped mid-watch (cancelled) keeps it and hands the lease back, so the next start
    resumes the watch at once."""
    try:
        outcome = await _follow(deps, watches, lease, record, responder)
    except asyncio.CancelledError:
        if lease is not None:
            await lease.release()  # the record stays for the next start
        raise
    except BaseException:
        await _end(watches, lease, record)
        raise
    await _end(watches, lease, record, keep_record=outcome.ending == "handed_over")
    return outcome


async def _end(watches: CanaryWatches, lease: Lease | None, record: CanaryRecord, keep_record: bool = False) -> None:
    if lease is None:
        return
    try:
        if not keep_record and lease.held:
            await watches.remove(record)
    except Exception:  # Redis away: the next start finds the split gone and closes it
        log.warning("could not remove the watch record of canary %s", record.info.revision, exc_info=True)
    await lease.release()


async def _follow(
    deps: HandlerDeps, watches: CanaryWatches, lease: Lease | None, record: CanaryRecord, responder: Responder
) -> CanaryOutcome:
    info, service, thread_ts = record.info, record.service, record.thread_ts
    policy = policy_of(deps)
    # The settings the canary started with, not this process's (a restart may come with other ones).
    policy.thresholds.min_requests = record.min_requests
    policy.auto_rollback = record.auto_rollback
    target = deps.targets.for_kind(record.target) if record.target else deps.targets.for_service(service)
    watch = CanaryWatch(target, deps.model_server, target.metrics, deps.clock, policy)
    source = str(getattr(target.metrics, "source", "") or "Cloud Monitoring")  # as status heads its figures

    async def keep(update: dict[str, object]) -> None:
        for k, v in update.items():
            setattr(record, k, v)
        if lease is None or not lease.held:
            return
        try:
            await watches.save(record)
        except Exception:  # the watch goes on; a resume would start from the older record
            log.warning("could not update the watch record of canary %s", info.revision, exc_info=True)

    async def report(c: Comparison) -> None:
        reply = render_comparison(c, info, where=target.display, source=source)
        try:
            if not record.comparison_ts:
                await keep({"comparison_ts": await responder.post(reply, thread_ts=thread_ts)})
            else:
                await responder.update(record.comparison_ts, reply)
        except Exception:  # the watch goes on; the next report tries again
            log.warning("could not post the canary comparison of plan %s", record.plan_id, exc_info=True)

    async def on_firsts(firsts: Firsts) -> None:
        await keep({"firsts": firsts})

    outcome = await watch.follow(
        service,
        info,
        report,
        started=record.started,
        firsts=record.firsts,
        on_firsts=on_firsts,
        still_ours=(lambda: lease.held) if lease is not None else None,
    )
    if outcome.ending == "handed_over":
        log.warning("canary %s on %s: %s", info.revision, service, outcome.detail)
        return outcome
    if outcome.comparison is not None and record.comparison_ts:
        try:
            await responder.update(
                record.comparison_ts,
                render_comparison(outcome.comparison, info, final=True, where=target.display, source=source),
            )
        except Exception:  # noqa: BLE001 - the proposal below still says the verdict
            log.warning("could not finalise the canary comparison of plan %s", record.plan_id)
    c = outcome.comparison
    if outcome.ending == "verdict" and c is not None and c.verdict == "regresses" and policy.auto_rollback:
        reason = "; ".join(c.reasons)
        result = await auto_rollback(deps.writes, service, info, reason, policy.identity)
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
            msg = proposal(outcome, info, service)
            msg.add(text=f":warning: The automatic rollback did not happen: {result.detail}")
        await responder.post(msg, thread_ts=thread_ts)
        return outcome
    await responder.post(proposal(outcome, info, service), thread_ts=thread_ts)
    return outcome


class Resumed(BaseModel):
    """What the start did with one canary watch it found in Redis."""

    service: str
    revision: str
    state: Literal["resumed", "closed", "watched_elsewhere", "ended"]


async def resume_canaries(deps: HandlerDeps, responder_for: Callable[[str], Responder]) -> list[Resumed]:
    """At start: the canary watches a stopped process left in Redis. A split still in place is watched again
    (from where the canary started; one line in its thread says so); a split gone meanwhile (promoted or rolled
    back by hand) closes the watch with what the service shows now. A watch whose lease another process holds
    stays its: this process stands by and takes it over only if that lease lapses (its holder stopped)."""
    watches = watches_of(deps)
    out = []
    for record in await watches.all():
        lease = watches.lease(record.service)
        if await lease.acquire():
            out.append(await _resume(deps, watches, lease, record, responder_for))
            continue
        deps.spawn(_stand_by(deps, watches, lease, record, responder_for), kind="watch", user=record.user_id)
        out.append(Resumed(service=record.service, revision=record.info.revision, state="watched_elsewhere"))
    return out


async def _stand_by(
    deps: HandlerDeps,
    watches: CanaryWatches,
    lease: Lease,
    record: CanaryRecord,
    responder_for: Callable[[str], Responder],
) -> None:
    """While another process holds the watch: try its lease every third of its TTL, until the watch ends (its
    record goes) or the lease lapses (its holder stopped without handing it back) and this process resumes
    it. Real time: the lease's TTL runs in Redis, not on the watch's clock."""
    while True:
        raise_if_cancelled()  # a cancel lost in a Redis call below must not keep this follower polling
        current = await watches.get(record.service)
        if current is None or current.plan_id != record.plan_id:
            return
        await asyncio.sleep(lease.ttl_ms / 3000)
        if await lease.acquire():
            await _resume(deps, watches, lease, record, responder_for)
            return


async def _resume(
    deps: HandlerDeps,
    watches: CanaryWatches,
    lease: Lease,
    record: CanaryRecord,
    responder_for: Callable[[str], Responder],
) -> Resumed:
    """With the watch's lease held: resume the watch, or close it when its split is gone."""
    info, service = record.info, record.service
    current = await watches.get(service)  # the holder before us may have ended it, or updated it
    if current is None or current.plan_id != record.plan_id:
        await lease.release()
        return Resumed(service=service, revision=info.revision, state="ended")
    record = current
    responder = responder_for(record.channel)
    target = deps.targets.for_kind(record.target) if record.target else deps.targets.for_service(service)
    gone = ""
    try:
        svc = await target.get_service(service)
        if not split_holds(svc, info):
            gone = f"it shows now: {traffic_now(svc)}"
    except NotFound:
        gone = f"`{service}` no longer exists"
    except UserFacingError as exc:  # unreadable now: the resumed watch's first poll says so and proposes
        log.warning("canary %s on %s: unreadable at resume: %s", info.revision, service, exc.message)
    if gone:
        await _say(
            responder,
            Reply(
                title=f":checkered_flag: Canary watch closed: traffic on `{service}` no longer splits between "
                f"`{info.baseline}` and `{info.revision}` (changed while the bot was stopped); {gone}."
            ),
            record,
        )
        await watches.remove(record)
        await lease.release()
        return Resumed(service=service, revision=info.revision, state="closed")
    since = format_duration(max(0.0, deps.clock.now() - record.started), "approx")
    await _say(
        responder,
        Reply(
            title=f":arrows_counterclockwise: Canary watch resumed after a restart: `{info.revision}` "
            f"({info.percent}%) vs `{info.baseline}`, started {since} ago; the comparison goes on from there."
        ),
        record,
    )
    deps.spawn(_watch(deps, watches, lease, record, responder), kind="watch", user=record.user_id)
    return Resumed(service=service, revision=info.revision, state="resumed")


async def _say(responder: Responder, reply: Reply, record: CanaryRecord) -> None:
    try:
        await responder.post(reply, thread_ts=record.thread_ts or None)
    except Exception:  # noqa: BLE001 - the watch's state is what matters; the line is logged instead
        log.warning("could not post in the thread of canary %s: %s", record.info.revision, reply.title)

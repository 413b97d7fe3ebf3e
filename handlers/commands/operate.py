"""/gemma scale | revisions | rollback | destroy | quota | audit"""

from __future__ import annotations

import logging

from handlers.arg_models import DESTROY_TYPED, ROLLBACK_TYPED, SCALE_TYPED, AuditArgs, QuotaArgs, ServiceArgs
from handlers.commands.plans import destroy_modal, make_plan
from handlers.context import CommandContext
from handlers.declared_args import arguments
from handlers.registry import command
from handlers.reply import Reply
from skills.actions.params import DestroyParams, RollbackParams, ScaleParams
from skills.audit import latest
from skills.capacity.gpu_quota import GPU_QUOTA_IDS, quota_by_region, request_text
from skills.capacity.prices import regions_offering
from skills.deploy.revisions import quota_advice, revisions
from skills.durations import format_duration
from skills.errors import InvalidInput
from skills.targets.port import require
from skills.text import shorten

log = logging.getLogger(__name__)

_AUDIT_ICON = {
    "ok": ":white_check_mark:",
    "failed": ":x:",
    "refused": ":no_entry:",
    "cancelled": ":no_entry_sign:",
    "pending": ":hourglass_flowing_sand:",
}


@command("scale", "Plan new instance limits (Confirm to apply)", arguments(ScaleParams, SCALE_TYPED), ack="Planning…",
         hint="e.g. `/gemma scale 0 2`.", kind="write")  # fmt: skip
async def scale(ctx: CommandContext) -> Reply:
    o = ctx.opts
    params: dict[str, int | str] = {"min_instances": o.min_instances, "max_instances": o.max_instances}
    if o.service:
        params["service"] = o.service
    return await make_plan(ctx.deps, ctx.user_id, ctx.channel_id, "scale", params)


@command("revisions", "Recent revisions, their state and traffic", arguments(ServiceArgs), ack="Listing…")
async def list_revisions(ctx: CommandContext) -> Reply:
    service = ctx.opts.service or ctx.deps.settings.vllm_service_name
    target = ctx.deps.targets.for_service(service)
    require(target, "revisions", service)  # said plainly, before anything is asked of the cloud
    view = await revisions(target, service)
    rows = []
    for r in view.revisions:
        state = (
            ":large_green_circle: ready"
            if r.ready
            else (":hourglass: pending" if r.ready is None else ":red_circle: failed")
        )
        when = r.create_time.strftime("%Y-%m-%d %H:%M UTC") if r.create_time else "—"
        line = f"`{r.name}`  {state}  {r.traffic_percent}% traffic  · {when}"
        if r.tags:  # a canary's `stable` / `canary`: each tag also answers at its own URL
            line += "  · tags: " + ", ".join(f"`{t}`" + (f" ({u})" if u else "") for t, u in sorted(r.tags.items()))
        if r.ready is False and (r.reason or r.message):
            line += f"\n      {r.reason}: {shorten(r.message, 200)}"
        rows.append(line)
    reply = Reply(title=f":card_index: Revisions of `{service}`")
    reply.add(text="\n".join(rows) or "No revisions.")
    reply.context = "`/gemma rollback [REVISION]` moves 100% of traffic to a ready revision (plan → confirm)."
    return reply


@command(
    "rollback",
    "Plan routing 100% of traffic to the previous (or a named) ready revision",
    arguments(RollbackParams, ROLLBACK_TYPED),
    ack="Planning the rollback…",
    kind="write",
)
async def rollback(ctx: CommandContext) -> Reply:
    o = ctx.opts
    params: dict[str, str] = {"revision": o.revision} if o.revision else {}
    if o.service:
        params["service"] = o.service
    return await make_plan(ctx.deps, ctx.user_id, ctx.channel_id, "rollback", params)


@command(
    "destroy",
    "Delete the service (confirm by typing its name)",
    arguments(DestroyParams, DESTROY_TYPED),
    ack="Planning…",
    kind="write",
)
async def destroy(ctx: CommandContext) -> Reply:
    params = {"service": ctx.opts.service} if ctx.opts.service else {}
    reply = await make_plan(ctx.deps, ctx.user_id, ctx.channel_id, "destroy", params)
    plan_id = next((b.value for b in reply.buttons if b.value), "")
    plan = await ctx.deps.writes.plan(plan_id)
    if plan is not None and ctx.trigger_id:
        # Straight to the dialog while the slash command's trigger is fresh; the button stays as a fallback.
        try:
            await ctx.responder.open_modal(destroy_modal(plan, ctx.channel_id))
        except Exception as exc:  # noqa: BLE001 - the Destroy… button stays as the fallback
            log.warning(
                "destroy: could not open the dialog for plan %s: %s: %s", plan.id, type(exc).__name__, str(exc)[:200]
            )
            reply.context = (reply.context or "") + " · press Destroy… to type the name"
    return reply


@command(
    "quota", "Cloud Run GPU quota by region, read from the Cloud Quotas API", arguments(QuotaArgs), ack="Checking…"
)
async def quota(ctx: CommandContext) -> Reply:
    gpu = ctx.opts.gpu
    flow = ctx.deps.writes
    env, src = flow.env, flow.preflight
    if gpu not in GPU_QUOTA_IDS:
        raise InvalidInput(f"No Cloud Run quota is recorded for `{gpu}`.", "GPUs: " + ", ".join(sorted(GPU_QUOTA_IDS)))
    if src is None or src.quotas is None:
        advice = quota_advice(env, gpu)
        return (
            Reply(title=f":bar_chart: GPU quota: {advice.gpu} in {advice.region}")
            .add(text=advice.text)
            .add(heading="Check it with", code="\n".join(advice.commands))
        )
    # The deploy region first, then every other region that offers the GPU (invitation-only ones included).
    regions = [env.region, *(r for r in regions_offering(gpu, invitation=True) if r != env.region)]
    rows = await quota_by_region(src.quotas, gpu, regions, src.timeout_s)
    lines = []
    for row in rows:
        here = " (deploys go here)" if row.region == env.region else ""
        q = row.quota
        if q is None or q.value is None:
            why = row.why or "the API gives no value for this region"
            lines.append(f"• `{row.region}`{here}: could not read ({why})")
        elif q.value == -1:
            lines.append(f"• `{row.region}`{here}: unlimited")
        else:
            icon = ":white_check_mark:" if q.value > 0 else ":x:"
            lines.append(f"• `{row.region}`{here}: {icon} {q.value} GPU(s)")
        if row.requests:
            lines[-1] += " · " + "; ".join(request_text(r) for r in row.requests)
    first = next((r.quota for r in rows if r.quota is not None), None)
    reply = Reply(title=f":bar_chart: Cloud Run {gpu} GPU quota")
    reply.add(text="\n".join(lines))
    qid = GPU_QUOTA_IDS[gpu]
    reply.context = (
        f"`{qid}` (service run.googleapis.com, what services without zonal redundancy use); the limit, not "
        "what is in use."
    )
    if first is not None and any(r.quota is not None and r.quota.value == 0 for r in rows):
        reply.add(heading="To get quota", text=first.request_fix(env.project))
    return reply


@command(
    "audit",
    "The latest write actions (who, what, result, duration)",
    arguments(AuditArgs),
    ack="Reading the audit log…",
)
async def audit(ctx: CommandContext) -> Reply:
    entries = await latest(ctx.deps.redis, ctx.deps.settings.key("audit"), ctx.opts.n)
    reply = Reply(title=f":scroll: Last {len(entries)} write actions")
    lines = []
    for e in entries:
        params = ", ".join(f"{k}={v}" for k, v in e.params.items()) or "—"
        outcome = f"{e.result} in {format_duration(e.duration_s)}"
        if e.result == "pending":
            outcome = "pending (outcome not seen yet)"
        lines.append(
            f"{_AUDIT_ICON.get(e.result, '')} {e.when()} {reply.mention(e.user_id)} *{e.action}* `{e.service}` "
            f"({params}) → {outcome}" + (f": {shorten(e.detail, 150)}" if e.detail and e.result != "pending" else "")
        )
    reply.add(text="\n".join(lines) or "No write actions recorded yet.")
    return reply

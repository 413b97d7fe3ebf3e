"""/gemma scale | revisions | rollback | destroy | quota | audit"""

from __future__ import annotations

import logging

from handlers.commands.plans import deploy_env, destroy_modal, make_plan, plan_store
from handlers.context import CommandContext
from handlers.registry import command
from handlers.reply import Reply
from skills.audit import latest
from skills.errors import InvalidInput
from skills.operate import quota_advice, revisions

log = logging.getLogger(__name__)

_AUDIT_ICON = {
    "ok": ":white_check_mark:",
    "failed": ":x:",
    "refused": ":no_entry:",
    "cancelled": ":no_entry_sign:",
}


def _int(value: str, what: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise InvalidInput(f"{what} must be a whole number, not `{value}`.") from None


def _service_opt(args: list[str]) -> tuple[list[str], str | None]:
    if "--service" in args:
        i = args.index("--service")
        if i + 1 >= len(args):
            raise InvalidInput("`--service` needs a name.")
        return args[:i] + args[i + 2 :], args[i + 1]
    return args, None


@command("scale", "Plan new instance limits (Confirm to apply)", "scale MIN MAX [--service S]", ack="Planning…")
async def scale(ctx: CommandContext) -> Reply:
    args, service = _service_opt(ctx.args)
    if len(args) != 2:
        raise InvalidInput("Usage: `/gemma scale MIN MAX`, e.g. `/gemma scale 0 2`.")
    params: dict[str, int | str] = {
        "min_instances": _int(args[0], "MIN"),
        "max_instances": _int(args[1], "MAX"),
    }
    if service:
        params["service"] = service
    return await make_plan(ctx.deps, ctx.user_id, ctx.channel_id, "scale", params)


@command("revisions", "Recent revisions, their state and traffic", "revisions [service]", ack="Listing…")
async def list_revisions(ctx: CommandContext) -> Reply:
    service = ctx.args[0] if ctx.args else ctx.deps.settings.vllm_service_name
    view = await revisions(ctx.deps.runtime, service)
    rows = []
    for r in view.revisions:
        state = (
            ":large_green_circle: ready"
            if r.ready
            else (":hourglass: pending" if r.ready is None else ":red_circle: failed")
        )
        when = r.create_time.strftime("%Y-%m-%d %H:%M UTC") if r.create_time else "—"
        line = f"`{r.name}`  {state}  {r.traffic_percent}% traffic  · {when}"
        if r.ready is False and (r.reason or r.message):
            line += f"\n      {r.reason}: {r.message[:200]}"
        rows.append(line)
    reply = Reply(title=f":card_index: Revisions of `{service}`")
    reply.add(text="\n".join(rows) or "No revisions.")
    reply.context = "`/gemma rollback [REVISION]` moves 100% of traffic to a ready revision (plan → confirm)."
    return reply


@command(
    "rollback",
    "Plan routing 100% of traffic to the previous (or a named) ready revision",
    "rollback [REVISION] [--service S]",
    ack="Planning the rollback…",
)
async def rollback(ctx: CommandContext) -> Reply:
    args, service = _service_opt(ctx.args)
    if len(args) > 1:
        raise InvalidInput("Usage: `/gemma rollback [REVISION]`.")
    params: dict[str, str] = {"revision": args[0]} if args else {}
    if service:
        params["service"] = service
    return await make_plan(ctx.deps, ctx.user_id, ctx.channel_id, "rollback", params)


@command("destroy", "Delete the service (confirm by typing its name)", "destroy [service]", ack="Planning…")
async def destroy(ctx: CommandContext) -> Reply:
    params = {"service": ctx.args[0]} if ctx.args else {}
    reply = await make_plan(ctx.deps, ctx.user_id, ctx.channel_id, "destroy", params)
    plan_id = next((b.value for b in reply.buttons if b.value), "")
    plan = await plan_store(ctx.deps).get(plan_id)
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


@command("quota", "How much Cloud Run GPU quota the region has (or how to check)", "quota [gpu]", ack="Checking…")
async def quota(ctx: CommandContext) -> Reply:
    gpu = ctx.args[0] if ctx.args else "nvidia-l4"
    advice = quota_advice(deploy_env(ctx.deps), gpu)
    return (
        Reply(title=f":bar_chart: GPU quota: {advice.gpu} in {advice.region}")
        .add(text=advice.text)
        .add(heading="Check it with", code="\n".join(advice.commands))
    )


@command(
    "audit",
    "The latest write actions (who, what, result, duration)",
    "audit [N]",
    ack="Reading the audit log…",
)
async def audit(ctx: CommandContext) -> Reply:
    n = min(50, max(1, _int(ctx.args[0], "N"))) if ctx.args else 10
    entries = await latest(ctx.deps.redis, ctx.deps.settings.key("audit"), n)
    reply = Reply(title=f":scroll: Last {len(entries)} write actions")
    lines = []
    for e in entries:
        params = ", ".join(f"{k}={v}" for k, v in e.params.items()) or "—"
        lines.append(
            f"{_AUDIT_ICON.get(e.result, '')} {e.when()} {reply.mention(e.user_id)} *{e.action}* `{e.service}` "
            f"({params}) → "
            f"{e.result} in {e.duration_s:.0f} s" + (f": {e.detail[:150]}" if e.detail else "")
        )
    reply.add(text="\n".join(lines) or "No write actions recorded yet.")
    return reply

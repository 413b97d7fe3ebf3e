"""/gemma tpu zones [TYPE] [--provisioning P] — where a v6e slice can be created now: the zones that offer the
accelerator type (Cloud TPU API) and have quota for it (Cloud Quotas API), cheapest first. The fix the TPU
findings point at for no capacity or no quota (skills/diagnosis/analyzers/tpu.py)."""

from __future__ import annotations

from handlers.args import CommandParser
from handlers.context import CommandContext
from handlers.registry import command
from handlers.reply import Reply
from skills.capacity.tpu_catalog import PROVISIONING
from skills.errors import InvalidInput
from skills.targets.tpu.target import KIND, TpuTarget


def _args(p: CommandParser) -> None:
    p.add_argument("what", metavar="zones", choices=["zones"], help="what to show (zones)")
    p.add_argument("type", metavar="TYPE", nargs="?", default="v6e-4", help="accelerator type (default v6e-4)")
    p.add_argument("--provisioning", choices=list(PROVISIONING), default="on-demand", help="on-demand, spot, ...")


@command("tpu", "Cloud TPU: zones that offer a v6e slice with quota for it", _args, ack="Searching zones…")
async def tpu(ctx: CommandContext) -> Reply:
    target = ctx.deps.targets.by_kind.get(KIND)
    if not isinstance(target, TpuTarget):
        raise InvalidInput("No Cloud TPU target is set up in this bot.")
    if ctx.opts.provisioning == "flex-start":
        flex = target.tpu.flex_start
        where = f"it is known to work in {', '.join(flex.zones)}" if flex.zones else flex.note
        raise InvalidInput(
            f"Flex-start is not offered through the tpu_v2 queued-resource API the bot uses; {where} "
            f"(source: {target.tpu.cite(flex.source)}).",
            "Use on-demand, spot or reserved.",
        )
    options = await target.zone_search(ctx.opts.type, ctx.opts.provisioning)
    usable = [o for o in options if o.usable]
    title = f":mag: {ctx.opts.type} {ctx.opts.provisioning}: {len(usable)} of {len(options)} zones usable"
    reply = Reply(title=title).add(text="\n".join(o.line() for o in options))
    if not usable:  # another provisioning model is suggested only where its own quota holds
        other = await target.other_provisioning(ctx.opts.type, ctx.opts.provisioning)
        held = {tier: [o.zone for o in found if o.usable] for tier, found in other.items()}
        lines = [
            f"`--provisioning {tier}` has quota in {', '.join(zones)}."
            if zones
            else f"Tried {tier} too: {tier} has no quota in any zone searched"
            + (f" ({other[tier][0].quota_id})." if other[tier] else ".")
            for tier, zones in held.items()
        ]
        first = "Otherwise nothing the bot can do" if any(held.values()) else "Nothing the bot can do"
        reply.add(
            text=" ".join(
                [
                    *lines,
                    f"{first}: request TPU quota (Console > IAM & Admin > Quotas, service tpu.googleapis.com).",
                ]
            )
        )
    reply.context = "Capacity is not known in advance: a queued resource finds out, and a deploy moves on to the next."
    return reply

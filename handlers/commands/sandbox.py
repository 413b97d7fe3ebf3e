"""/gemma sandbox [SCENARIO]: on the simulated project, list the field's failures or make one happen.

A deploy scenario is a teammate deploying a bad configuration by hand; its revision fails the way vLLM
fails, and Cloud Monitoring's alert arrives through the bot's webhook and opens an incident thread; an ACA scenario
(bot/sandbox/aca_scenarios.py) does the same to the Container Apps app and sends Azure Monitor's alert. The TPU,
preflight and canary scenarios send no alert: the bot's own commands show them. The list says which is which,
from each scenario's definition (its alert policy, or none). Only in the sandbox (`./dev console` without
credentials, `--sandbox`): a real project is never touched.
"""

from __future__ import annotations

from handlers.context import CommandContext
from handlers.registry import command
from handlers.reply import Reply
from skills.errors import InvalidInput, UserFacingError


@command(
    "sandbox",
    "Sandbox only: list failure scenarios (and which open an incident thread), or make one happen",
    lambda p: p.add_argument("scenario", metavar="SCENARIO", nargs="?", help="make this failure happen"),
    ack="Setting the scene…",
)
async def sandbox(ctx: CommandContext) -> Reply | None:
    sb = ctx.deps.sandbox
    if sb is None:
        raise UserFacingError(
            "Sandbox scenarios run only on the simulated project; this bot is connected to a real one.",
            "Try them with `./dev console --sandbox` or `gemma-sre serve --sandbox`.",
        )
    scenarios = sb.scenario_list()
    names = [s.name for s in scenarios]
    name = ctx.opts.scenario
    if not name:
        reply = Reply(title=f":test_tube: Sandbox: {sb.describe()}")
        alerting = [s for s in scenarios if s.alert]
        quiet = [s for s in scenarios if not s.alert]
        if alerting:
            reply.add(
                heading="Open an incident thread (Cloud Monitoring's or Azure Monitor's alert reaches the bot)",
                text="\n".join(f"• `{s.name}` — {s.summary} (finding: {s.kind})" for s in alerting),
            )
        if quiet:
            reply.add(
                heading="Open no incident (the bot's own replies show them: deploy, status, diagnose, the plan)",
                text="\n".join(f"• `{s.name}` — {s.summary} (finding: {s.kind})" for s in quiet),
            )
        reply.context = "`/gemma sandbox SCENARIO` makes it happen."
        return reply
    if name not in names:
        raise InvalidInput(f"Unknown scenario `{name}`.", "Scenarios: " + ", ".join(f"`{n}`" for n in names))
    what = next(s.summary for s in scenarios if s.name == name)
    ts = await ctx.responder.post(Reply(title=f":test_tube: Sandbox scenario `{name}`: {what}"))

    async def narrate(text: str) -> None:
        await ctx.responder.post(Reply(title=text), thread_ts=ts)

    ctx.deps.spawn(sb.fire(name, narrate))
    return None

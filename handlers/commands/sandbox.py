"""/gemma sandbox [SCENARIO]: on the simulated project, list the field's failures or make one happen.

A deploy scenario is a teammate deploying a bad configuration by hand; its revision fails the way vLLM
fails, and Cloud Monitoring's alert arrives through the bot's webhook and opens an incident thread. Only
in the sandbox (`./dev console` without credentials, `--sandbox`): a real project is never touched.
"""

from __future__ import annotations

from handlers.context import CommandContext
from handlers.registry import command
from handlers.reply import Reply
from skills.errors import InvalidInput, UserFacingError


@command(
    "sandbox",
    "Sandbox only: list failure scenarios, or make one happen (the alert opens an incident thread)",
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
    names = [name for name, _, _ in scenarios]
    name = ctx.opts.scenario
    if not name:
        reply = Reply(title=f":test_tube: Sandbox: {sb.describe()}")
        reply.add(text="\n".join(f"• `{n}` — {what} (finding: {kind})" for n, what, kind in scenarios))
        reply.context = "`/gemma sandbox SCENARIO` makes it happen; the alert opens an incident thread."
        return reply
    if name not in names:
        raise InvalidInput(f"Unknown scenario `{name}`.", "Scenarios: " + ", ".join(f"`{n}`" for n in names))
    what = next(w for n, w, _ in scenarios if n == name)
    ts = await ctx.responder.post(Reply(title=f":test_tube: Sandbox scenario `{name}`: {what}"))

    async def narrate(text: str) -> None:
        await ctx.responder.post(Reply(title=text), thread_ts=ts)

    ctx.deps.spawn(sb.fire(name, narrate))
    return None

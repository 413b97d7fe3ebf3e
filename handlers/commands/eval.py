"""/gemma eval [SCENARIO ...]: score the served model as the on-call agent, over the bundled scenarios.

The model is the one the bot talks to; the logs and the service it investigates are the sandbox's recorded
scenarios (the deps' `evals`), so nothing real is read or changed. Posts the scorecard table and the one-line
score (skills/diagnosis/agent_eval.py).
"""

from __future__ import annotations

from handlers.commands.agent import require_agent
from handlers.context import CommandContext
from handlers.registry import command
from handlers.reply import Reply
from skills.diagnosis.agent_eval import one_line, table
from skills.errors import InvalidInput, UserFacingError


@command(
    "eval",
    "Score the served model as the on-call agent over the example scenarios (cause, fix, valid calls, cost)",
    lambda p: p.add_argument("scenarios", metavar="SCENARIO", nargs="*", help="bundled scenarios (default: all)"),
    ack="Evaluating the model…",
)
async def evaluate(ctx: CommandContext) -> Reply | None:
    known = ctx.deps.evals.scenarios()
    names = [a for a in ctx.opts.scenarios if a]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InvalidInput(f"Unknown scenario {unknown[0]!r}.", f"Known scenarios: {', '.join(known)}.")
    # The model scored is the one the agent thinks with: in the sandbox, VLLM_BASE_URL's or none at all.
    endpoint = require_agent(ctx).endpoint if ctx.deps.sandbox is not None else ctx.deps.endpoint
    if endpoint is None:
        raise UserFacingError("The model endpoint is not configured.", "Set VLLM_BASE_URL or deploy the model first.")
    base = await endpoint.base_url()
    model = await endpoint.model_id()
    ts = await ctx.responder.post(
        Reply(title=f":test_tube: Evaluating {model} on {len(names) or len(known)} scenario(s)…")
    )

    async def progress(text: str) -> None:
        await ctx.responder.post(Reply(title=text), thread_ts=ts)

    scores = await ctx.deps.evals.run(base, model, names, progress)
    reply = Reply(title=f":bar_chart: {one_line(model, scores)}")
    reply.add(code=table(scores))
    await ctx.responder.post(reply, thread_ts=ts)
    return None

"""/gemma eval [SCENARIO ...]: score the served model as the on-call agent, over the bundled scenarios.

The model is the one the bot talks to; the logs and the service it investigates are the sandbox's recorded
scenarios (the deps' `evals`), so nothing real is read or changed. But every scenario sends real requests to
the live model (and can wake a scaled-to-zero GPU), so it goes like `/gemma bench`: a plan with Run/Cancel
buttons, run only by a deployer (handlers/authz.py), one evaluation at a time (a Redis lock), a double click
runs once. Posts the scorecard table and the one-line score (skills/diagnosis/agent_eval.py).
"""

from __future__ import annotations

import logging
import secrets

from handlers.arg_models import EvalArgs
from handlers.authz import require_author_or_deployer, require_deployer
from handlers.commands.agent import require_agent
from handlers.context import ActionContext, CommandContext
from handlers.declared_args import arguments
from handlers.registry import action, command
from handlers.reply import Button, Reply
from skills.diagnosis.agent_eval import one_line, table
from skills.diagnosis.eval_plans import EvalPlan, EvalPlans
from skills.errors import InvalidInput, UserFacingError
from skills.locks import LockHeld, ServiceLock

log = logging.getLogger(__name__)

CONFIRM = "gemma_eval_confirm"
DISMISS = "gemma_eval_cancel"


def _plans(ctx: CommandContext | ActionContext) -> EvalPlans:
    return EvalPlans(ctx.deps.redis, ctx.deps.settings.key, ctx.deps.settings.plan_ttl_s)


@command(
    "eval",
    "Score the served model as the on-call agent over the example scenarios (cause, fix, valid calls, cost)",
    arguments(EvalArgs),
    ack="Planning the evaluation…",
)
async def evaluate(ctx: CommandContext) -> Reply:
    known = ctx.deps.evals.scenarios()
    names = [a for a in ctx.opts.scenarios if a]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InvalidInput(f"Unknown scenario {unknown[0]!r}.", f"Known scenarios: {', '.join(known)}.")
    # The model scored is the one the agent thinks with: in the sandbox, VLLM_BASE_URL's or none at all.
    endpoint = require_agent(ctx).endpoint if ctx.deps.sandbox is not None else ctx.deps.endpoint
    if endpoint is None:
        raise UserFacingError("The model endpoint is not configured.", "Set VLLM_BASE_URL or deploy the model first.")
    plan_id = secrets.token_hex(6)
    await _plans(ctx).save(EvalPlan(id=plan_id, names=names, user_id=ctx.user_id, channel_id=ctx.channel_id))
    count = len(names) or len(known)
    reply = Reply(title=f":test_tube: Evaluation plan: {count} scenario(s) against the live model")
    reply.add(text=", ".join(f"`{n}`" for n in (names or known)))
    reply.buttons = [
        Button(label="Run evaluation", action_id=CONFIRM, value=plan_id, style="primary"),
        Button(label="Cancel", action_id=DISMISS, value=plan_id),
    ]
    reply.context = "Each scenario sends real requests to the model server (a scaled-to-zero GPU wakes up)."
    return reply


@action(DISMISS)
async def dismiss(ctx: ActionContext) -> Reply:
    plan = await _plans(ctx).get(ctx.value)
    if plan is not None:
        await require_author_or_deployer(ctx.deps, ctx.user_id, plan.user_id, "cancel this evaluation plan")
    await _plans(ctx).drop(ctx.value)
    return Reply(title="Evaluation cancelled; nothing was run.", ephemeral=True)


@action(CONFIRM)
async def confirm(ctx: ActionContext) -> Reply | None:
    d = ctx.deps
    await require_deployer(d, ctx.user_id, "run an evaluation (it sends requests to the live model)")
    plan = await _plans(ctx).take(ctx.value)  # single use: a double click runs once
    if plan is None:
        raise UserFacingError("This evaluation plan has expired or was already used.", "Run `/gemma eval` again.")
    names = plan.names
    lock = _plans(ctx).lock()
    try:
        await lock.acquire(ctx.user_id, f"evaluation {ctx.value}")
    except LockHeld as exc:
        raise UserFacingError(
            f"Another evaluation is running: {exc}.",
            "Wait for it to finish, then run `/gemma eval` again.",
            (exc.holder.user_id,) if exc.holder else (),
        ) from None
    d.spawn(_run(ctx, names, lock), kind="watch", user=ctx.user_id)  # minutes: counted apart
    return None


async def _run(ctx: ActionContext, names: list[str], lock: ServiceLock) -> None:
    d = ctx.deps
    try:
        # The model scored is the one the agent thinks with (in the sandbox: VLLM_BASE_URL's), as when planned.
        endpoint = d.agent.endpoint if d.sandbox is not None and d.agent is not None else d.endpoint
        base = await endpoint.base_url()
        model = await endpoint.model_id()
        count = len(names) or len(d.evals.scenarios())
        ts = await ctx.responder.post(Reply(title=f":test_tube: Evaluating {model} on {count} scenario(s)…"))

        async def progress(text: str) -> None:
            await ctx.responder.post(Reply(title=text), thread_ts=ts)

        scores = await d.evals.run(base, model, names, progress)
        reply = Reply(title=f":bar_chart: {one_line(model, scores)}")
        reply.add(code=table(scores))
        await ctx.responder.post(reply, thread_ts=ts)
    except UserFacingError as exc:
        await ctx.responder.post(Reply(title=f":warning: Evaluation failed: {exc.message}").add(text=exc.hint or None))
    except Exception:
        log.exception("evaluation failed")
        await ctx.responder.post(Reply(title=":warning: Evaluation failed unexpectedly; see the bot's logs."))
    finally:
        await lock.release()

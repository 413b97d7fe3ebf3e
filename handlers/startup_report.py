"""The deploy thread's "predicted vs actual" message, once a deploy turns ready (skills/capacity/startup_check.py)."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING

from handlers.reply import Reply
from skills.capacity.startup_check import StartupCheck, check_startup
from skills.targets.plan import Plan

if TYPE_CHECKING:
    from handlers.deps import HandlerDeps

log = logging.getLogger(__name__)


def render_startup(check: StartupCheck) -> Reply:
    reply = Reply(title=f":straight_ruler: Planner vs vLLM on `{check.service}` ({check.model} on {check.gpu})")
    if check.missing:
        reply.add(text=f"Nothing to compare: {check.missing}.")
    else:
        reply.add(heading="Predicted vs actual", text="\n".join(f"• {line}" for line in check.predicted))
        reply.add(heading="Cold start", text="\n".join(f"• {line}" for line in check.cold_start))
    reply.context = f"revision `{check.revision}` · image `{check.image}` · figures kept for `/gemma fit`"
    return reply


async def startup_report(
    deps: HandlerDeps, plan: Plan, revision: str, since: datetime, ready_after_s: float
) -> Reply | None:
    """The comparison for a deploy that turned ready; None when there is nothing to say or logs are off."""
    target = deps.targets.for_kind(plan.target)
    if plan.kind not in ("deploy", "redeploy") or plan.spec is None or target.logs is None:
        return None
    try:
        check = await check_startup(
            target.logs,
            deps.redis,
            deps.settings.key("startup"),
            plan.service,
            target.serving_of(plan.spec),
            revision,
            since,
            ready_after_s,
        )
    except Exception:  # a bonus after a successful deploy: never turn it into a failure
        log.warning("could not compare start-up figures for %s", plan.service, exc_info=True)
        return None
    return render_startup(check) if check is not None else None

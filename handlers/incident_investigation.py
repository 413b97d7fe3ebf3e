"""An incident's investigation as its thread shows it: each step skills/incidents/investigation.py yields
(findings for the alert window, what changed, the agent's plan with every action a plan button, or why a part
is missing) rendered here. What is investigated, and in what order, is decided there, not here."""

from __future__ import annotations

from collections.abc import AsyncIterator

from handlers.commands.logs import render_diagnosis
from handlers.deps import HandlerDeps
from handlers.incident_changes import render_changes
from handlers.remediation_render import render_remediation
from handlers.reply import Reply
from skills.diagnosis.remediation import RemediationProposal
from skills.incidents.investigation import (
    MODEL_AWAY,
    Changes,
    Findings,
    NoPlan,
    Plan,
    Step,
    Unfinished,
    investigate,
)
from skills.incidents.model import Alert, Incident
from skills.incidents.threads import Investigator
from skills.logs.redact import redact


def render_plan(plan: RemediationProposal, service: str) -> Reply:
    """The agent's plan in the alert thread: the one remediation renderer (every action a plan button)."""
    return render_remediation(plan, service)


def render_step(step: Step) -> Reply:
    if isinstance(step, Findings):
        span = f"{step.since:%H:%M}–{step.until:%H:%M} UTC"
        if not step.wired:
            return Reply(title=":warning: No log source is wired, so there are no findings for this alert.")
        if step.diagnosis is None:
            return Reply(title=f":warning: Could not read the logs for {span}: {redact(step.error)[:300]}")
        reply = render_diagnosis(step.service, step.diagnosis)
        reply.context = f"deterministic findings for the alert window {span}"
        return reply
    if isinstance(step, Changes):
        if step.changes is None:
            return Reply(title=f":warning: Could not read what changed: {redact(step.error)[:300]}")
        return render_changes(step.changes)
    if isinstance(step, Plan):
        return render_plan(step.plan, step.service)
    if isinstance(step, NoPlan):
        if step.reason == MODEL_AWAY:
            return Reply(
                title=":zzz: The model is not reachable right now (scaled to zero or down), so there is no "
                "plan from it yet; the findings above are deterministic."
            )
        return Reply(title=f":warning: The model was not asked for a plan: {redact(step.reason)[:400]}")
    assert isinstance(step, Unfinished)
    # Not worth a retry loop: say what is missing in the thread and finish the job.
    note = Reply(title=f":warning: Could not finish the investigation: {redact(step.message)[:300]}")
    if step.hint:
        note.add(text=step.hint)
    return note


def make_investigator(deps: HandlerDeps) -> Investigator:
    async def investigator(inc: Incident, alert: Alert) -> AsyncIterator[Reply]:
        async for step in investigate(deps, inc, alert):
            yield render_step(step)

    return investigator

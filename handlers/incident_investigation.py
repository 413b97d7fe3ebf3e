"""An incident's investigation as its thread shows it: deterministic findings for the alert window, then the
agent's plan (every action a plan button). The incident pipeline (skills/incidents/threads.py) runs it once per
incident and stores what it yields; this module calls the skills and renders."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from handlers.commands.logs import render_diagnosis
from handlers.deps import HandlerDeps
from handlers.incident_changes import changes_for, render_changes
from handlers.remediation_render import render_remediation
from handlers.reply import Reply
from skills.diagnosis.diagnose import diagnose_service
from skills.diagnosis.remediation import RemediationProposal
from skills.errors import UserFacingError
from skills.incidents.model import Alert, Incident, utcnow, window_for
from skills.incidents.threads import Investigator
from skills.logs.redact import redact
from skills.ports import LogQuery

log = logging.getLogger(__name__)


def render_plan(plan: RemediationProposal, service: str) -> Reply:
    """The agent's plan in the alert thread: the one remediation renderer (every action a plan button)."""
    return render_remediation(plan, service)


async def _model_reachable(deps: HandlerDeps) -> bool:
    """A quick /health probe: an alert thread should not sit behind a 10-minute cold start."""
    return not await _model_problem(deps)


async def _model_problem(deps: HandlerDeps) -> str:
    """Why the model cannot be asked now ('' when it can). Configuration problems (no credentials, no URL)
    are said as such: calling those 'scaled to zero' would send people to the wrong fix."""
    if deps.agent is None or deps.endpoint is None:
        return "no model agent is configured"
    try:
        base = await deps.endpoint.base_url()
    except UserFacingError as exc:
        return f"the model's address could not be found: {exc.message}" + (f" {exc.hint}" if exc.hint else "")
    except Exception as exc:  # noqa: BLE001 - reported in the thread
        log.warning("model address lookup failed: %s: %s", type(exc).__name__, str(exc)[:200])
        return f"the model's address could not be found ({type(exc).__name__})"
    try:
        probe = await deps.model_server.health(base)
    except Exception as exc:  # noqa: BLE001 - an unreachable model is reported as such
        log.warning("model health probe at %s failed: %s: %s", base, type(exc).__name__, str(exc)[:200])
        return _ZZZ
    return "" if probe.ok else _ZZZ


_ZZZ = "scaled to zero or down"


def make_investigator(deps: HandlerDeps) -> Investigator:
    s = deps.settings

    async def investigate(inc: Incident, alert: Alert) -> AsyncIterator[Reply]:
        try:
            async for reply in steps(inc, alert):
                yield reply
        except UserFacingError as exc:
            # Not worth a retry loop: say what is missing in the thread and finish the job.
            note = Reply(title=f":warning: Could not finish the investigation: {redact(exc.message)[:300]}")
            if exc.hint:
                note.add(text=exc.hint)
            yield note

    async def steps(inc: Incident, alert: Alert) -> AsyncIterator[Reply]:
        now = utcnow()
        since, until = window_for(alert, now)
        span = f"{since:%H:%M}–{until:%H:%M} UTC"
        logs = deps.targets.for_service(inc.service).logs  # the logs of the target serving it
        if logs is None:
            yield Reply(title=":warning: No log source is wired, so there are no findings for this alert.")
        else:
            # One failure, one diagnosis: a Cloud Monitoring alert names the revision it is about (its monitored
            # resource), and that revision's logs are its story; earlier failures of other revisions in the
            # window have incidents of their own. Alerts naming no Cloud Run revision (Alertmanager's
            # `instance` is a scrape target) read the whole service: rollouts between revisions may be the story,
            # and so does an alert whose revision shows no known failure in the window.
            query = LogQuery(
                service=inc.service,
                revision=(alert.revision or None) if alert.source == "gcp" else None,
                since=since,
                until=until,
                max_entries=s.log_max_entries,
                max_bytes=s.log_max_bytes,
            )
            try:
                d = await diagnose_service(logs, query, token_budget=s.log_token_budget)
                if query.revision and not d.findings:
                    wide = query.model_copy(update={"revision": None})
                    d = await diagnose_service(logs, wide, token_budget=s.log_token_budget)
            except UserFacingError as exc:
                yield Reply(title=f":warning: Could not read the logs for {span}: {redact(exc.message)[:300]}")
            else:
                reply = render_diagnosis(inc.service, d)
                reply.context = f"deterministic findings for the alert window {span}"
                yield reply
        try:  # what changed before it: the first question in any incident (handlers/incident_changes.py)
            yield render_changes(await changes_for(deps, inc, now, alert.revision))
        except UserFacingError as exc:
            yield Reply(title=f":warning: Could not read what changed: {redact(exc.message)[:300]}")
        problem = await _model_problem(deps) if deps.agent is not None else ""
        if deps.agent is not None and not problem:
            minutes = max(5, min(24 * 60, int((now - since).total_seconds() // 60) + 1))
            context = f"Alert {alert.name} ({alert.severity}) on {inc.service}: {alert.summary}"
            others = [m.name for k, m in inc.members.items() if k != alert.key]
            if others:  # one investigation for the whole incident, not one per alert
                context += f" (grouped with: {', '.join(others[:10])})"
            analysis = await deps.agent.analyze(since_minutes=minutes, context=redact(context), service=inc.service)
            yield render_plan(analysis.plan, inc.service)
        elif problem == _ZZZ:
            yield Reply(
                title=":zzz: The model is not reachable right now (scaled to zero or down), so there is no "
                "plan from it yet; the findings above are deterministic."
            )
        elif problem:
            yield Reply(title=f":warning: The model was not asked for a plan: {redact(problem)[:400]}")

    return investigate

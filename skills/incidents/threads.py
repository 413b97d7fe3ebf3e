"""Alert threads in Slack: the queue worker's job, and the incident's one investigation.

A queue worker calls `IncidentThreads.handle(entry_id, alert)` for each queued alert. The job only records:
the alert is folded into its incident in Redis (skills/incidents/store.py, an optimistic transaction, no lock)
and the incident is marked for the publisher (skills/incidents/publisher.py), which makes every Slack call
within Slack's rate limits, with an intent recorded before each post. An incident's first alert also runs
its investigation (findings, then the agent's plan) once per incident, however many alerts it groups; the
replies are stored and posted under the thread once it exists.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from handlers.commands.logs import render_diagnosis
from handlers.context import Responder
from skills.incidents.publisher import IncidentPublisher
from handlers.incident_render import event_line, header_reply, lines_reply
from handlers.remediation_render import render_remediation
from handlers.reply import Reply
from skills.clock import REAL_CLOCK, Clock
from skills.diagnosis.diagnose import diagnose_service
from skills.diagnosis.remediation import RemediationProposal
from skills.errors import UserFacingError
from skills.incidents.model import Alert, Change, Incident, utcnow, window_for
from skills.incidents.store import IncidentStore
from skills.logs.redact import redact
from skills.ports import LogQuery

if TYPE_CHECKING:
    from handlers.deps import HandlerDeps

log = logging.getLogger(__name__)

ResponderFor = Callable[[str], Responder]  # channel -> responder (bot.slack_app.ChannelResponder)
# (incident, alert) -> replies for the thread as each becomes ready (findings first, then the plan).
Investigator = Callable[[Incident, Alert], AsyncIterator[Reply]]

__all__ = ["IncidentThreads", "event_line", "header_reply", "incident_for_thread", "lines_reply"]


async def incident_for_thread(deps: HandlerDeps, channel: str, thread_ts: str) -> str:
    """The id of the incident whose thread this is ('' for any other thread)."""
    return await IncidentStore(deps.redis, deps.settings.key_prefix).thread_incident(channel, thread_ts)


class IncidentThreads:
    def __init__(
        self,
        deps: HandlerDeps,
        responder_for: ResponderFor,
        investigate: Investigator | None = None,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self.deps = deps
        self.s = deps.settings
        self.responder_for = responder_for
        self.investigate = investigate
        self.known = frozenset({self.s.vllm_service_name})
        self.store = IncidentStore(deps.redis, self.s.key_prefix, clock)
        self.publisher = IncidentPublisher(deps, responder_for, clock, on_dead=self.on_dead)

    async def load(self, inc_id: str | bytes) -> Incident | None:
        return await self.store.load(str(inc_id))

    # --- the job ---------------------------------------------------------------------------------------
    async def handle(self, entry_id: str, alert: Alert) -> None:
        inc, change = await self.store.record(
            entry_id,
            alert,
            utcnow(),
            channel=self.s.slack_alerts_channel,
            known=self.known,
            window_s=self.s.alert_group_window_s,
        )
        self.publisher.wake()
        if (
            change is Change.OPENED
            and inc.known_service
            and not inc.test
            and self.investigate is not None
            and await self.store.claim_investigation(inc.id, entry_id)
        ):
            await self._investigate(inc, alert)

    async def _investigate(self, inc: Incident, alert: Alert) -> None:
        """Findings, then the plan, each stored once (a retried job keeps what was stored) for the publisher."""
        assert self.investigate is not None
        i = 0
        try:
            async for reply in self.investigate(inc, alert):
                await self.store.add_reply(inc, i, reply.model_dump_json())
                self.publisher.wake()
                i += 1
        except UserFacingError as exc:
            # Not worth a retry loop: say what is missing in the thread and finish the job.
            note = Reply(title=f":warning: Could not finish the investigation: {redact(exc.message)[:300]}")
            if exc.hint:
                note.add(text=exc.hint)
            await self.store.add_reply(inc, i, note.model_dump_json())
            self.publisher.wake()

    async def on_dead(self, entry_id: str, alert: Alert | None, error: str, attempts: int) -> None:
        """A job that failed `attempts` times: say so in the alerts channel (its thread, if it has one)."""
        what = f"*{alert.name}* on `{alert.service or 'unknown'}`" if alert else f"queue entry {entry_id}"
        reply = Reply(title=f":skull: An alert could not be processed after {attempts} attempts: {what}")
        reply.add(text=f"Last error: `{redact(error)[:400]}`")
        reply.context = f"kept in the dead-letter stream {self.publisher.outbox.dead_letter_stream} (entry {entry_id})"
        slack = self.responder_for(self.s.slack_alerts_channel)
        inc_id = await self.store.find_id(alert) if alert else ""
        ts = (await self.store.pub(inc_id)).get("ts") if inc_id else None
        await slack.post(reply, thread_ts=ts or None)


# --- the investigation: deterministic findings for the alert window, then the agent's plan ---------------


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
        now = utcnow()
        since, until = window_for(alert, now)
        span = f"{since:%H:%M}–{until:%H:%M} UTC"
        if deps.logs is None:
            yield Reply(title=":warning: No log source is wired, so there are no findings for this alert.")
        else:
            # Service-wide (not just the alert's revision): rollouts between revisions are often the story.
            query = LogQuery(
                service=inc.service,
                since=since,
                until=until,
                max_entries=s.log_max_entries,
                max_bytes=s.log_max_bytes,
            )
            try:
                d = await diagnose_service(deps.logs, query, token_budget=s.log_token_budget)
            except UserFacingError as exc:
                yield Reply(title=f":warning: Could not read the logs for {span}: {redact(exc.message)[:300]}")
            else:
                reply = render_diagnosis(inc.service, d)
                reply.context = f"deterministic findings for the alert window {span}"
                yield reply
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

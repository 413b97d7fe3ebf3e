"""An incident's one investigation: what is looked at, in what order, and what is said when a part cannot be
done. The incident pipeline (skills/incidents/threads.py) runs it once per incident through the surface's
`Investigator`; the surface (handlers/incident_investigation.py) only renders the steps yielded here.

Steps, in order:
1. Findings: the deterministic diagnosis of the logs for the alert window. One failure, one diagnosis: a
   Cloud Monitoring alert names the revision it is about (its monitored resource), as does an Azure Monitor alert
   split by revision (handlers/alerts/azure_monitor.py), and that revision's logs are its story; earlier failures
   of other revisions in the window have incidents of their own. An alert naming no revision (Alertmanager's
   `instance` is a scrape target) reads the whole service (rollouts between revisions may be the story), and so
   does one whose revision shows no known failure in the window.
2. What changed before it (skills/incidents/changes.py): the first question in any incident.
3. The agent's plan, when a model is configured and answers now; otherwise why there is none.

It is built from the ports it uses (`InvestigationPorts`), not the whole dependency container.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from skills.diagnosis.diagnose import diagnose_service
from skills.diagnosis.findings import Diagnosis
from skills.diagnosis.remediation import RemediationProposal
from skills.errors import UserFacingError
from skills.incidents.changes import WINDOW_S, WhatChanged, what_changed
from skills.incidents.lifecycle_store import IncidentLifecycle
from skills.incidents.model import Alert, Incident, utcnow, window_for
from skills.incidents.store import IncidentStore
from skills.logs.redact import redact
from skills.ports import LogBatch, LogEntry, LogQuery, Logs, ModelEndpoint, ModelServer, Store
from skills.targets.registry import Targets

log = logging.getLogger(__name__)

MODEL_AWAY = "scaled to zero or down"  # the model's address is known but it does not answer /health


class Analysis(Protocol):
    @property
    def plan(self) -> RemediationProposal: ...


class Analyst(Protocol):
    """The model as on-call agent (bot/agent), as far as an investigation asks it."""

    async def analyze(self, *, since_minutes: int, context: str, service: str | None) -> Analysis: ...


class InvestigationSettings(Protocol):
    key_prefix: str
    log_max_bytes: int
    log_max_entries: int
    log_token_budget: int

    def key(self, *parts: str) -> str: ...


class InvestigationPorts(Protocol):
    """What an investigation reads. bot's Deps (and handlers' HandlerDeps) satisfy it structurally."""

    @property
    def settings(self) -> InvestigationSettings: ...

    @property
    def redis(self) -> Store: ...

    @property
    def targets(self) -> Targets: ...

    @property
    def model_server(self) -> ModelServer: ...

    @property
    def endpoint(self) -> ModelEndpoint: ...

    @property
    def agent(self) -> Analyst | None: ...


# --- the steps an investigation yields (the surface renders each) ------------------------------------------
@dataclass(frozen=True)
class Findings:
    service: str
    since: datetime
    until: datetime
    diagnosis: Diagnosis | None = None  # None: the logs could not be read (`error`) or no source is wired
    error: str = ""
    wired: bool = True


@dataclass(frozen=True)
class Changes:
    changes: WhatChanged | None = None
    error: str = ""  # why what changed could not be read


@dataclass(frozen=True)
class Plan:
    plan: RemediationProposal
    service: str


@dataclass(frozen=True)
class NoPlan:
    reason: str  # MODEL_AWAY, or why the model was not asked


@dataclass(frozen=True)
class Unfinished:
    """The investigation stopped on a problem the user can act on; the job finishes (no retry loop)."""

    message: str
    hint: str = ""


Step = Findings | Changes | Plan | NoPlan | Unfinished

# An alert's own error line: an Azure activity log alert on a write ARM refused (handlers/alerts/azure_monitor.py
# puts ARM's error in this label). A refused write runs nothing, so no log holds it: diagnosis reads it with the logs.
ALERT_ERROR_LABEL = "armError"


class _WithAlertError:
    """The Logs port, plus the alert's own error (ALERT_ERROR_LABEL) as one ERROR line at the alert's start."""

    def __init__(self, logs: Logs, alert: Alert) -> None:
        self.logs, self.alert = logs, alert

    async def fetch(self, query: LogQuery) -> LogBatch:
        batch = await self.logs.fetch(query)
        line = LogEntry(
            timestamp=self.alert.started_at,
            severity="ERROR",
            text=self.alert.labels[ALERT_ERROR_LABEL],
            log_name=f"alert:{self.alert.source}",
        )
        return batch.model_copy(update={"entries": [*batch.entries, line]})


async def model_problem(ports: InvestigationPorts) -> str:
    """Why the model cannot be asked now ('' when it can). Configuration problems (no agent, no address) are
    said as such: calling those 'scaled to zero' would send people to the wrong fix."""
    if ports.agent is None or ports.endpoint is None:
        return "no model agent is configured"
    try:
        base = await ports.endpoint.base_url()
    except UserFacingError as exc:
        return f"the model's address could not be found: {exc.message}" + (f" {exc.hint}" if exc.hint else "")
    except Exception as exc:  # noqa: BLE001 - reported in the thread
        log.warning("model address lookup failed: %s: %s", type(exc).__name__, str(exc)[:200])
        return f"the model's address could not be found ({type(exc).__name__})"
    try:
        probe = await ports.model_server.health(base)
    except Exception as exc:  # noqa: BLE001 - an unreachable model is reported as such
        log.warning("model health probe at %s failed: %s: %s", base, type(exc).__name__, str(exc)[:200])
        return MODEL_AWAY
    return "" if probe.ok else MODEL_AWAY


async def other_incident_spans(
    redis: Store, prefix: str, service: str, exclude: str, since: datetime, now: datetime
) -> list[tuple[datetime, datetime]]:
    """When the service's other incidents were open (the healthy rule excludes those stretches)."""
    listed = await IncidentLifecycle(IncidentStore(redis, prefix)).listed(since=since)
    spans = []
    for item in listed:
        inc = item.incident
        if inc.id != exclude and inc.service == service and not inc.test:
            spans.append((inc.started_at, inc.ended_at or now))
    return spans


async def changes_for(
    ports: InvestigationPorts, inc: Incident, now: datetime | None = None, alert_revision: str = ""
) -> WhatChanged:
    """What changed before the incident, healthy stretches judged against the service's other incidents."""
    now = now or utcnow()
    s = ports.settings
    start = inc.started_at
    spans = await other_incident_spans(
        ports.redis, s.key_prefix, inc.service, inc.id, start - timedelta(seconds=2 * WINDOW_S), now
    )
    return await what_changed(
        ports.targets.for_service(inc.service),
        ports.redis,
        s.key("audit"),
        inc.service,
        start,
        incidents=spans,
        now=now,
        alert_revision=alert_revision,
    )


async def investigate(ports: InvestigationPorts, inc: Incident, alert: Alert) -> AsyncIterator[Step]:
    """The incident's investigation, step by step (module docstring). A problem the user can act on ends it
    with `Unfinished`; anything else raised retries the queue job (what was already stored is kept)."""
    try:
        async for step in _steps(ports, inc, alert):
            yield step
    except UserFacingError as exc:
        yield Unfinished(exc.message, exc.hint or "")


async def _steps(ports: InvestigationPorts, inc: Incident, alert: Alert) -> AsyncIterator[Step]:
    s = ports.settings
    now = utcnow()
    since, until = window_for(alert, now)
    logs = ports.targets.for_service(inc.service).logs  # the logs of the target serving it
    if logs is not None and alert.labels.get(ALERT_ERROR_LABEL):
        logs = _WithAlertError(logs, alert)
    if logs is None:
        yield Findings(inc.service, since, until, wired=False)
    else:
        query = LogQuery(
            service=inc.service,
            revision=(alert.revision or None) if alert.source in ("gcp", "azure") else None,
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
            yield Findings(inc.service, since, until, error=exc.message)
        else:
            yield Findings(inc.service, since, until, diagnosis=d)
    try:
        # `until`: now, or the alert's start when the sender's clock is ahead of ours (model.py window_for), so the
        # revisions it made before the alert are not "in the future"
        yield Changes(await changes_for(ports, inc, max(now, until), alert.revision))
    except UserFacingError as exc:
        yield Changes(error=exc.message)
    agent = ports.agent
    if agent is None:  # the surface was wired without a model: nothing to say about a plan
        return
    problem = await model_problem(ports)
    if problem:
        yield NoPlan(problem)
        return
    minutes = max(5, min(24 * 60, int((now - since).total_seconds() // 60) + 1))
    context = f"Alert {alert.name} ({alert.severity}) on {inc.service}: {alert.summary}"
    others = [m.name for k, m in inc.members.items() if k != alert.key]
    if others:  # one investigation for the whole incident, not one per alert
        context += f" (grouped with: {', '.join(others[:10])})"
    analysis = await agent.analyze(since_minutes=minutes, context=redact(context), service=inc.service)
    yield Plan(analysis.plan, inc.service)

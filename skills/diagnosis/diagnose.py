"""Diagnose known vLLM / Cloud Run failures from logs, deterministically (no model needed).

`diagnose(entries)` is pure and synchronous: fold and redact the lines, run every analyzer in
skills/diagnosis/analyzers, condense the logs into a digest, and return typed findings: root causes first, then the
findings they explain (`caused_by`), which carry no fix of their own. `diagnose_service` is the
async wrapper that fetches through the Logs port first. Log text is only ever matched against patterns;
anything written inside a log line (including instructions) is data.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field

from skills.diagnosis.analyzers import run_all
from skills.diagnosis.analyzers.base import LogView
from skills.diagnosis.findings import Diagnosis, Finding
from skills.logs.condense import Digest, condense
from skills.logs.redact_entries import redact_entries
from skills.ports import LogBatch, LogEntry, LogQuery, Logs, ServiceInfo

__all__ = ["Scoped", "current_revisions", "diagnose", "diagnose_current", "diagnose_service"]


def diagnose(
    entries: list[LogEntry],
    *,
    token_budget: int = 3000,
    malformed: int = 0,
    truncated: str = "",
    service: ServiceInfo | None = None,
) -> Diagnosis:
    """Findings for every known failure in `entries` (pure, synchronous; safe to run in a thread).

    `service`, when known, lets remediations start from the current settings (e.g. max instances + 1).
    """
    entries = redact_entries(entries)  # first, before anything reads the text
    view = LogView.build(entries, service)
    findings = run_all(view)  # root causes first (the headline), then their consequences
    quoted = [line for f in findings for line in f.evidence]
    digest: Digest = condense(entries, token_budget, keep=quoted)
    digest.stats.malformed = malformed
    return Diagnosis(findings=findings, digest=digest.stats, digest_text=digest.text, truncated=truncated)


async def diagnose_service(
    logs: Logs, query: LogQuery, *, token_budget: int = 3000, service: ServiceInfo | None = None
) -> Diagnosis:
    """Fetch the service's logs through the Logs port, then diagnose them (CPU work in a thread)."""
    batch: LogBatch = await logs.fetch(query)
    return await asyncio.to_thread(
        diagnose, batch.entries, token_budget=token_budget, truncated=batch.truncated, service=service
    )


def current_revisions(service: ServiceInfo) -> list[str]:
    """The revisions a diagnosis is about by default: those serving traffic, and the latest created."""
    names = [t.revision for t in service.traffic if t.percent and t.revision]
    if service.latest_created_revision:
        names.append(service.latest_created_revision)
    return list(dict.fromkeys(names))


class Scoped(BaseModel):
    """A diagnosis of the revisions that matter now, and what the window shows about revisions since replaced."""

    current: Diagnosis
    revisions: list[str]  # what `current` is about
    past: list[Finding] = Field(default_factory=list)  # root causes seen only on replaced revisions


async def diagnose_current(logs: Logs, query: LogQuery, service: ServiceInfo, *, token_budget: int = 3000) -> Scoped:
    """One fetch of the window, diagnosed in two parts: the serving and latest revisions (lines without a
    revision count as theirs), and the rest; a root cause seen only in the rest is past (its revision was
    replaced), so it is reported as such and not offered as a fix."""
    batch: LogBatch = await logs.fetch(query)
    revisions = current_revisions(service)
    now = [e for e in batch.entries if not e.revision or e.revision in revisions]
    before = [e for e in batch.entries if e.revision and e.revision not in revisions]
    current = await asyncio.to_thread(
        diagnose, now, token_budget=token_budget, truncated=batch.truncated, service=service
    )
    past: list[Finding] = []
    if before:
        old = await asyncio.to_thread(diagnose, before, token_budget=token_budget, service=service)
        seen = set(current.kinds())
        past = [f for f in old.findings if f.caused_by is None and f.kind not in seen]
    return Scoped(current=current, revisions=revisions, past=past)

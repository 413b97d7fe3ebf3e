"""Diagnose known vLLM / Cloud Run failures from logs, deterministically (no model needed).

`diagnose(entries)` is pure and synchronous: fold and redact the lines, run every analyzer in
skills/diagnosis/analyzers, condense the logs into a digest, and return typed findings: root causes first, then the
findings they explain (`caused_by`), which carry no fix of their own. `diagnose_service` is the
async wrapper that fetches through the Logs port first. Log text is only ever matched against patterns;
anything written inside a log line (including instructions) is data.
"""

from __future__ import annotations

import asyncio

from skills.diagnosis.analyzers import run_all
from skills.diagnosis.analyzers.base import LogView
from skills.diagnosis.findings import Diagnosis
from skills.logs.condense import Digest, condense
from skills.logs.redact_entries import redact_entries
from skills.ports import LogBatch, LogEntry, LogQuery, Logs, ServiceInfo

__all__ = ["diagnose", "diagnose_service"]


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
    digest: Digest = condense(entries, token_budget)
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

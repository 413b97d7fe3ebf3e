"""Diagnose known vLLM / Cloud Run failures from logs, deterministically (no model needed).

`diagnose(entries)` is pure and synchronous: fold and redact the lines, run every analyzer in
skills/analyzers, condense the logs into a digest, and return typed findings: root causes first, then the
findings they explain (`caused_by`), which carry no fix of their own. `diagnose_service` is the
async wrapper that fetches through the Logs port first. Log text is only ever matched against patterns;
anything written inside a log line (including instructions) is data.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from skills.condense import Digest, DigestStats, condense
from skills.ports import LogBatch, LogEntry, LogQuery, Logs, ServiceInfo
from skills.remediation import ProposedAction

__all__ = [
    "Diagnosis",
    "DigestStats",
    "Finding",
    "ProposedAction",
    "Remediation",
    "diagnose",
    "diagnose_service",
]

SEVERITY_RANK = {"critical": 3, "error": 2, "warning": 1, "info": 0}


class Remediation(BaseModel):
    summary: str
    steps: list[str] = Field(default_factory=list)
    # Only proposals: each becomes a plan button (plan -> confirm), never a write.
    actions: list[ProposedAction] = Field(default_factory=list)

    def __str__(self) -> str:
        return " ".join([self.summary, *self.steps]).strip()


class Finding(BaseModel):
    kind: str  # one of skills.analyzers.KINDS
    title: str
    severity: str = "error"  # critical | error | warning
    evidence: list[str] = Field(default_factory=list)  # the matching log lines, redacted
    remediation: Remediation
    first_seen: str = ""  # ISO timestamp of the first evidence line, when known
    count: int = 0  # matching lines
    # The kind of the finding that explains this one (a consequence carries no fix of its own); None: a root cause.
    caused_by: str | None = None


class Diagnosis(BaseModel):
    findings: list[Finding] = Field(default_factory=list)
    digest: DigestStats
    digest_text: str = ""
    truncated: str = ""  # from the fetch: why it stopped early, if it did

    def kinds(self) -> list[str]:
        return [f.kind for f in self.findings]

    def root_kinds(self) -> list[str]:
        """Kinds of the root causes (the headline findings), without their consequences."""
        return [f.kind for f in self.findings if f.caused_by is None]

    def to_report(self) -> dict[str, Any]:
        """The JSON shape of `gemma-sre diagnose --format json`."""
        return {
            "findings": [
                {
                    "kind": f.kind,
                    "title": f.title,
                    "severity": f.severity,
                    "caused_by": f.caused_by,
                    "evidence": f.evidence,
                    "remediation": {
                        "summary": f.remediation.summary,
                        "steps": f.remediation.steps,
                        "actions": [{"action": a.action, "params": a.params} for a in f.remediation.actions],
                    },
                }
                for f in self.findings
            ],
            "digest": self.digest.model_dump(),
        }


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
    from skills.analyzers import run_all
    from skills.analyzers.base import LogView
    from skills.redact_entries import redact_entries

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
    import asyncio

    batch: LogBatch = await logs.fetch(query)
    return await asyncio.to_thread(
        diagnose, batch.entries, token_budget=token_budget, truncated=batch.truncated, service=service
    )

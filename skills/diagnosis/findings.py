"""What a diagnosis finds: findings (root causes first, consequences pointing at their cause) and their fixes.

The analyzers (skills/diagnosis/analyzers) produce these; skills/diagnosis/diagnose.py runs them. Kept apart so
the analyzers import the types without importing the runner that imports them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from skills.diagnosis.remediation import ProposedAction
from skills.logs.condense import DigestStats

__all__ = ["SEVERITY_RANK", "Diagnosis", "Finding", "ProposedAction", "Remediation"]

SEVERITY_RANK = {"critical": 3, "error": 2, "warning": 1, "info": 0}


class Remediation(BaseModel):
    summary: str
    steps: list[str] = Field(default_factory=list)
    # Only proposals: each becomes a plan button (plan -> confirm), never a write.
    actions: list[ProposedAction] = Field(default_factory=list)

    def __str__(self) -> str:
        return " ".join([self.summary, *self.steps]).strip()


class Finding(BaseModel):
    kind: str  # one of skills.diagnosis.analyzers.KINDS
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

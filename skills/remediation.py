"""The remediation plan: what went wrong, the evidence, and the fixes a human may approve.

A skill-level type so the agent, the alert worker and the handlers share it. Proposed actions are only
proposals: each becomes a plan button that opens the normal plan -> confirm flow, never a write.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

# Actions the bot may propose from model output, with the parameters each accepts. "destroy" is absent on
# purpose: the bot never proposes destroying the service from model output (a human runs it explicitly).
PROPOSABLE: dict[str, frozenset[str]] = {
    "scale": frozenset({"min_instances", "max_instances"}),
    "redeploy": frozenset(
        {
            "max_model_len",
            "gpu_memory_utilization",
            "kv_cache_dtype",
            "enforce_eager",
            "memory",
            "cpu",
            "startup_failure_threshold",
            "startup_period_s",
            "max_num_seqs",
            "concurrency",
            "cpu_offload_gb",
        }
    ),
    "rollback": frozenset({"revision"}),
    "deploy": frozenset({"profile"}),
}


class Evidence(BaseModel):
    text: str
    source: str = ""  # where it came from: "logs", "finding:kv_cache_insufficient", "status", "metrics", ...


class ProposedAction(BaseModel):
    action: str
    params: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""


class RemediationPlan(BaseModel):
    summary: str
    likely_root_cause: str = ""
    evidence: list[Evidence] = Field(default_factory=list)
    steps: list[str] = Field(default_factory=list)
    proposed_actions: list[ProposedAction] = Field(default_factory=list)
    confidence: Literal["low", "medium", "high"] = "low"
    # Set when the plan did not come from the model (model down, or its answer never validated).
    fallback_note: str = ""

    @field_validator("confidence", mode="before")
    @classmethod
    def _confidence(cls, v: Any) -> Any:
        # Small models write 0.8 or "High"; map those instead of failing the whole plan.
        if isinstance(v, int | float):
            return "high" if v >= 0.75 else ("medium" if v >= 0.4 else "low")
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("steps", mode="before")
    @classmethod
    def _steps(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("evidence", mode="before")
    @classmethod
    def _evidence(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [{"text": e} if isinstance(e, str) else e for e in v]
        return v


def sanitize_action(action: ProposedAction) -> tuple[ProposedAction | None, str]:
    """Keep a proposal only if it is a known, proposable action with known params; say why when dropped."""
    name = action.action.strip().lower()
    if name not in PROPOSABLE:
        if name == "destroy":
            return None, "destroying the service is never proposed by the assistant"
        return None, f"unknown action {action.action!r}"
    allowed = PROPOSABLE[name]
    params = {k: v for k, v in action.params.items() if k in allowed and v is not None}
    dropped = sorted(set(action.params) - allowed)
    note = f"ignored unknown parameters {', '.join(dropped)}" if dropped else ""
    return ProposedAction(action=name, params=params, reason=action.reason[:300]), note


def merge_actions(*groups: list[ProposedAction]) -> list[ProposedAction]:
    """Sanitized and de-duplicated (same action + params), first occurrence wins."""
    seen: set[str] = set()
    out: list[ProposedAction] = []
    for group in groups:
        for a in group:
            clean, _ = sanitize_action(a)
            if clean is None:
                continue
            key = clean.model_dump_json(include={"action", "params"})
            if key not in seen:
                seen.add(key)
                out.append(clean)
    return out


def plan_from_findings(findings: list[Any], note: str) -> RemediationPlan:
    """The deterministic plan: built from diagnosis findings (objects with kind/title/severity/evidence/
    remediation) when the model cannot give one. `note` says why the model's plan is missing."""
    if not findings:
        return RemediationPlan(
            summary="No known failure pattern was found in the logs.",
            steps=["Check `/gemma status` and recent revisions; widen the log window with `--since`."],
            fallback_note=note,
        )
    evidence = []
    steps = []
    for f in findings:
        kind = str(getattr(f, "kind", "finding"))
        for line in _as_lines(getattr(f, "evidence", []))[:2]:
            evidence.append(Evidence(text=line, source=f"finding:{kind}"))
        remediation = getattr(f, "remediation", "")
        for line in _as_lines(remediation):
            steps.append(line)
    first = findings[0]
    return RemediationPlan(
        summary="; ".join(str(getattr(f, "title", "")) for f in findings if getattr(f, "title", "")),
        likely_root_cause=str(getattr(first, "title", "")),
        evidence=evidence,
        steps=steps,
        confidence="medium",
        fallback_note=note,
    )


def _as_lines(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list | tuple):
        return [str(v) for v in value if str(v).strip()]
    return [str(value)]

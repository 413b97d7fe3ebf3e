"""The remediation plan: what went wrong, the evidence, and the fixes a human may approve.

A skill-level type so the agent, the alert worker and the handlers share it. Proposed actions are only
proposals: each becomes a plan button that opens the normal plan -> confirm flow, never a write.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from skills.actions.params import PROPOSABLE as PROPOSABLE_PARAMS
from skills.errors import explain_error
from skills.text import shorten

# Actions the bot may propose from model output: derived from the one params model per action
# (skills/actions/params.py), which the agent's tool schemas and the plan builder use too.
PROPOSABLE: dict[str, type[BaseModel]] = PROPOSABLE_PARAMS


class Evidence(BaseModel):
    text: str
    source: str = ""  # where it came from: "logs", "finding:kv_cache_insufficient", "status", "metrics", ...


class ProposedAction(BaseModel):
    action: str
    params: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""


class RemediationProposal(BaseModel):
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
    """Keep a proposal only if it is a proposable action whose params validate; say why when dropped."""
    name = action.action.strip().lower()
    model = PROPOSABLE.get(name)
    if model is None:
        if name == "destroy":
            return None, "destroying the service is never proposed by the assistant"
        return None, f"unknown action {action.action!r}"
    # The proposal is about the service under investigation: the model never picks another one.
    fields = set(model.model_fields) - {"service"}
    known = {k: v for k, v in action.params.items() if k in fields}
    try:
        params = model.model_validate(known).model_dump(exclude_none=True)
    except ValidationError as exc:
        return None, f"invalid parameters for {name}: {_short(exc)}"
    if not params and name in ("scale", "redeploy"):
        return None, f"{name} proposed without any parameter"
    dropped = sorted(set(action.params) - fields)
    note = f"ignored unknown parameters {', '.join(dropped)}" if dropped else ""
    return ProposedAction(action=name, params=params, reason=shorten(action.reason, 300)), note


def _short(exc: ValidationError) -> str:
    return "; ".join(explain_error(e, flag_style=False) for e in exc.errors()[:5])


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


def plan_from_findings(findings: list[Any], note: str, *, logs_error: str = "") -> RemediationProposal:
    """The deterministic plan, from diagnosis findings (kind, title, evidence, remediation{summary, steps,
    actions}), for when the model cannot give one. `note` says why the model's plan is missing; `logs_error`
    why the logs could not be read (then "no known failure" would be untrue: nothing was looked at)."""
    if not findings and logs_error:
        return RemediationProposal(
            summary=f"The logs could not be read, so nothing was diagnosed: {logs_error}",
            steps=[
                "Fix the log access above (project, credentials, roles/logging.viewer), then run `/gemma analyze` "
                "again; `/gemma diagnose` shows the log reader's own error."
            ],
            fallback_note=note,
        )
    if not findings:
        return RemediationProposal(
            summary="No known failure pattern was found in the logs.",
            steps=["Check `/gemma status` and recent revisions; widen the log window with `--since`."],
            fallback_note=note,
        )
    evidence: list[Evidence] = []
    steps: list[str] = []
    actions: list[ProposedAction] = []
    for f in findings:
        kind = str(getattr(f, "kind", "finding"))
        evidence += [Evidence(text=line, source=f"finding:{kind}") for line in _as_lines(f.evidence)[:2]]
        if getattr(f, "caused_by", None):
            continue  # a consequence: its cause's fix is the fix
        rem = getattr(f, "remediation", None)
        if isinstance(rem, str):
            steps += _as_lines(rem)
        elif rem is not None:
            steps += _as_lines(getattr(rem, "steps", [])) or _as_lines(getattr(rem, "summary", ""))
            actions += list(getattr(rem, "actions", []))
    first = findings[0]
    return RemediationProposal(
        summary="; ".join(str(f.title) for f in findings if getattr(f, "title", "")),
        likely_root_cause=str(getattr(first, "title", "")),
        evidence=evidence,
        steps=steps,
        proposed_actions=merge_actions(actions),
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

"""The remediation plan: what went wrong, the evidence, and the fixes a human may approve.

A skill-level type so the agent, the alert worker and the handlers share it. Proposed actions are only
proposals: each becomes a plan button that opens the normal plan -> confirm flow, never a write.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, ValidationError, field_validator


class ScaleParams(BaseModel):
    min_instances: int | None = Field(default=None, ge=0, le=100)
    max_instances: int | None = Field(default=None, ge=1, le=100)


def _only_true(v: bool) -> bool:
    if v is not True:
        raise ValueError("only true is meaningful here (leave it out to keep the running setting)")
    return v


OnlyTrue = Annotated[bool, AfterValidator(_only_true)]
DType = Literal["auto", "half", "bfloat16"]  # vLLM --dtype; "half" on GPUs without bf16 (T4)
ModelSource = Literal["hub", "bucket"]
# A catalog model name or alias (checked against the catalog): never a free-form path or repo id.
_MODEL_NAME = r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$"


class RedeployFixes(BaseModel):
    """Fixes a redeploy may apply besides the numeric settings. Each one maps to fixed flags, env vars or
    mount options chosen by the bot (the secret and bucket names come from settings, the model from the
    catalog), so no value here can put arbitrary text into the container's args, env or volumes."""

    dtype: DType | None = Field(default=None, description="vLLM --dtype: half where bf16 is unsupported (T4)")
    enable_tool_calling: bool | None = Field(
        default=None,
        description="--enable-auto-tool-choice --tool-call-parser gemma4 --reasoning-parser gemma4 (false removes)",
    )
    fix_fuse_mount_options: OnlyTrue | None = Field(
        default=None, description="mount the GCS FUSE volume as uid=1001;gid=1001 (the vLLM image's user)"
    )
    hf_token_from_secret: OnlyTrue | None = Field(
        default=None, description="inject HF_TOKEN from the configured Secret Manager secret"
    )
    model_source: ModelSource | None = Field(
        default=None,
        description="hub: pull from Hugging Face (token from Secret Manager, HF_HUB_OFFLINE unset); "
        "bucket: weights on the GCS FUSE mount with HF_HUB_OFFLINE=1",
    )
    model: str | None = Field(
        default=None, pattern=_MODEL_NAME, description="a catalog model name; sets --model to its path or Hub id"
    )

    @field_validator("model")
    @classmethod
    def _catalog_model(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from .catalog import load_catalog
        from .errors import UserFacingError

        try:
            return load_catalog().model(v).name
        except UserFacingError as exc:
            raise ValueError(f"{exc.message} {exc.hint}".strip()) from None


class RedeployParams(RedeployFixes):
    """vLLM / Cloud Run settings a redeploy may change (unset: keep the running value)."""

    max_model_len: int | None = Field(default=None, ge=256, le=1_048_576)
    gpu_memory_utilization: float | None = Field(default=None, gt=0.3, le=0.98)
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16"] | None = None
    enforce_eager: bool | None = None
    max_num_seqs: int | None = Field(default=None, ge=1, le=1024)
    cpu_offload_gb: float | None = Field(default=None, ge=0, le=256)
    memory: str | None = Field(default=None, pattern=r"^\d+(Gi|Mi)$")
    cpu: str | None = Field(default=None, pattern=r"^\d+$")
    concurrency: int | None = Field(default=None, ge=1, le=1000)
    startup_failure_threshold: int | None = Field(default=None, ge=1, le=100)
    startup_period_s: int | None = Field(default=None, ge=1, le=240)


class RollbackParams(BaseModel):
    revision: str | None = Field(default=None, description="revision for all traffic (default: previous)")


class DeployParams(BaseModel):
    profile: str = Field(description="a named deployment profile, e.g. gemma4-12b-l4")


# Actions the bot may propose from model output, and their parameters. "destroy" is absent on purpose: the
# bot never proposes destroying the service from model output (a human runs that explicitly).
PROPOSABLE: dict[str, type[BaseModel]] = {
    "scale": ScaleParams,
    "redeploy": RedeployParams,
    "rollback": RollbackParams,
    "deploy": DeployParams,
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
    """Keep a proposal only if it is a proposable action whose params validate; say why when dropped."""
    name = action.action.strip().lower()
    model = PROPOSABLE.get(name)
    if model is None:
        if name == "destroy":
            return None, "destroying the service is never proposed by the assistant"
        return None, f"unknown action {action.action!r}"
    known = {k: v for k, v in action.params.items() if k in model.model_fields}
    try:
        params = model.model_validate(known).model_dump(exclude_none=True)
    except ValidationError as exc:
        return None, f"invalid parameters for {name}: {_short(exc)}"
    if not params and name in ("scale", "redeploy"):
        return None, f"{name} proposed without any parameter"
    dropped = sorted(set(action.params) - set(model.model_fields))
    note = f"ignored unknown parameters {', '.join(dropped)}" if dropped else ""
    return ProposedAction(action=name, params=params, reason=action.reason[:300]), note


def _short(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])


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


def plan_from_findings(findings: list[Any], note: str, *, logs_error: str = "") -> RemediationPlan:
    """The deterministic plan, from diagnosis findings (kind, title, evidence, remediation{summary, steps,
    actions}), for when the model cannot give one. `note` says why the model's plan is missing; `logs_error`
    why the logs could not be read (then "no known failure" would be untrue: nothing was looked at)."""
    if not findings and logs_error:
        return RemediationPlan(
            summary=f"The logs could not be read, so nothing was diagnosed: {logs_error}",
            steps=[
                "Fix the log access above (project, credentials, roles/logging.viewer), then run `/gemma analyze` "
                "again; `/gemma diagnose` shows the log reader's own error."
            ],
            fallback_note=note,
        )
    if not findings:
        return RemediationPlan(
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
    return RemediationPlan(
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

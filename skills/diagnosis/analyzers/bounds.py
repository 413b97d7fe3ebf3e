"""Fixes bounded by reality, checked before they become plan buttons.

A proposal survives only if it can work:
- `--max-model-len` never above the model's context (the catalog's, or the one vLLM derived and logged);
- a memory size never at or below what the log shows was used;
- a vLLM configuration the capacity planner (skills/capacity/fit.py) says does not fit on the service's GPU is dropped,
  with the planner's reason as a step. Unknown model or GPU: the planner cannot judge, the proposal stays.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from skills.capacity.catalog import ModelProfile, load_catalog
from skills.capacity.fit import FitRequest, check_fit
from skills.diagnosis.analyzers.base import LogView
from skills.errors import InvalidInput, UserFacingError
from skills.serving.sizes import gib
from skills.serving.vllm_flags import VllmFlags

if TYPE_CHECKING:
    from skills.diagnosis.findings import Finding

_DERIVED = re.compile(r"derived max_model_len \([^)]*?(\d{3,})")
_USED = re.compile(r"exceeded with ([\d.]+) ?(M|Mi|MiB|G|Gi|GiB)B? used", re.IGNORECASE)
_FIT_KEYS = ("max_model_len", "gpu_memory_utilization", "kv_cache_dtype", "enforce_eager", "max_num_seqs", "dtype")
_FIT_DTYPE = {"auto": "auto", "bfloat16": "bfloat16", "torch.bfloat16": "bfloat16", "half": "half", "float16": "half"}
_FIT_KV = {"auto": "auto", "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "bfloat16": "bf16"}


def mib(num: str, unit: str) -> float:
    """A size as a log line prints it (`32768 MiB`, `31.9 GiB`) in MiB."""
    return float(num) * (1024 if unit.upper().startswith("G") else 1)


def service_mib(memory: str) -> float | None:
    """A service's (or a proposed) memory limit in MiB, read by the one reader of sizes; None if it is none."""
    try:
        return gib(memory) * 1024
    except InvalidInput:
        return None


def catalog_model(view: LogView, at: int | None = None) -> ModelProfile | None:
    """The catalog model in force at line `at` (default: the end): --model from the log's config, else the
    service's args."""
    names: list[str] = []
    model = view.config_at(len(view.lines) if at is None else at).get("model")
    if model:
        names.append(str(model))
    svc = view.service
    flags = VllmFlags.parse_or_none(svc.args) if svc else None
    if flags and flags.model_path:
        names.append(flags.model_path)
    catalog = load_catalog()
    for name in names:
        for part in [name, *name.strip("/").split("/")]:
            if len(part) < 5:
                continue
            try:
                return catalog.model(part)
            except UserFacingError:
                continue
    return None


def context_limit(view: LogView) -> int | None:
    """The model's context length: what vLLM derived from config.json (logged), else the catalog's."""
    for line in view.lines:
        if d := _DERIVED.search(line.text):
            return int(d.group(1))
    model = catalog_model(view)
    return model.max_context if model else None


def _planner_verdict(view: LogView, at: int, params: dict[str, object]) -> str | None:
    """None when the planner sees no problem (or cannot judge); else why the configuration (the one in force
    at line `at`, with `params` applied) does not fit."""
    svc = view.service
    model = catalog_model(view, at)
    if model is None or svc is None or not svc.gpu_type or not any(k in params for k in _FIT_KEYS):
        return None
    cfg = {**view.config_at(at), **params}
    req: dict[str, object] = {"model": model.name, "gpu": svc.gpu_type, "gpu_count": max(svc.gpu_count, 1)}
    for key in _FIT_KEYS:
        value = cfg.get(key)
        if key == "kv_cache_dtype":
            value = _FIT_KV.get(str(value))
        elif key == "dtype":
            value = _FIT_DTYPE.get(str(value))
        if value not in (None, ""):
            req[key] = value
    try:
        report = check_fit(FitRequest.model_validate(req))
    except (UserFacingError, ValueError):
        return None
    if report.ok:
        return None
    return report.notes[0] if report.notes else "the planner says this configuration does not fit"


def bound(view: LogView, finding: Finding) -> None:
    """Drop the proposals of `finding` that cannot work, saying why in its steps."""
    limit = context_limit(view)
    at = next((line.idx for line in view.lines if line.evidence() in finding.evidence), len(view.lines))
    used = max((mib(m.group(1), m.group(2)) for line in view.lines if (m := _USED.search(line.text))), default=0.0)
    kept = []
    for action in finding.remediation.actions:
        p = action.params
        mml = p.get("max_model_len")
        if isinstance(mml, int) and limit and mml > limit:
            current = view.config_at(at).get("max_model_len")
            if len(p) == 1 or (isinstance(current, int) and current >= limit):
                finding.remediation.steps.append(
                    f"Not proposed: --max-model-len {mml} is above the model's context length ({limit})."
                )
                continue
            p["max_model_len"] = limit
        if used and (mem := service_mib(str(p.get("memory", "")))) is not None and mem <= used:
            continue
        if action.action == "redeploy" and (why := _planner_verdict(view, at, p)):
            finding.remediation.steps.append(f"Not proposed ({', '.join(f'{k}={v}' for k, v in p.items())}): {why}")
            continue
        kept.append(action)
    finding.remediation.actions = kept

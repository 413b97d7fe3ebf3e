"""What the Cloud Run plan builders share: the capacity check applied to a plan, Cloud Run's GPU and CPU floors,
and reading the running service (its v2 JSON and the serving revision's template).

The target-independent steps (parameter validation, the planner's figures) are skills/targets/plan_inputs.py,
re-exported here for the builders beside this module."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from skills.capacity.fit import FitReport, load_catalog
from skills.errors import InvalidInput, NotFound
from skills.ports import Runtime
from skills.serving.sizes import gib
from skills.serving.vllm_flags import VllmFlags
from skills.targets.cloud_run.render import (
    MAX_THRESHOLD_WINDOW_S,
    PROBE_MARGIN,
)
from skills.targets.plan import Plan
from skills.targets.plan_inputs import ActionKind as ActionKind
from skills.targets.plan_inputs import as_text as as_text
from skills.targets.plan_inputs import fit_for as fit_for
from skills.targets.plan_inputs import fit_lines as fit_lines
from skills.targets.plan_inputs import validate_params as validate_params

# After the probe budget runs out Cloud Run reports the failure; wait a little longer than that.
WAIT_MARGIN_S = 300


def check_gpu(name: str) -> str:
    gpu = load_catalog().gpu(name)
    if not gpu.available_on_cloud_run:
        on_run = [g.name for g in load_catalog().gpus.values() if g.available_on_cloud_run]
        raise InvalidInput(f"{gpu.display} is not offered on Cloud Run.", f"Use one of: {', '.join(on_run)}.")
    return gpu.name


def one_gpu(o: dict[str, Any]) -> None:
    if o.get("gpu_count", 1) > 1:
        raise InvalidInput(
            f"Cloud Run attaches one GPU per instance, so {o['gpu_count']} GPUs cannot be deployed there.",
            "Use gpu_count=1 with a model that fits one GPU (or the RTX PRO 6000's 96 GB).",
        )


def apply_fit(plan: Plan, report: FitReport) -> None:
    plan.verdict = report.verdict
    plan.fit_lines = fit_lines(report)
    plan.fit_changes = [as_text(c) for c in report.changes]
    plan.notes += [as_text(n) for n in report.notes]
    # A Cloud Run deploy is offered Cloud Run configurations only (another platform's GPU is no alternative here).
    catalog = load_catalog()
    on_run = [
        a
        for a, r in zip(report.alternatives, report.alternative_requests, strict=False)
        if catalog.gpu(r.gpu).available_on_cloud_run
    ]
    if report.verdict == "does_not_fit" and on_run:
        plan.notes.append("Configurations that fit: " + "; ".join(as_text(a) for a in on_run[:4]))
    plan.notes += [f":warning: {as_text(w)}" for w in report.warnings]
    plan.cold_start_s = report.cold_start_s


def probe_note(plan: Plan, cold_start_s: float | None, budget_s: int) -> None:
    if cold_start_s and cold_start_s * PROBE_MARGIN > budget_s:
        plan.notes.append(
            f"The startup probe allows {budget_s} s but the cold start is estimated at ~{cold_start_s:.0f} s "
            f"(Cloud Run caps the probe at 240 s + {MAX_THRESHOLD_WINDOW_S} s): the revision may be killed "
            "while "
            "loading. Prefer a smaller/QAT model or a faster weight source."
        )


def cpu_floor(memory: str) -> int:
    table = load_catalog().planner.cloud_run.cpu_for_memory
    g = gib(memory)
    fits = [c for c, max_mem in sorted(table.items()) if max_mem >= g]
    return fits[0] if fits else max(table)


async def current_spec(runtime: Runtime, service: str) -> dict[str, Any]:
    spec = await runtime.get_service_spec(service)
    if spec is None:
        raise NotFound(f"Service `{service}` does not exist.", "Deploy one first: `/gemma deploy PROFILE`.")
    return spec


def container_flags(container: dict[str, Any]) -> VllmFlags:
    """The vLLM flags a container runs with (InvalidInput naming the flag if one cannot be read)."""
    return VllmFlags.parse([str(a) for a in container.get("args") or []])


LATEST_TRAFFIC = [{"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST", "percent": 100}]


@dataclass(frozen=True)
class Base:
    """What a write builds on: the running service's spec, or it with the serving revision's configuration."""

    spec: dict[str, Any]
    serving: str = ""  # the revision holding all traffic ('' when traffic is split or nothing serves)
    note: str = ""  # said in the plan when the spec is not the service's current template
    latest: str = ""  # the latest created revision (whose configuration the template is)
    latest_state: str = ""


async def serving_base(runtime: Runtime, service: str, current: dict[str, Any]) -> Base:
    """A write builds on what serves. The service's template is the latest *created* revision's; after a
    failed deploy or a rollback that is not the revision taking traffic, and a change built on it would carry
    the failed (or rolled-back) configuration along. Then the plan starts from the serving revision's own
    configuration (Cloud Run's Revision carries its template's fields), and says so."""
    info = await runtime.get_service(service)
    # 100% to LATEST serves the latest *ready* revision: after a failed one, not the template's
    serving = next(
        (t.revision or (info.latest_ready_revision if t.latest else "") for t in info.traffic if t.percent == 100), ""
    )
    latest = info.latest_created_revision
    if not serving or not latest or serving == latest:
        return Base(current, serving)
    latest_rev = await runtime.get_revision(service, latest)
    state = {True: "ready but not serving", False: "failed", None: "not ready yet"}[latest_rev.ready]
    served = await runtime.get_revision(service, serving)
    if not served.template.get("containers"):
        return Base(
            current,
            serving,
            latest=latest,
            latest_state=state,
            note=f":warning: The service's template is revision `{latest}`'s ({state}), not that of `{serving}`, which "
            f"serves; Cloud Run did not say what `{serving}` runs, so this plan builds on that template.",
        )
    spec = copy.deepcopy(current)
    template = {k: v for k, v in (spec.get("template") or {}).items() if k in ("labels", "annotations", "revision")}
    template.update(copy.deepcopy(served.template))
    spec["template"] = template
    return Base(
        spec,
        serving,
        latest=latest,
        latest_state=state,
        note=f"Builds on the serving revision `{serving}`'s configuration, not on the service's template (revision "
        f"`{latest}`, {state}): the changes below include going back to it, and traffic follows the new "
        "revision once it is ready.",
    )

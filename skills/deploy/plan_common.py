"""What the write-plan builders share: parameter validation, the capacity check applied to a plan, GPU and CPU
floors, and reading the running service."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from skills.capacity.fit import FitReport, FitRequest, check_fit, load_catalog
from skills.capacity.release import assumed_release
from skills.deploy.plans import Plan
from skills.deploy.render_service import (
    MAX_THRESHOLD_WINDOW_S,
    PROBE_MARGIN,
    gib,
)
from skills.deploy.vllm_flags import VllmFlags
from skills.errors import InvalidInput, NotFound, explain_validation
from skills.ports import Runtime

ActionKind = Literal["deploy", "redeploy", "scale", "rollback", "destroy", "promote"]
# After the probe budget runs out Cloud Run reports the failure; wait a little longer than that.
WAIT_MARGIN_S = 300


def validate_params(model: type[BaseModel], params: dict[str, Any], kind: str) -> Any:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise InvalidInput(f"Invalid {kind} parameters: {explain_validation(exc, flag_style=False)}") from None


def as_text(x: Any) -> str:
    if isinstance(x, str):
        return x
    for attr in ("summary", "description", "text", "reason"):
        val = getattr(x, attr, None)
        if isinstance(val, str) and val:
            return val
    return str(x)


def fit_lines(r: FitReport) -> list[str]:
    speed = f"~{r.est_tokens_per_s:.0f} tok/s single stream" if r.est_tokens_per_s else "no speed estimate"
    return [
        f"weights {r.weights_gib:.1f} GiB + overhead {r.overhead_gib:.1f} GiB on {r.request.gpu_count} x {r.gpu.name}",
        f"KV cache {r.kv_cache_tokens:,} tokens = {r.max_concurrency:g} full sequences at max-model-len "
        f"{r.request.max_model_len or 0:,}",
        f"host RAM to load {r.host_memory_gib:.1f} GiB; cold start ~{r.cold_start_s / 60:.0f} min",
        f"~${r.cost_per_hour_usd:.2f}/h; {speed}",
    ]


def fit_for(model: str, o: dict[str, Any], memory: str | None) -> FitReport:
    return check_fit(
        FitRequest(
            model=model,
            gpu=o["gpu"],
            gpu_count=o.get("gpu_count", 1),
            max_model_len=o.get("max_model_len"),
            # absent (a service deployed without the flag): what that image's vLLM defaults to
            gpu_memory_utilization=o.get("gpu_memory_utilization")
            or assumed_release(o["gpu"], o.get("vllm_image")).accounting.gpu_memory_utilization_default,
            kv_cache_dtype=o.get("kv_cache_dtype", "auto"),
            cpu_offload_gb=o.get("cpu_offload_gb", 0) or 0,
            enforce_eager=bool(o.get("enforce_eager", False)),
            host_memory_gib=gib(memory) if memory else None,
            max_num_seqs=o.get("max_num_seqs"),
            vllm_image=o.get("vllm_image"),  # the image being deployed: its release's KV accounting
            region=o.get("region"),  # where it deploys: prices and GPU availability
        )
    )


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
    serving = next((t.revision for t in info.traffic if t.percent == 100 and t.revision), "")
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

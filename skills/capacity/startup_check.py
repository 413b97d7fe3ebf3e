"""After a deploy turns ready: what vLLM reported at start-up against what the planner predicted.

Reads the new revision's start-up lines from Cloud Logging (the Logs port), re-plans the configuration the
rendered spec runs with, and returns the comparison and the cold-start breakdown against the startup probe's
budget; the figures are kept in Redis (skills/capacity/startup_log.py) for `/gemma fit`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from skills.capacity.fit import FitReport, FitRequest, check_fit
from skills.capacity.startup_log import StartupFigures, cold_start_lines, comparison_lines, parse_startup, save_figures
from skills.deploy.plan_redeploy import effective_settings, model_of, probe_budget
from skills.deploy.render_service import main_container
from skills.deploy.vllm_flags import VllmFlags
from skills.errors import UserFacingError
from skills.ports import LogQuery, Logs, Store


class StartupCheck(BaseModel):
    service: str
    revision: str
    model: str
    gpu: str
    image: str
    figures: StartupFigures
    predicted: list[str] = Field(default_factory=list)  # "weights: predicted X, vLLM Y (+z%)"
    cold_start: list[str] = Field(default_factory=list)
    probe_budget_s: int = 0
    missing: str = ""  # why there is nothing to compare (no logs, lines not found)


def fit_for_spec(spec: dict[str, Any]) -> tuple[str, FitReport] | None:
    """(image, the planner's report for the configuration a rendered service spec runs), or None if unknown."""
    container = main_container(spec)
    flags = VllmFlags.parse_or_none([str(a) for a in container.get("args") or []])
    model = model_of(spec, flags)
    if model is None or flags is None:
        return None
    o = effective_settings(spec, container)
    req = FitRequest(
        model=model,
        gpu=o["gpu"],
        gpu_count=o["gpu_count"],
        max_model_len=o.get("max_model_len"),
        gpu_memory_utilization=o.get("gpu_memory_utilization", 0.90),
        kv_cache_dtype=o.get("kv_cache_dtype", "auto"),
        cpu_offload_gb=o.get("cpu_offload_gb", 0.0),
        enforce_eager=o["enforce_eager"],
        max_num_seqs=o.get("max_num_seqs"),
        dtype=o["dtype"],
        max_num_batched_tokens=o.get("max_num_batched_tokens"),
    )
    return str(container.get("image", "")), check_fit(req)


async def check_startup(
    logs: Logs,
    store: Store,
    key_prefix: str,
    service: str,
    spec: dict[str, Any],
    revision: str,
    since: datetime,
    ready_after_s: float | None = None,
) -> StartupCheck | None:
    """Compare the revision's start-up lines with the plan; None when the spec is not a catalog model."""
    planned = fit_for_spec(spec)
    if planned is None:
        return None
    image, report = planned
    budget = probe_budget(main_container(spec))
    check = StartupCheck(
        service=service,
        revision=revision,
        model=report.model.name,
        gpu=report.gpu.name,
        image=image,
        figures=StartupFigures(),
        probe_budget_s=budget,
    )
    try:
        batch = await logs.fetch(LogQuery(service=service, since=since, revision=revision or None, max_entries=5000))
    except UserFacingError as exc:
        check.missing = f"could not read the start-up logs ({exc.message})"
        return check
    seen = parse_startup(e.text for e in batch.entries)
    seen.ready_after_s = ready_after_s
    check.figures = seen
    if not seen.complete:
        check.missing = "vLLM's start-up lines (model loading, GPU KV cache size) were not in the logs"
        return check
    check.predicted = comparison_lines(report, seen)
    check.cold_start = cold_start_lines(report, seen, budget)
    await save_figures(store, key_prefix, service, check.model, check.gpu, image, seen)
    return check

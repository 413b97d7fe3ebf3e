"""After a deploy turns ready: what vLLM reported at start-up against what the planner predicted.

Reads the new revision's start-up lines from Cloud Logging (the Logs port), re-plans the configuration the
deployed spec runs with (as its serving target reads it back), and returns the comparison and the cold-start
breakdown against the start-up budget; the figures are kept in Redis (skills/capacity/startup_log.py) for `/gemma fit`.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from skills.capacity.fit import check_fit
from skills.capacity.fit_types import ServingSummary
from skills.capacity.startup_log import (
    StartupFigures,
    cold_start_lines,
    comparison_lines,
    kv_settings,
    parse_startup,
    save_figures,
)
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


async def check_startup(
    logs: Logs,
    store: Store,
    key_prefix: str,
    service: str,
    serving: ServingSummary | None,
    revision: str,
    since: datetime,
    ready_after_s: float | None = None,
) -> StartupCheck | None:
    """Compare the revision's start-up lines with the plan; None when the deployment is not a catalog model
    (`serving`: what the target read from the spec, ServingTarget.serving_of)."""
    if serving is None:
        return None
    image, report, budget = serving.image, check_fit(serving.fit), serving.startup_budget_s
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
    seen.kv_settings = kv_settings(report.request)
    check.figures = seen
    if not seen.complete:
        check.missing = "vLLM's start-up lines (model loading, GPU KV cache size) were not in the logs"
        return check
    check.predicted = comparison_lines(report, seen)
    check.cold_start = cold_start_lines(report, seen, budget)
    await save_figures(store, key_prefix, service, check.model, check.gpu, image, seen)
    return check

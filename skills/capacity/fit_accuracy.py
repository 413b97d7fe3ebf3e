"""The planner against every measured point in skills/data/field_measurements.yaml: predicted vs reported.

bench/fit_accuracy.py prints the table; tests hold the acceptance figures. Reports marked unreliable are shown
with their reason and left out of the mean error: the planner is never tuned to them. A report marked `calibrates`
is one a planner figure is derived from (it matches by construction): shown, and left out of the mean too.
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from skills.capacity.catalog import Catalog, load_catalog
from skills.capacity.fit import GIB, FitReport, FitRequest, check_fit


class Measurement(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    checked: dt.date  # when the report was last read against its source
    description: str
    setup: dict[str, Any]
    assumed: dict[str, Any] = Field(default_factory=dict)
    reported: dict[str, float | str]
    unreliable: dict[str, str] = Field(default_factory=dict)
    calibrates: dict[str, str] = Field(default_factory=dict)  # quantity -> the planner figure derived from it

    def request(self) -> FitRequest:
        extra = {k: v for k, v in self.assumed.items() if k != "why"}
        return FitRequest(**{**self.setup, **extra})


class Row(BaseModel):
    measurement: str
    quantity: str
    predicted: float | str
    reported: float | str
    error_pct: float | None  # None for verdicts
    unreliable: str = ""  # why this report is not a check
    calibrates: str = ""  # the planner figure derived from this report: matches by construction, not a check

    @property
    def counts(self) -> bool:
        return self.error_pct is not None and not self.unreliable and not self.calibrates


@lru_cache(maxsize=1)
def load_measurements() -> tuple[Measurement, ...]:
    text = resources.files("skills").joinpath("data/field_measurements.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text) or {}
    return tuple(Measurement.model_validate(m) for m in data.get("measurements") or [])


def predicted(report: FitReport, quantity: str, cat: Catalog) -> float | str:
    """The planner's figure for a reported quantity."""
    weights_gb = report.weights_gib * GIB / 1e9
    values: dict[str, float | str] = {
        "weights_gib": report.weights_gib,
        "weights_gb": weights_gb,
        "overhead_gib": report.overhead_gib,
        "kv_cache_gib": report.kv_cache_gib,
        "kv_cache_tokens": report.kv_cache_tokens,
        "host_memory_gib": report.host_memory_gib,
        "weights_load_s": cat.load_s(report.model),
        "checkpoint_gb": cat.checkpoint_gb(report.model),
        "vram_after_weights_gb": report.vram_after_weights_gib * GIB / 1e9,
        "est_tokens_per_s": report.est_tokens_per_s or 0.0,
        "verdict": "does_not_fit" if report.verdict == "does_not_fit" else "fits",
    }
    if quantity not in values:
        raise ValueError(f"unknown measured quantity {quantity!r}")
    return values[quantity]


def rows(catalog: Catalog | None = None) -> list[Row]:
    cat = catalog or load_catalog()
    out: list[Row] = []
    for m in load_measurements():
        report = check_fit(m.request(), cat)
        for quantity, reported in m.reported.items():
            pred = predicted(report, quantity, cat)
            err = None
            if isinstance(pred, (int, float)) and isinstance(reported, (int, float)) and reported:
                err = (float(pred) - float(reported)) / float(reported) * 100
            out.append(
                Row(
                    measurement=m.id,
                    quantity=quantity,
                    predicted=pred,
                    reported=reported,
                    error_pct=err,
                    unreliable=m.unreliable.get(quantity, ""),
                    calibrates=m.calibrates.get(quantity, ""),
                )
            )
    return out


def mean_abs_error(table: list[Row]) -> float:
    errors = [abs(r.error_pct) for r in table if r.counts and r.error_pct is not None]
    return sum(errors) / len(errors) if errors else 0.0

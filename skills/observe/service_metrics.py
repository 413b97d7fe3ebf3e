"""Cloud Monitoring figures for the service (GPU, memory, instances, requests), read-only.

Used by `/gemma status` (optional, bounded by a short timeout) and wrappable as an agent tool. Each metric is
fetched concurrently; one failing metric is reported as missing rather than failing the whole summary.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field

from skills.errors import UserFacingError
from skills.ports import Metrics, MetricSeries
from skills.text import shorten

# metric under run.googleapis.com/ -> (label, unit)
SERVICE_METRICS: dict[str, tuple[str, str]] = {
    "container/gpu/utilizations": ("GPU utilisation", "ratio"),
    "container/gpu/memory_utilizations": ("GPU memory", "ratio"),
    "container/instance_count": ("Instances", "count"),
    "request_count": ("Requests", "per_s"),
    "request_latencies": ("Request latency p95", "ms"),
    "container/memory/utilizations": ("Container memory", "ratio"),
}


class MetricFigure(BaseModel):
    metric: str
    label: str
    unit: str
    latest: float | None = None
    peak: float | None = None
    by_label: dict[str, float] = Field(default_factory=dict)  # latest per state / response-code class
    error: str = ""

    def text(self) -> str:
        if self.error:
            return f"unavailable ({self.error})"
        if self.latest is None:
            return "no data"
        fmt = _FMT[self.unit]
        out = f"{fmt(self.latest)} now, peak {fmt(self.peak or 0.0)}"
        if self.by_label:
            out += " (" + ", ".join(f"{k} {fmt(v)}" for k, v in sorted(self.by_label.items())) + ")"
        return out


_FMT = {
    "ratio": lambda v: f"{v:.0%}",
    "count": lambda v: f"{v:.0f}",
    "per_s": lambda v: f"{v:.2f}/s",
    "ms": lambda v: f"{v:.0f} ms",
}


class ServiceMetrics(BaseModel):
    service: str
    minutes: int
    figures: list[MetricFigure]


def _figure(metric: str, series: list[MetricSeries]) -> MetricFigure:
    label, unit = SERVICE_METRICS[metric]
    fig = MetricFigure(metric=metric, label=label, unit=unit)
    if not series:
        return fig
    # Sum the groups (states, code classes) at each timestamp for the headline; keep the split alongside.
    totals: dict[object, float] = {}
    for s in series:
        for p in s.points:
            totals[p.at] = totals.get(p.at, 0.0) + p.value
        if len(series) > 1 and s.points:
            key = next((v for k, v in s.labels.items() if k in ("state", "response_code_class")), "")
            if key:
                fig.by_label[key] = s.points[-1].value
    if totals:
        fig.latest = totals[max(totals)]  # type: ignore[type-var]
        fig.peak = max(totals.values())
    return fig


async def service_metrics(metrics: Metrics, service: str, minutes: int = 30, timeout_s: float = 5.0) -> ServiceMetrics:
    """Latest value and peak over the last `minutes` for each service metric."""

    async def one(metric: str) -> MetricFigure:
        label, unit = SERVICE_METRICS[metric]
        try:
            async with asyncio.timeout(timeout_s):
                return _figure(metric, await metrics.series(service, metric, minutes))
        except TimeoutError:
            return MetricFigure(metric=metric, label=label, unit=unit, error=f"no answer in {timeout_s:g} s")
        except UserFacingError as exc:
            return MetricFigure(metric=metric, label=label, unit=unit, error=shorten(exc.message, 120))

    figures = await asyncio.gather(*(one(m) for m in SERVICE_METRICS))
    return ServiceMetrics(service=service, minutes=minutes, figures=list(figures))

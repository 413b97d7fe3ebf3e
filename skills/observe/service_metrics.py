"""Cloud Monitoring figures for the service (GPU, memory, instances, requests), read-only.

Used by `/gemma status` (optional, bounded by a short timeout) and wrappable as an agent tool. Each metric is
fetched concurrently; one failing metric is reported as missing rather than failing the whole summary.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

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

    def text(self, latest: str = "now") -> str:
        """`latest`: what the last value is (`now` for the service; a postmortem's `at its end`)."""
        if self.error:
            return f"unavailable ({self.error})"
        if self.latest is None:
            return "no data"
        fmt = _FMT[self.unit]
        out = f"{fmt(self.latest)} {latest}, peak {fmt(self.peak or 0.0)}"
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
    source: str = "Cloud Monitoring"  # where the figures come from (a Metrics adapter's `source`, when it has one)


def alignment_period_s(minutes: int) -> int:
    """The alignment period Cloud Monitoring is asked for over the last `minutes` (bot/adapters/cloud_monitoring.py):
    at most ~30 points, whole minutes, at least one. Each point then stands for the period ending at its time."""
    return max(60, (minutes * 60) // 30 // 60 * 60)


def figure(
    metric: str,
    series: list[MetricSeries],
    start: datetime | None = None,
    end: datetime | None = None,
    period: timedelta = timedelta(seconds=60),
) -> MetricFigure:
    """The one reading of a metric's figure: `/gemma status` over its last minutes, a postmortem over an incident's
    window (`start`..`end`). The groups (states, code classes) are summed at each time for the headline, with the
    split alongside. An aligned point stands for its alignment `period`, which ends at its time: with a window, the
    points whose period overlaps it count (a short incident falls inside one period, between two points)."""
    label, unit = SERVICE_METRICS[metric]
    fig = MetricFigure(metric=metric, label=label, unit=unit)
    if not series:
        return fig
    if start is not None or end is not None:
        low, high = start or datetime.min.replace(tzinfo=UTC), (end or datetime.max.replace(tzinfo=UTC))
        series = [
            s.model_copy(update={"points": [p for p in s.points if p.at > low and p.at - period < high]})
            for s in series
        ]
    totals: dict[datetime, float] = {}
    for s in series:
        for p in s.points:
            totals[p.at] = totals.get(p.at, 0.0) + p.value
        if len(series) > 1 and s.points:
            key = next((v for k, v in s.labels.items() if k in ("state", "response_code_class")), "")
            if key:
                fig.by_label[key] = s.points[-1].value
    if totals:
        fig.latest = totals[max(totals)]
        fig.peak = max(totals.values())
    return fig


async def read_figure(
    metrics: Metrics,
    service: str,
    metric: str,
    minutes: int,
    timeout_s: float = 5.0,
    start: datetime | None = None,
    end: datetime | None = None,
) -> MetricFigure:
    """One metric's figure from Cloud Monitoring (`figure`): what status shows, and a postmortem's impact."""
    label, unit = SERVICE_METRICS[metric]
    try:
        async with asyncio.timeout(timeout_s):
            found = await metrics.series(service, metric, minutes)
            return figure(metric, found, start, end, timedelta(seconds=alignment_period_s(minutes)))
    except TimeoutError:
        return MetricFigure(metric=metric, label=label, unit=unit, error=f"no answer in {timeout_s:g} s")
    except UserFacingError as exc:
        return MetricFigure(metric=metric, label=label, unit=unit, error=shorten(exc.message, 120))


async def service_metrics(metrics: Metrics, service: str, minutes: int = 30, timeout_s: float = 5.0) -> ServiceMetrics:
    """Latest value and peak over the last `minutes` for each service metric."""

    figures = await asyncio.gather(*(read_figure(metrics, service, m, minutes, timeout_s) for m in SERVICE_METRICS))
    source = str(getattr(metrics, "source", "") or "Cloud Monitoring")  # an adapter may name where it reads
    names: dict[str, str] = getattr(metrics, "labels", None) or {}  # ... and a figure by its own metric's name
    for f in figures:
        f.label = names.get(f.metric, f.label)
    return ServiceMetrics(service=service, minutes=minutes, figures=list(figures), source=source)

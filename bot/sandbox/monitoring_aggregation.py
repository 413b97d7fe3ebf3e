"""ListTimeSeries's aggregation, as the Cloud Monitoring stand-in applies it: points aligned into the request's
alignment periods by its per-series aligner, then combined across series by its cross-series reducer, one output
series per value of its group-by fields (https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.timeSeries/list,
"Aggregation"; https://cloud.google.com/monitoring/api/v3/aggregation).

The stand-in keeps the values its simulations write already in the unit the aligner produces (a request rate per
second, a 95th-percentile latency), so ALIGN_RATE and ALIGN_PERCENTILE_* align by the mean and the maximum of the
points in a period; ALIGN_MEAN, ALIGN_MAX, ALIGN_MIN and ALIGN_SUM do what they say. A period that holds no point
of a series has no value for it, and the reducer combines the series that have one, as the real API does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from google.cloud import monitoring_v3

Aligner = monitoring_v3.Aggregation.Aligner
Reducer = monitoring_v3.Aggregation.Reducer

_ALIGN: dict[int, Callable[[list[float]], float]] = {
    Aligner.ALIGN_MEAN: lambda v: sum(v) / len(v),
    Aligner.ALIGN_RATE: lambda v: sum(v) / len(v),  # values are rates already
    Aligner.ALIGN_MAX: max,
    Aligner.ALIGN_MIN: min,
    Aligner.ALIGN_SUM: sum,
    Aligner.ALIGN_PERCENTILE_99: max,
    Aligner.ALIGN_PERCENTILE_95: max,
    Aligner.ALIGN_PERCENTILE_50: max,
}
_REDUCE: dict[int, Callable[[list[float]], float]] = {
    Reducer.REDUCE_SUM: sum,
    Reducer.REDUCE_MEAN: lambda v: sum(v) / len(v),
    Reducer.REDUCE_MAX: max,
    Reducer.REDUCE_MIN: min,
    Reducer.REDUCE_COUNT: len,
}


def _value(point: monitoring_v3.Point) -> float:
    v = point.value
    return float(v.double_value or v.int64_value)


def _label(ts: monitoring_v3.TimeSeries, field: str) -> str:
    scope, _, name = field.rpartition(".")
    labels = ts.resource.labels if scope.startswith("resource") else ts.metric.labels
    return str(labels.get(name, ""))


def aggregate(
    found: Iterable[monitoring_v3.TimeSeries],
    aggregation: monitoring_v3.Aggregation,
    start: datetime,
    end: datetime,
) -> list[monitoring_v3.TimeSeries]:
    """The series `found` as ListTimeSeries returns them for this aggregation over [start, end]."""
    period = aggregation.alignment_period
    step = timedelta(seconds=period.total_seconds()) if period else timedelta(0)
    align = _ALIGN.get(aggregation.per_series_aligner)
    if not step or align is None:
        return [ts for ts in found]
    # Each series: period end -> its aligned value. Periods end at `end`, `end - step`, ... back to `start`.
    aligned: list[tuple[monitoring_v3.TimeSeries, dict[datetime, float]]] = []
    for ts in found:
        buckets: dict[datetime, list[float]] = defaultdict(list)
        for p in ts.points:
            at = p.interval.end_time
            if not start < at <= end:
                continue
            k = (end - at) // step
            buckets[end - k * step].append(_value(p))
        aligned.append((ts, {when: align(vs) for when, vs in buckets.items()}))
    reduce = _REDUCE.get(aggregation.cross_series_reducer)
    if reduce is None:  # REDUCE_NONE: the aligned series themselves
        return [_series(ts, ts.metric.labels, ts.resource.labels, values) for ts, values in aligned]
    fields = list(aggregation.group_by_fields)
    groups: dict[tuple[str, ...], list[tuple[monitoring_v3.TimeSeries, dict[datetime, float]]]] = defaultdict(list)
    for ts, values in aligned:
        groups[tuple(_label(ts, f) for f in fields)].append((ts, values))
    out = []
    for key, members in groups.items():
        combined: dict[datetime, list[float]] = defaultdict(list)
        for _, values in members:
            for when, v in values.items():
                combined[when].append(v)
        if not combined:
            continue
        metric_labels = {f.rpartition(".")[2]: k for f, k in zip(fields, key, strict=True) if f.startswith("metric")}
        resource_labels = {
            f.rpartition(".")[2]: k for f, k in zip(fields, key, strict=True) if f.startswith("resource")
        }
        out.append(_series(members[0][0], metric_labels, resource_labels, {w: reduce(v) for w, v in combined.items()}))
    return out


def _series(
    like: monitoring_v3.TimeSeries, metric_labels: object, resource_labels: object, values: dict[datetime, float]
) -> monitoring_v3.TimeSeries:
    points = [
        monitoring_v3.Point(interval=monitoring_v3.TimeInterval(end_time=when), value={"double_value": v})
        for when, v in sorted(values.items(), reverse=True)  # newest first, as the API returns them
    ]
    return monitoring_v3.TimeSeries(
        metric={"type": like.metric.type, "labels": dict(metric_labels)},  # type: ignore[call-overload]
        resource={"type": like.resource.type, "labels": dict(resource_labels)},  # type: ignore[call-overload]
        points=points,
    )

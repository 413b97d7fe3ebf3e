"""ListTimeSeries's aggregation, as the Cloud Monitoring stand-in applies it: points aligned into the request's
alignment periods by its per-series aligner, then combined across series by its cross-series reducer, one output
series per value of its group-by fields (https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.timeSeries/list,
"Aggregation"; https://cloud.google.com/monitoring/api/v3/aggregation).

The stand-in keeps the values its simulations write already in the unit the aligner produces (a request rate per
second over each point's interval, a 95th-percentile latency), so ALIGN_RATE weighs each point's rate by how much
of its interval falls in the period (a revision that served half a period counts half its rate), and
ALIGN_PERCENTILE_* takes the maximum of the points in a period; ALIGN_MEAN, ALIGN_MAX, ALIGN_MIN and ALIGN_SUM do
what they say. A period that holds no point
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


def _spread(
    point: monitoring_v3.Point, step: timedelta, start: datetime, end: datetime, buckets: dict[datetime, list[float]]
) -> None:
    """A rate point's share of each alignment period its interval overlaps: rate x overlap / period (a point no
    longer than a period counts in the period of its end, as a delta is reported when its interval ends)."""
    p_end = point.interval.end_time
    p_start = point.interval.start_time or p_end
    if not p_end - timedelta(days=1) < p_start < p_end:  # no start given (the epoch, or the end): one period
        p_start = p_end - step
    value = _value(point)
    if p_end - p_start <= step:  # within one period: all of it in the period of its end, for the time it covers
        if start < p_end <= end:
            k = (end - p_end) // step
            buckets[end - k * step].append(value * (p_end - p_start).total_seconds() / step.total_seconds())
        return
    k = max(0, (end - p_end) // step)
    while True:
        b_end = end - k * step
        b_start = b_end - step
        if b_end <= start or b_end <= p_start:
            return
        overlap = (min(p_end, b_end) - max(p_start, b_start)).total_seconds()
        if overlap > 0:
            buckets[b_end].append(value * overlap / step.total_seconds())
        k += 1


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
    rate = aggregation.per_series_aligner == Aligner.ALIGN_RATE
    for ts in found:
        buckets: dict[datetime, list[float]] = defaultdict(list)
        for p in ts.points:
            at = p.interval.end_time
            if rate:
                _spread(p, step, start, end, buckets)
                continue
            if not start < at <= end:
                continue
            k = (end - at) // step
            buckets[end - k * step].append(_value(p))
        values = {w: sum(vs) for w, vs in buckets.items()} if rate else {w: align(vs) for w, vs in buckets.items()}
        aligned.append((ts, values))
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

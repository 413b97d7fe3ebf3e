"""Azure Monitor's metrics REST API for the sandbox's container apps, on the ARM stand-in's host (aca_api.py):
`GET /subscriptions/S/resourceGroups/RG/providers/Microsoft.App/containerApps/APP/providers/Microsoft.Insights/metrics`
with api-version 2024-02-01 and timespan, interval, metricnames, aggregation, $filter, metricnamespace (what
azure-mgmt-monitor 7.0's metrics.list sends). The answer is the API's Response: {"cost", "timespan", "interval",
"namespace", "resourceregion", "value": [{"id", "type", "name": {"value", "localizedValue"}, "unit", "timeseries":
[{"metadatavalues": [{"name": {...}, "value"}], "data": [{"timeStamp", "<aggregation>"}]}], "errorCode"}]}
(the SDK's Response, Metric, TimeSeriesElement and MetricValue models).

Metrics and dimensions as "Supported metrics for Microsoft.App/containerApps" lists them. Values come from what
happened in the sandbox, sampled each minute and aggregated per interval:
- Replicas: the revision's replicas alive in that minute (AcaReplicas' running and retired replicas);
- Requests: the requests through the replicas' ingress in that minute (AcaReplicas.requests, and the simulated
  users' counts, AcaReplicas.load), by revisionName,
  statusCodeCategory ("2xx", "5xx") and statusCode;
- RestartCount: replicas whose start the startup probe gave up on, in that minute.
The other metrics of the list (CpuPercentage, MemoryPercentage, UsageNanoCores, WorkingSetBytes, ...) are not
simulated: their intervals carry a timeStamp and no value, as Azure Monitor's intervals without data do.

Refusals: an unknown metric is 400 {"code": "BadRequest", "message": "Failed to find metric configuration for
provider: Microsoft.App, resource Type: containerApps, metric: X, Valid metrics: ..."} (Azure Monitor's answer in
Azure/azure-sdk-for-net#29584); the sandbox's own words for an aggregation or dimension the metric lacks, an interval
that is not a time grain, a timespan that does not parse, an unknown parameter. Authentication, api-version and a
missing app as the ARM stand-in answers them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import isodate
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.sandbox.aca_api import AcaStandIn, ArmError
from bot.sandbox.aca_replicas import AcaReplicas

API_VERSION = "2024-02-01"  # azure-mgmt-monitor 7.0's metrics api-version
NAMESPACE = "Microsoft.App/containerApps"
GRAINS = ("PT1M", "PT5M", "PT15M", "PT30M", "PT1H", "PT6H", "PT12H", "P1D")
_PARAMS = {
    "api-version",
    "timespan",
    "interval",
    "metricnames",
    "aggregation",
    "top",
    "orderby",
    "$filter",
    "resultType",
    "metricnamespace",
    "AutoAdjustTimegrain",
    "ValidateDimensions",
    "rollupby",
}
_ALL = ("Average", "Total", "Maximum", "Minimum")


@dataclass(frozen=True)
class _Def:
    unit: str
    aggregations: tuple[str, ...]
    dimensions: tuple[str, ...]
    display: str


# Microsoft.App/containerApps' basic metrics (the supported-metrics list; display names as it gives them)
METRICS: dict[str, _Def] = {
    "CoresQuotaUsed": _Def("Count", ("Maximum", "Minimum"), ("revisionName",), "Reserved Cores"),
    "CpuPercentage": _Def("Percent", _ALL, ("podName",), "CPU Usage Percentage (Preview)"),
    "MemoryPercentage": _Def("Percent", _ALL, ("podName",), "Memory Percentage (Preview)"),
    "Replicas": _Def("Count", _ALL, ("revisionName", "deploymentName"), "Replica Count"),
    "Requests": _Def("Count", _ALL, ("revisionName", "podName", "statusCodeCategory", "statusCode"), "Requests"),
    "RestartCount": _Def("Count", _ALL, ("revisionName", "podName"), "Replica Restart Count"),
    "RxBytes": _Def("Bytes", _ALL, ("revisionName", "podName"), "Network In Bytes"),
    "TxBytes": _Def("Bytes", _ALL, ("revisionName", "podName"), "Network Out Bytes"),
    "UsageNanoCores": _Def("NanoCores", _ALL, ("revisionName", "podName"), "CPU Usage"),
    "WorkingSetBytes": _Def("Bytes", _ALL, ("revisionName", "podName"), "Memory Working Set Bytes"),
}


def _bad(message: str) -> ArmError:
    return ArmError(400, "BadRequest", message)


def _parse_filter(text: str, dims: tuple[str, ...], metric: str) -> dict[str, str]:
    """`dim eq 'value'` clauses joined by ` and ` (a value '*' splits by that dimension)."""
    out: dict[str, str] = {}
    for clause in text.split(" and "):
        parts = clause.strip().split(" ", 2)
        if len(parts) != 3 or parts[1] != "eq" or not (parts[2].startswith("'") and parts[2].endswith("'")):
            raise _bad(f"The $filter '{text}' is not valid: expected dimension eq 'value' clauses joined by 'and'.")
        if parts[0] not in dims:
            raise _bad(
                f"Metric: {metric} does not support requested dimension combination: {parts[0]}, supported ones are: "
                f"{','.join(dims)}"
            )
        if parts[0] in out:
            raise _bad(f"The $filter '{text}' names dimension {parts[0]} twice.")
        out[parts[0]] = parts[2][1:-1]
    return out


class AcaMetricsStandIn:
    def __init__(
        self, aca: AcaStandIn, replicas: AcaReplicas, *, now: Callable[[], float], epoch: datetime | None = None
    ) -> None:
        self.aca = aca
        self.replicas = replicas
        self._now = now
        self.epoch = epoch or aca.epoch  # the ARM stand-in's time base unless told

    def install(self) -> None:
        """Answer on the ARM stand-in's host (before its catch-all), as Azure Monitor answers on ARM's."""
        path = (
            "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.App/containerApps/{app}"
            "/providers/Microsoft.Insights/metrics"
        )
        self.aca.extra_routes.append(Route(path, self._metrics, methods=["GET"]))

    def _seconds(self, at: datetime) -> float:
        return (at - self.epoch).total_seconds()

    # --- what happened, per minute sample ----------------------------------------------------------------------

    def _samples(self, app: str, runs: list[Any], metric: str, minute: float) -> list[tuple[dict[str, str], float]]:
        """(dimension values, value) of one minute [minute, minute + 60) of simulated time."""
        end = minute + 60
        out: list[tuple[dict[str, str], float]] = []
        if metric == "Requests":
            counts: dict[tuple[str, int], int] = {}
            for when, name, rev, status in self.replicas.requests:
                if name == app and minute <= when < end:
                    counts[(rev, status)] = counts.get((rev, status), 0) + 1
            for (at, name, rev, status), n in self.replicas.load.items():  # the simulated users', per minute
                if name == app and minute <= at < end:
                    counts[(rev, status)] = counts.get((rev, status), 0) + n
            for (rev, status), n in counts.items():
                out.append(
                    ({"revisionName": rev, "statusCodeCategory": f"{status // 100}xx", "statusCode": str(status)}, n)
                )
        elif metric == "Replicas":
            alive: dict[str, int] = {}
            for run in runs:
                stop = run.stopped if run.stopped is not None else float("inf")
                if run.started < end and stop > minute and run.started <= self._now():
                    alive[run.revision] = alive.get(run.revision, 0) + 1
            out += [({"revisionName": rev}, n) for rev, n in alive.items()]
        elif metric == "RestartCount":
            for run in runs:
                if run.failed_at is not None and minute <= run.failed_at < end:
                    out.append(({"revisionName": run.revision}, 1))
        return out

    # --- the API -----------------------------------------------------------------------------------------------

    async def _metrics(self, request: Request) -> Response:
        try:
            return self._answer(request)
        except ArmError as exc:
            body: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.status in (401, 404):  # ARM's own refusals, before Azure Monitor is reached
                body = {"error": body}
            return JSONResponse(body, status_code=exc.status)

    def _answer(self, request: Request) -> Response:
        auth = request.headers.get("authorization", "")
        if not auth.lower().startswith("bearer ") or not auth[7:].strip():
            raise ArmError(401, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing.")
        q = request.query_params
        if q.get("api-version") != API_VERSION:
            raise _bad(
                f"The api-version '{q.get('api-version', '')}' is invalid. The supported versions are '{API_VERSION}'."
            )
        unknown = sorted(set(q.keys()) - _PARAMS)
        if unknown:
            raise _bad(f"The query parameter '{unknown[0]}' is not supported.")
        p = request.path_params
        if p["sub"] != self.aca.subscription or p["rg"].lower() != self.aca.resource_group.lower():
            raise ArmError(404, "ResourceGroupNotFound", f"Resource group '{p['rg']}' could not be found.")
        app = p["app"]
        with self.aca.lock:
            self.aca._advance()
            if app not in self.aca.apps:
                raise self.aca._not_found("containerApps", app)
        runs = self.replicas.replica_runs(app)
        ns = q.get("metricnamespace")
        if ns is not None and ns.lower() != NAMESPACE.lower():
            raise _bad(f"Metric namespace '{ns}' is not valid for resource type {NAMESPACE}.")
        names = [n.strip() for n in (q.get("metricnames") or "").split(",") if n.strip()]
        if not names:
            raise _bad("metricnames is required: the sandbox serves no default metric.")
        for name in names:
            if name not in METRICS:
                raise _bad(
                    f"Failed to find metric configuration for provider: Microsoft.App, resource Type: containerApps, "
                    f"metric: {name}, Valid metrics: {','.join(METRICS)}"
                )
        interval = q.get("interval") or "PT1M"
        if interval not in GRAINS:
            raise _bad(f"Invalid time grain '{interval}': supported time grains are {', '.join(GRAINS)}.")
        step = isodate.parse_duration(interval)
        now = self.epoch + timedelta(seconds=self._now())
        try:
            if q.get("timespan"):
                a, b = q["timespan"].split("/", 1)
                start, end = isodate.parse_datetime(a), isodate.parse_datetime(b)
            else:
                start, end = now - timedelta(hours=1), now
        except (ValueError, isodate.ISO8601Error):
            raise _bad(f"The timespan '{q.get('timespan')}' is not valid: expected start/end in ISO 8601.") from None
        start, end = (x if x.tzinfo else x.replace(tzinfo=UTC) for x in (start, end))
        if end <= start:
            raise _bad("The timespan's end must be after its start.")
        aggregations = [a.strip() for a in (q.get("aggregation") or "Average").split(",")]
        value = []
        for name in names:
            d = METRICS[name]
            for agg in aggregations:
                if agg not in d.aggregations:
                    raise _bad(f"Aggregation '{agg}' is not supported by metric {name}: {', '.join(d.aggregations)}.")
            flt = _parse_filter(q["$filter"], d.dimensions, name) if q.get("$filter") else {}
            value.append(self._metric(request, app, runs, name, d, aggregations, flt, start, end, step))
        return JSONResponse(
            {
                "cost": 0,
                "timespan": f"{_iso(start)}/{_iso(end)}",
                "interval": interval,
                "namespace": NAMESPACE,
                "resourceregion": self.aca.location,
                "value": value,
            }
        )

    def _metric(
        self,
        request: Request,
        app: str,
        runs: list[Any],
        name: str,
        d: _Def,
        aggregations: list[str],
        flt: dict[str, str],
        start: datetime,
        end: datetime,
        step: timedelta,
    ) -> dict[str, Any]:
        split = [k for k, v in flt.items() if v == "*"]
        fixed = {k: v for k, v in flt.items() if v != "*"}
        simulated = name in ("Requests", "Replicas", "RestartCount")
        # interval starts aligned to the grain, as Azure Monitor aligns them
        first = datetime.fromtimestamp(start.timestamp() // step.total_seconds() * step.total_seconds(), UTC)
        grains: list[datetime] = []
        t = first
        while t < end:
            grains.append(t)
            t += step
        # one sample per minute (summed over what the filter keeps), then every series gets every minute (0 if none)
        minutes: list[tuple[datetime, dict[tuple[str, ...], float]]] = []
        keys: set[tuple[str, ...]] = set() if split else {()}
        for g in grains:
            minute = g
            while minute < g + step and minute < end:
                sums: dict[tuple[str, ...], float] = {}
                for dims, v in self._samples(app, runs, name, self._seconds(minute)) if simulated else []:
                    if any(dims.get(k) != want for k, want in fixed.items()):
                        continue
                    key = tuple(dims.get(k, "") for k in split)
                    sums[key] = sums.get(key, 0.0) + v
                keys |= set(sums)
                minutes.append((g, sums))
                minute += timedelta(minutes=1)
        series: dict[tuple[str, ...], dict[datetime, list[float]]] = {k: {} for k in keys}
        for g, sums in minutes:
            for key in keys:
                series[key].setdefault(g, []).append(sums.get(key, 0.0))

        def point(g: datetime, samples: list[float]) -> dict[str, Any]:
            out: dict[str, Any] = {"timeStamp": _iso(g)}
            if simulated and samples:
                for agg in aggregations:
                    out[agg.lower()] = {
                        "Total": sum(samples),
                        "Maximum": max(samples),
                        "Minimum": min(samples),
                        "Average": sum(samples) / len(samples),
                    }[agg]
            return out

        timeseries = [
            {
                "metadatavalues": [
                    {"name": {"value": k, "localizedValue": k}, "value": v} for k, v in zip(split, key, strict=True)
                ],
                "data": [point(g, by_grain.get(g, [])) for g in grains],
            }
            for key, by_grain in sorted(series.items())
        ]
        base = str(request.url.path).split("/providers/Microsoft.Insights/")[0]
        return {
            "id": f"{base}/providers/Microsoft.Insights/metrics/{name}",
            "type": "Microsoft.Insights/metrics",
            "name": {"value": name, "localizedValue": d.display},
            "displayDescription": d.display,
            "unit": d.unit,
            "timeseries": timeseries,
            "errorCode": "Success",
        }


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

"""An in-process gRPC Cloud Monitoring stand-in: MetricService.ListTimeSeries with the library's own messages.

google-cloud-monitoring ships no generated servicer, so the method is registered with a generic handler using
the request/response (de)serializers of the library's proto-plus types. Series are keyed by metric type; the
request's filter must name `metric.type = "..."` and the service, as the real API's filter language does.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import grpc
from google.cloud import monitoring_v3
from google.cloud.monitoring_v3.types import metric_service

from bot.sandbox.grpc_server import serve_grpc_services
from bot.sandbox.monitoring_aggregation import aggregate
from bot.sandbox.monitoring_alerting import AlertingStandIn, alerting_services

_HISTORY_S = 3600  # how much of a simulated load's history a series keeps


class MonitoringStandIn:
    def __init__(self) -> None:
        self.series: dict[str, list[monitoring_v3.TimeSeries]] = {}
        self.alerting = AlertingStandIn()  # AlertPolicyService + NotificationChannelService on the same endpoint
        self.requests: list[metric_service.ListTimeSeriesRequest] = []
        self.fail_with: grpc.StatusCode | None = None
        self.fail_next: list[grpc.StatusCode] = []  # one-off failures, answered in order before fail_with
        # Blackholed: calls are accepted and never answered (until `release()` or the caller's deadline),
        # like an endpoint behind a firewall that drops packets. `blocked` counts calls held right now.
        self.blackholed = False
        self.blocked = 0
        self._released = threading.Event()
        self._lock = threading.Lock()

    def blackhole(self) -> None:
        self._released.clear()
        self.blackholed = True

    def release(self) -> None:
        self.blackholed = False
        self._released.set()

    def add(
        self,
        metric: str,
        service: str,
        values: list[float],
        *,
        labels: dict[str, str] | None = None,
        step_s: int = 60,
        int_values: bool = False,
        revision: str = "",
        append: bool = False,
        covers_s: float | None = None,
    ) -> None:
        """One series of points ending now, `step_s` apart, for run.googleapis.com/<metric>; `revision` sets the
        cloud_run_revision resource's revision_name label; `append` adds the points to the series of those labels
        and revision (a simulated load's history, an hour of it kept), making it if there is none, its first point
        covering `covers_s` seconds."""
        # A load's points keep their microseconds, so a change of traffic within one second still tiles in time
        now = datetime.now(UTC)
        if not append:
            now = now.replace(microsecond=0)
        points: list[monitoring_v3.Point] = []
        for i, v in enumerate(values):
            end = now - timedelta(seconds=step_s * (len(values) - 1 - i))
            value = (
                monitoring_v3.TypedValue(int64_value=int(v)) if int_values else monitoring_v3.TypedValue(double_value=v)
            )
            # Each point covers the time since the one before (a DELTA metric's interval has both ends); a load's
            # first point, the time since it last wrote (`covers_s`)
            span = timedelta(seconds=covers_s if covers_s is not None else step_s)
            interval = monitoring_v3.TimeInterval(start_time=end - span, end_time=end)
            points.insert(0, monitoring_v3.Point(interval=interval, value=value))
        ts = monitoring_v3.TimeSeries(
            metric={"type": f"run.googleapis.com/{metric}", "labels": labels or {}},
            resource={
                "type": "cloud_run_revision",
                "labels": {"service_name": service, "location": "us-central1", "revision_name": revision},
            },
            points=points,  # newest first, as the API returns them
        )
        with self._lock:
            kept = self.series.setdefault(f"run.googleapis.com/{metric}", [])
            same = [
                t
                for t in kept
                if dict(t.metric.labels) == (labels or {})
                and t.resource.labels["service_name"] == service
                and t.resource.labels.get("revision_name", "") == revision
            ]
            if append and same:
                oldest = now - timedelta(seconds=_HISTORY_S)
                older = [p for p in same[0].points if p.interval.end_time > oldest]
                if older and points:  # the new point covers the time since the series' newest
                    last = older[0].interval
                    first = points[-1].interval
                    if last.end_time < first.end_time:
                        first.start_time = last.end_time
                    else:  # the same second: the new point replaces it, over its interval too
                        first.start_time = last.start_time
                        older = older[1:]
                same[0].points = [*points, *older]  # newest first
                return
            kept.append(ts)

    def _list(
        self, request: metric_service.ListTimeSeriesRequest, context: grpc.ServicerContext
    ) -> metric_service.ListTimeSeriesResponse:
        with self._lock:
            self.requests.append(request)
        if self.blackholed:
            with self._lock:
                self.blocked += 1
            try:
                while context.is_active() and not self._released.wait(0.05):
                    pass
            finally:
                with self._lock:
                    self.blocked -= 1
            if not context.is_active():
                return metric_service.ListTimeSeriesResponse()  # nobody is listening any more
        with self._lock:
            once = self.fail_next.pop(0) if self.fail_next else None
        if once is not None:
            context.abort(once, "simulated failure")
        if self.fail_with is not None:
            context.abort(self.fail_with, "simulated failure")
        m = re.search(r'metric\.type\s*=\s*"([^"]+)"', request.filter)
        s = re.search(r'resource\.labels\.service_name\s*=\s*"([^"]+)"', request.filter)
        r = re.search(r'resource\.labels\.revision_name\s*=\s*"([^"]+)"', request.filter)
        if not m or not request.name.startswith("projects/"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "filter must name metric.type; name must be projects/...")
            raise AssertionError("unreachable: abort raises")
        with self._lock:
            found = [
                ts
                for ts in self.series.get(m.group(1), [])
                if (s is None or ts.resource.labels["service_name"] == s.group(1))
                and (r is None or ts.resource.labels.get("revision_name", "") == r.group(1))
            ]
        if request.aggregation.alignment_period:
            found = aggregate(found, request.aggregation, request.interval.start_time, request.interval.end_time)
        return metric_service.ListTimeSeriesResponse(time_series=found)


@contextmanager
def serve_monitoring(standin: MonitoringStandIn, workers: int = 4) -> Iterator[str]:
    """Yield '127.0.0.1:PORT' while a gRPC server answers ListTimeSeries and the alerting services."""
    list_series = grpc.unary_unary_rpc_method_handler(
        standin._list,
        request_deserializer=metric_service.ListTimeSeriesRequest.deserialize,
        response_serializer=metric_service.ListTimeSeriesResponse.serialize,
    )
    try:
        services = {"google.monitoring.v3.MetricService": {"ListTimeSeries": list_series}}
        services.update(alerting_services(standin.alerting))
        with serve_grpc_services(services, workers) as target:
            yield target
    finally:
        standin.release()

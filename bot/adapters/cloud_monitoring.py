"""Metrics port on Cloud Monitoring (`google-cloud-monitoring`, gRPC), for the Cloud Run service's series.

The client is blocking, so calls run in a thread. CLOUD_MONITORING_API_ENDPOINT overrides the endpoint
(private/regional endpoints; a plain-text channel for a local stand-in on 127.0.0.1/localhost).
Each metric has an alignment chosen so a point is one number an operator reads directly: utilisations as
the mean, latencies as p95, request count as a rate per second, instance count as the max.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from google.api_core import exceptions as gexc
from google.api_core import retry as gretry
from google.api_core.client_options import ClientOptions
from google.protobuf import duration_pb2, timestamp_pb2

from bot.adapters.blocking import BlockingPool
from bot.adapters.google_auth import cloud_credentials
from bot.settings import Settings
from skills.errors import UserFacingError
from skills.observe.service_metrics import alignment_period_s
from skills.ports import MetricPoint, MetricSeries
from skills.retrying import Clock, RetryPolicy, Sleep, retry_call

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # monitoring_v3 is imported where used: a slow import a request may never need
    from google.cloud import monitoring_v3

# metric (under run.googleapis.com/) -> (per-series aligner, cross-series reducer, group-by labels); enum names,
# resolved when a query is built so that importing this module does not import monitoring_v3 (a slow import)
ALIGNMENT: dict[str, tuple[str, str, list[str]]] = {
    "container/gpu/utilizations": ("ALIGN_MEAN", "REDUCE_MEAN", []),
    "container/gpu/memory_utilizations": ("ALIGN_MEAN", "REDUCE_MEAN", []),
    "container/memory/utilizations": ("ALIGN_MEAN", "REDUCE_MEAN", []),
    "container/cpu/utilizations": ("ALIGN_MEAN", "REDUCE_MEAN", []),
    "container/instance_count": ("ALIGN_MAX", "REDUCE_SUM", ["metric.labels.state"]),
    "request_count": ("ALIGN_RATE", "REDUCE_SUM", ["metric.labels.response_code_class"]),
    "request_latencies": ("ALIGN_PERCENTILE_95", "REDUCE_MAX", []),
}


def _is_local(endpoint: str) -> bool:
    host = endpoint.split("://", 1)[-1].split(":", 1)[0]
    return host in ("127.0.0.1", "localhost", "::1", "[::1]")


class CloudMonitoringMetrics:
    def __init__(self, settings: Settings, *, clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep) -> None:
        self._settings = settings
        self._clock = clock
        self._sleep = sleep
        self._client: monitoring_v3.MetricServiceClient | None = None
        self._project = ""
        self._pool = BlockingPool("Cloud Monitoring", settings.cloud_client_threads)

    async def aclose(self) -> None:
        """Close the gRPC channel (cancelling calls still in flight, which frees their threads) and the pool.
        A channel left to interpreter shutdown can crash it: gRPC's threads outlive Python's finalisation."""
        self._pool.shutdown()
        if self._client is not None:
            self._client.transport.close()
            self._client = None

    def _get_client(self) -> monitoring_v3.MetricServiceClient:
        from google.cloud import monitoring_v3

        if self._client is None:
            creds, project = cloud_credentials(self._settings)
            endpoint = self._settings.cloud_monitoring_api_endpoint
            if endpoint and _is_local(endpoint):
                import grpc
                from google.cloud.monitoring_v3.services.metric_service.transports import (
                    MetricServiceGrpcTransport,
                )

                channel = grpc.insecure_channel(endpoint.split("://", 1)[-1])
                transport = MetricServiceGrpcTransport(channel=channel)
                self._client = monitoring_v3.MetricServiceClient(transport=transport)
            else:
                opts = ClientOptions(api_endpoint=endpoint) if endpoint else None
                self._client = monitoring_v3.MetricServiceClient(credentials=creds, client_options=opts)
            self._project = project
        return self._client

    async def series(
        self, service: str, metric: str, minutes: int, *, revision: str | None = None
    ) -> list[MetricSeries]:
        """One query, retried on the library's transient errors (429, 500, 503, connection) by the shared
        policy until CLOUD_CALL_DEADLINE_S; each attempt's own timeout is what is left of it, so a blocked
        thread (it cannot be killed) is free again by then."""
        budget = self._settings.cloud_call_deadline_s
        ends = self._clock() + budget
        policy = RetryPolicy(
            what=f"Cloud Monitoring: {metric}",
            transient=lambda exc: isinstance(exc, Exception) and gretry.if_transient_error(exc),
            budget_s=budget,
            initial_s=0.2,
            max_s=2.0,
            jitter_s=0.2,
            clock=self._clock,
            sleep=self._sleep,
            log=log,
        )

        async def attempt() -> list[MetricSeries]:
            left = max(0.5, ends - self._clock())
            return await self._pool.run(self._series, service, metric, minutes, left, revision)

        try:
            return await retry_call(policy, attempt)
        except gexc.PermissionDenied as exc:
            raise UserFacingError(
                f"Cloud Monitoring: permission denied ({exc.message}).",
                "Grant the bot's service account roles/monitoring.viewer.",
            ) from None
        except gexc.GoogleAPICallError as exc:
            raise UserFacingError(f"Cloud Monitoring could not list {metric} ({exc.message or exc}).") from None

    def _series(
        self, service: str, metric: str, minutes: int, timeout_s: float, revision: str | None = None
    ) -> list[MetricSeries]:
        from google.cloud import monitoring_v3

        client = self._get_client()
        now = time.time()
        interval = monitoring_v3.TimeInterval(
            end_time=timestamp_pb2.Timestamp(seconds=int(now), nanos=int(now % 1 * 1e9)),  # up to this moment
            start_time=timestamp_pb2.Timestamp(seconds=int(now - minutes * 60)),
        )
        aligner_name, reducer_name, group_by = ALIGNMENT.get(metric, ("ALIGN_MEAN", "REDUCE_MEAN", []))
        aligner = getattr(monitoring_v3.Aggregation.Aligner, aligner_name)
        reducer = getattr(monitoring_v3.Aggregation.Reducer, reducer_name)
        period = alignment_period_s(minutes)  # at most ~30 points, whole minutes
        aggregation = monitoring_v3.Aggregation(
            alignment_period=duration_pb2.Duration(seconds=period),
            per_series_aligner=aligner,
            cross_series_reducer=reducer,
            group_by_fields=group_by,
        )
        flt = (
            f'metric.type = "run.googleapis.com/{metric}" AND resource.type = "cloud_run_revision" '
            f'AND resource.labels.service_name = "{service}"'
        )
        if revision:  # the cloud_run_revision resource's revision_name label (Monitoring's resource list)
            flt += f' AND resource.labels.revision_name = "{revision}"'

        request = monitoring_v3.ListTimeSeriesRequest(
            name=f"projects/{self._project}",
            filter=flt,
            interval=interval,
            aggregation=aggregation,
            view=monitoring_v3.ListTimeSeriesRequest.TimeSeriesView.FULL,
        )
        # One attempt (the library's own 90 s retry is off: `series` retries), every page within `timeout_s`.
        pager = client.list_time_series(request=request, retry=None, timeout=timeout_s)
        return [_to_series(metric, ts) for ts in pager]


def _to_series(metric: str, ts: Any) -> MetricSeries:
    from google.cloud import monitoring_v3

    labels = {**dict(ts.resource.labels), **dict(ts.metric.labels)}
    points = []
    for p in ts.points:
        v = p.value
        kind = monitoring_v3.TypedValue.pb(v).WhichOneof("value")
        if kind == "distribution_value":
            value = float(v.distribution_value.mean)
        elif kind in ("double_value", "int64_value"):
            value = float(getattr(v, kind))
        elif kind == "bool_value":
            value = 1.0 if v.bool_value else 0.0
        else:
            continue
        points.append(MetricPoint(at=p.interval.end_time, value=value))
    points.sort(key=lambda pt: pt.at)
    return MetricSeries(metric=metric, labels=labels, points=points)


def make_metrics(settings: Settings) -> CloudMonitoringMetrics | None:
    """The Metrics port, unless it cannot work: anonymous credentials only reach a local stand-in endpoint."""
    if settings.google_anonymous_credentials and not settings.cloud_monitoring_api_endpoint:
        return None
    return CloudMonitoringMetrics(settings)

"""The Metrics port for Azure Container Apps: Azure Monitor platform metrics of the container app's ARM resource
through azure-mgmt-monitor's async client (GET {resourceUri}/providers/Microsoft.Insights/metrics,
api-version 2024-02-01, the SDK's _metrics_operations.py). azure-monitor-query 2.0 no longer ships the metrics
clients; its README sends resource metrics to azure-mgmt-monitor.

The callers ask for Cloud Run's metric names (skills/observe/service_metrics.py, revision_compare.py); MAPPING says
which ACA metric answers each, from "Supported metrics for Microsoft.App/containerApps"
(learn.microsoft.com/azure/azure-monitor/reference/supported-metrics/microsoft-app-containerapps-metrics):
Requests (Count; dimensions revisionName, podName, statusCodeCategory, statusCode), Replicas (Count; revisionName,
deploymentName), CpuPercentage and MemoryPercentage (Percent, preview; podName). That list names no GPU metric and
no request latency, so those figures are refused with a UserFacingError (the callers show it per figure).

Points come back as Cloud Monitoring's do: one per interval, stamped at the interval's end (Azure stamps its start),
requests as a rate per second, percentages as ratios; Cloud Run's labels the callers read are translated
(statusCodeCategory "2xx" -> response_code_class "2xx", revisionName -> revision_name).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)

from bot.adapters.azure_client import LazyAzureClient
from skills.errors import CloudUnavailable, InvalidInput, NotFound, UserFacingError
from skills.logs.redact import redact
from skills.observe.service_metrics import alignment_period_s
from skills.ports import MetricPoint, MetricSeries

NAMESPACE = "Microsoft.App/containerApps"
# Azure Monitor's time grains (the metrics REST API's interval values); a period between two takes the next.
GRAINS_MIN = (1, 5, 15, 30, 60, 360, 720, 1440)
_APP = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")
_REVISION = re.compile(r"^[a-z][a-z0-9-]{0,62}[a-z0-9]$")


@dataclass(frozen=True)
class AcaMetric:
    name: str  # the metric's name in the REST API
    aggregation: str  # Total, Maximum, Average (one of the metric's supported aggregations)
    split: str = ""  # the ACA dimension split into series
    label: str = ""  # the Cloud Run label that dimension becomes
    scale: float = 1.0
    per_second: bool = False  # a count per interval, given as a rate like Cloud Run's ALIGN_RATE
    by_revision: bool = False  # has the revisionName dimension (a `revision` can be asked)


# Cloud Run metric (run.googleapis.com/...) -> the ACA metric that answers it, or why none does.
MAPPING: dict[str, AcaMetric | str] = {
    "request_count": AcaMetric(
        "Requests", "Total", "statusCodeCategory", "response_code_class", per_second=True, by_revision=True
    ),
    "container/instance_count": AcaMetric("Replicas", "Maximum", "revisionName", "revision_name", by_revision=True),
    "container/cpu/utilizations": AcaMetric("CpuPercentage", "Average", scale=0.01),
    "container/memory/utilizations": AcaMetric("MemoryPercentage", "Average", scale=0.01),
    "container/gpu/utilizations": "Azure Monitor lists no GPU utilisation metric for container apps",
    "container/gpu/memory_utilizations": "Azure Monitor lists no GPU memory metric for container apps",
    "request_latencies": "Azure Monitor lists no request latency metric for container apps",
}
_LABELS = {"statusCodeCategory": "response_code_class", "revisionName": "revision_name"}


def grain(minutes: int) -> timedelta:
    """The Azure Monitor interval for a window of `minutes`: the callers' alignment period (at most ~30 points), rounded
    up to a time grain Azure Monitor accepts."""
    period = alignment_period_s(minutes) // 60
    return timedelta(minutes=next((g for g in GRAINS_MIN if g >= period), GRAINS_MIN[-1]))


def iso_duration(d: timedelta) -> str:
    m = int(d.total_seconds() // 60)
    return f"PT{m}M" if m < 60 else f"PT{m // 60}H" if m < 1440 else f"P{m // 1440}D"


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class AcaMetrics:
    source = "Azure Monitor"  # status heads its figures with it
    # Figures named as Azure Monitor names ACA's metric (status would say Cloud Run's "Instances").
    labels = {"container/instance_count": "Replicas"}

    def __init__(
        self,
        subscription_id: str,
        resource_group: str,
        *,
        credential: Any = None,
        base_url: str | None = None,
        connection_verify: str | bool | None = None,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self.subscription_id = subscription_id
        self.resource_group = resource_group
        self._base_url = base_url  # None: management.azure.com
        self._now = now or (lambda: datetime.now(UTC))  # the sandbox's clock there
        self._azure = LazyAzureClient(self._make, credential, connection_verify)

    def resource_uri(self, app: str) -> str:
        # without the leading slash: the SDK puts one before it ("/{resourceUri}/providers/...")
        return (
            f"subscriptions/{self.subscription_id}/resourceGroups/{self.resource_group}"
            f"/providers/Microsoft.App/containerApps/{app}"
        )

    def _make(self, credential: Any, **kw: Any) -> Any:
        from azure.mgmt.monitor.aio import MonitorManagementClient  # a slow import few processes need

        return MonitorManagementClient(credential, self.subscription_id, base_url=self._base_url, **kw)

    def _monitor(self) -> Any:
        return self._azure.get()

    async def aclose(self) -> None:
        await self._azure.aclose()

    async def series(
        self, service: str, metric: str, minutes: int, *, revision: str | None = None
    ) -> list[MetricSeries]:
        if not _APP.match(service):
            raise InvalidInput(f"{service!r} is not a container app name.")
        if revision and not _REVISION.match(revision):
            raise InvalidInput(f"{revision!r} is not a container app revision name.")
        spec = MAPPING.get(metric)
        if spec is None:
            raise UserFacingError(f"Azure Container Apps has no counterpart of Cloud Run's {metric} metric.")
        if isinstance(spec, str):
            raise UserFacingError(f"{spec} ({metric} has no counterpart on Azure Container Apps).")
        if revision and not spec.by_revision:
            raise UserFacingError(f"Azure Monitor's {spec.name} metric of a container app is not per revision.")
        step = grain(minutes)
        end = self._now()
        start = end - timedelta(minutes=minutes)
        filters = []
        if revision:
            filters.append(f"revisionName eq '{revision}'")
        if spec.split and not (revision and spec.split == "revisionName"):
            filters.append(f"{spec.split} eq '*'")  # one series per value of the dimension
        try:
            response = await self._monitor().metrics.list(
                self.resource_uri(service),
                timespan=f"{_iso(start)}/{_iso(end)}",
                interval=iso_duration(step),
                metricnames=spec.name,
                aggregation=spec.aggregation,
                filter=" and ".join(filters) or None,
                metricnamespace=NAMESPACE,
            )
        except ResourceNotFoundError as exc:
            raise NotFound(f"Azure Monitor: container app {service}: {_reason(exc)}") from None
        except ClientAuthenticationError as exc:
            raise CloudUnavailable(
                f"Azure refused the bot's credentials for Azure Monitor: {_reason(exc)}",
                "Check the bot's Azure identity (az login / managed identity).",
            ) from None
        except HttpResponseError as exc:
            if exc.status_code == 403:
                raise CloudUnavailable(
                    f"Azure Monitor refused to read {service}'s metrics ({_reason(exc)}).",
                    "Grant the bot's identity the Monitoring Reader role on the resource group.",
                ) from None
            raise UserFacingError(f"Azure Monitor could not list {spec.name} ({_reason(exc)}).") from None
        except (ServiceRequestError, ServiceResponseError) as exc:
            raise CloudUnavailable(f"Azure Monitor could not be reached: {redact(str(exc))[:200]}") from None
        return [_series(metric, spec, ts, step) for m in response.value or [] for ts in m.timeseries or []]


def _series(metric: str, spec: AcaMetric, ts: Any, step: timedelta) -> MetricSeries:
    labels = {}
    for md in ts.metadatavalues or []:
        dim = md.name.value if md.name is not None else ""
        labels[_LABELS.get(dim, dim)] = str(md.value or "")
    points = []
    field = spec.aggregation.lower()
    for v in ts.data or []:
        value = getattr(v, field, None)
        if value is None:  # Azure Monitor's interval without data
            continue
        value = float(value) * spec.scale
        if spec.per_second:
            value /= step.total_seconds()
        at = v.time_stamp if v.time_stamp.tzinfo else v.time_stamp.replace(tzinfo=UTC)
        points.append(MetricPoint(at=at + step, value=value))
    points.sort(key=lambda p: p.at)
    return MetricSeries(metric=metric, labels=labels, points=points)


def _reason(exc: HttpResponseError) -> str:
    """Azure Monitor's `code: message` (its metrics errors are {"code", "message"} at the top level)."""
    err = exc.error
    model = getattr(exc, "model", None)
    code = str(getattr(err, "code", "") or getattr(model, "code", "") or "")
    message = str(getattr(err, "message", "") or getattr(model, "message", "") or exc.message or "")
    return redact(f"{code}: {message}" if code else message)[:300]

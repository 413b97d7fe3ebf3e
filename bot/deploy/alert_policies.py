"""The Cloud Monitoring alert policies that feed the bot: one policy per failure, so an incident names its cause.

Each condition names its metric and where the name comes from:
- Cloud Run's own metrics (https://cloud.google.com/monitoring/api/metrics_gcp#gcp-run), resource type
  `cloud_run_revision` with labels service_name and revision_name: `run.googleapis.com/request_count` (label
  response_code_class: "2xx".."5xx"), `run.googleapis.com/container/completed_probe_count` (labels probe_type,
  is_healthy: "Number of completed health check probes and their results").
- vLLM's Prometheus metrics (vllm/v1/metrics/loggers.py: `vllm:kv_cache_usage_perc`, `vllm:num_requests_waiting`,
  `vllm:time_to_first_token_seconds`) as Managed Service for Prometheus stores them: the Prometheus name kept,
  colon included, with the kind appended, `prometheus.googleapis.com/vllm:kv_cache_usage_perc/gauge`, resource type
  `prometheus_target` (the kind suffixes: GoogleCloudPlatform/opentelemetry-operations-go,
  exporter/collector/googlemanagedprometheus/naming.go; the colon kept: GKE's vLLM tutorials query
  `prometheus.googleapis.com/vllm:num_requests_running/gauge`). On Cloud Run the Managed Service for Prometheus
  sidecar writes them (https://cloud.google.com/run/docs/monitoring-managed-prometheus-sidecar). Its target labels
  (GoogleCloudPlatform/run-gmp-sidecar, confgenerator/config.go, endpointScrapeConfig and relabelingsForMetadata):
  the resource labels `cluster` = "__run__" and `namespace` = the Cloud Run service (K_SERVICE), and by default the
  metric labels `service_name`, `revision_name`, `configuration_name`; so each vLLM condition is narrowed to the
  service by `resource.labels.namespace` and split by `metric.labels.revision_name`, like Cloud Run's own ones.
  In PromQL (the "waiting for 30 s" condition) the name is the Prometheus one, `vllm:num_requests_waiting`, and the
  resource labels are plain labels (`namespace`, `cluster`).
  Older vLLM called the KV gauge `vllm:gpu_cache_usage_perc`; pass `kv_cache_metric` for those.
- Cloud Run writes a revision's start-up failures (probe failures, "Container called exit(1)") to its system log,
  whose logName ends in `run.googleapis.com%2Fvarlog%2Fsystem` (as it appears in exported Cloud Run entries and in
  public log-match alert configurations), at severity ERROR or above; a log-match condition turns one into an
  incident. The filter is in the Logging query language (https://cloud.google.com/logging/docs/view/logging-query-language).
Limits the conditions respect (google-cloud-monitoring's AlertPolicy field docs): a threshold's duration is a
multiple of a minute, so "waiting > 0 for 30 s" is a PromQL condition (its duration has no such rule, its
evaluation interval is a multiple of 30 s); a log-match condition is its policy's only condition and needs a
notification rate limit. The thresholds' defaults are the bot's choices (FIELD_NOTES: KV usage > 0.85, waiting
> 0 for over 30 s); the 5xx rate and TTFT p95 defaults are estimates for one L4 serving a 12B-26B QAT model
(single-stream TTFT ~0.12 s reported; 5 s p95 means requests queue), settable on the command line.
"""

from __future__ import annotations

from datetime import timedelta

from google.cloud.monitoring_v3 import Aggregation, AlertPolicy, ComparisonType
from pydantic import BaseModel, ConfigDict, Field

RUN_CLUSTER = "__run__"  # the sidecar's `cluster` label on Cloud Run (run-gmp-sidecar, confgenerator/config.go)
MANAGED_BY = "gemma-sre"  # user label value that marks what setup owns; the policy key says which one


class AlertThresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kv_cache_usage: float = Field(0.85, gt=0, lt=1, description="vLLM KV-cache usage (fraction) above which to alert")
    waiting_for_s: int = Field(30, ge=0, le=3600, description="alert when requests wait this long (seconds)")
    ttft_p95_s: float = Field(5.0, gt=0, le=600, description="p95 time to first token (seconds)")
    error_rate_per_s: float = Field(0.05, ge=0, description="5xx responses per second, averaged over a minute")
    kv_cache_metric: str = Field("vllm:kv_cache_usage_perc", pattern=r"^vllm:[a-z_]+$")


def _filter(metric: str, resource: str, *extra: str) -> str:
    return " AND ".join([f'metric.type = "{metric}"', f'resource.type = "{resource}"', *extra])


def _threshold(
    name: str,
    filter_: str,
    value: float,
    *,
    aligner: int,  # Aggregation.Aligner (a proto enum, an int to mypy)
    reducer: int,
    group_by: list[str],
    for_s: int,
) -> AlertPolicy.Condition:
    return AlertPolicy.Condition(
        display_name=name,
        condition_threshold=AlertPolicy.Condition.MetricThreshold(
            filter=filter_,
            comparison=ComparisonType.COMPARISON_GT,
            threshold_value=value,
            duration=timedelta(seconds=for_s),
            aggregations=[
                Aggregation(
                    alignment_period=timedelta(seconds=60),
                    per_series_aligner=aligner,
                    cross_series_reducer=reducer,
                    group_by_fields=group_by,
                )
            ],
        ),
    )


def desired_policies(service: str, thresholds: AlertThresholds, channels: list[str]) -> dict[str, AlertPolicy]:
    """key -> the policy as setup wants it (no names: the API assigns them)."""
    svc = f'resource.labels.service_name = "{service}"'
    by_revision = ["resource.labels.revision_name"]
    # The Prometheus sidecar's target labels on Cloud Run (see the module docstring)
    vllm_svc = (f'resource.labels.cluster = "{RUN_CLUSTER}"', f'resource.labels.namespace = "{service}"')
    vllm_by_revision = ["metric.labels.revision_name"]
    t = thresholds
    conditions: dict[str, tuple[str, AlertPolicy.Condition]] = {
        "startup-probe-failed": (
            "A revision's health checks fail (start-up or liveness probe)",
            _threshold(
                "completed_probe_count is_healthy=false > 0",
                _filter(
                    "run.googleapis.com/container/completed_probe_count",
                    "cloud_run_revision",
                    svc,
                    "metric.labels.is_healthy = false",  # a BOOL label: bare, as public configurations write it
                ),
                0,
                aligner=Aggregation.Aligner.ALIGN_SUM,
                reducer=Aggregation.Reducer.REDUCE_SUM,
                group_by=by_revision,
                for_s=0,
            ),
        ),
        "startup-failure-logs": (
            "A revision fails to start (Cloud Run system log, ERROR or above)",
            AlertPolicy.Condition(
                display_name="Cloud Run system log: revision start-up error",
                condition_matched_log=AlertPolicy.Condition.LogMatch(
                    filter=(
                        f'resource.type = "cloud_run_revision" AND resource.labels.service_name = "{service}" '
                        'AND logName:"run.googleapis.com%2Fvarlog%2Fsystem" AND severity >= ERROR'
                    ),
                    label_extractors={"revision": "EXTRACT(resource.labels.revision_name)"},
                ),
            ),
        ),
        "5xx-rate": (
            "The model service answers 5xx",
            _threshold(
                f"request_count 5xx > {t.error_rate_per_s}/s",
                _filter(
                    "run.googleapis.com/request_count",
                    "cloud_run_revision",
                    svc,
                    'metric.labels.response_code_class = "5xx"',
                ),
                t.error_rate_per_s,
                aligner=Aggregation.Aligner.ALIGN_RATE,
                reducer=Aggregation.Reducer.REDUCE_SUM,
                group_by=by_revision,
                for_s=60,
            ),
        ),
        "kv-cache-usage": (
            f"vLLM's KV cache is over {t.kv_cache_usage:.0%} full",
            _threshold(
                f"{t.kv_cache_metric} > {t.kv_cache_usage}",
                _filter(f"prometheus.googleapis.com/{t.kv_cache_metric}/gauge", "prometheus_target", *vllm_svc),
                t.kv_cache_usage,
                aligner=Aggregation.Aligner.ALIGN_MEAN,
                reducer=Aggregation.Reducer.REDUCE_MAX,
                group_by=vllm_by_revision,
                for_s=60,
            ),
        ),
        "requests-waiting": (
            f"Requests wait in vLLM's queue for {t.waiting_for_s} s",
            AlertPolicy.Condition(
                display_name=f"vllm:num_requests_waiting > 0 for {t.waiting_for_s}s",
                condition_prometheus_query_language=AlertPolicy.Condition.PrometheusQueryLanguageCondition(
                    query=(
                        f'max by (revision_name) (vllm:num_requests_waiting{{cluster="{RUN_CLUSTER}", '
                        f'namespace="{service}"}}) > 0'
                    ),
                    duration=timedelta(seconds=t.waiting_for_s),
                    evaluation_interval=timedelta(seconds=30),
                    # Setup runs before vLLM's sidecar has written a point; without this the API checks that
                    # the metric exists and refuses the policy (the field's documentation in alert.py).
                    disable_metric_validation=True,
                ),
            ),
        ),
        "ttft-p95": (
            f"p95 time to first token is over {t.ttft_p95_s:g} s",
            _threshold(
                f"vllm:time_to_first_token_seconds p95 > {t.ttft_p95_s:g}s",
                _filter(
                    "prometheus.googleapis.com/vllm:time_to_first_token_seconds/histogram",
                    "prometheus_target",
                    *vllm_svc,
                ),
                t.ttft_p95_s,
                aligner=Aggregation.Aligner.ALIGN_DELTA,
                reducer=Aggregation.Reducer.REDUCE_PERCENTILE_95,
                group_by=vllm_by_revision,
                for_s=120,
            ),
        ),
    }
    severity = {"startup-probe-failed": "critical", "startup-failure-logs": "critical", "5xx-rate": "error"}
    out: dict[str, AlertPolicy] = {}
    for key, (title, condition) in conditions.items():
        level = severity.get(key, "warning")
        policy = AlertPolicy(
            display_name=f"gemma-sre: {service}: {title}",
            documentation=AlertPolicy.Documentation(
                content=f"Opens an incident thread in Slack through gemma-sre, with a diagnosis of `{service}`.",
                mime_type="text/markdown",
            ),
            # The bot reads the service from the incident's resource labels, or from the policy's `service`
            # label (handlers/alerts/gcp.py): vLLM's series (prometheus_target) name it only as `namespace`.
            user_labels={"managed-by": MANAGED_BY, "gemma-sre-policy": key, "service": service, "severity": level},
            severity=getattr(AlertPolicy.Severity, level.upper()),
            conditions=[condition],
            combiner=AlertPolicy.ConditionCombinerType.OR,
            notification_channels=channels,
        )
        if "condition_matched_log" in condition:  # required for log-match policies
            policy.alert_strategy = AlertPolicy.AlertStrategy(
                notification_rate_limit=AlertPolicy.AlertStrategy.NotificationRateLimit(period=timedelta(minutes=5))
            )
        out[key] = policy
    return out

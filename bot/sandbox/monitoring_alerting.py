"""Cloud Monitoring's AlertPolicyService and NotificationChannelService as a strict in-process gRPC stand-in.

Served on the same server as the MetricService stand-in (bot/sandbox/monitoring_grpc.py), with the messages of
google-cloud-monitoring itself (google.cloud.monitoring_v3.types). What it enforces comes from the field
documentation of those messages (alert.py, common.py, notification.py in google-cloud-monitoring, generated
from google/monitoring/v3/*.proto):
- names: the parent is `projects/[PROJECT_ID_OR_NUMBER]`; a policy or channel is `<parent>/alertPolicies/ID` or
  `<parent>/notificationChannels/ID`; a malformed name is INVALID_ARGUMENT, an unknown one NOT_FOUND;
- create: "do not include the name field" in the policy nor in its conditions; the service assigns both;
- a policy has a display name (up to 512 characters) and "from one to six conditions", each with a display name
  and exactly one condition kind; a LogMatch condition must be the only one, and the policy then needs
  `alert_strategy.notification_rate_limit` ("Required for log-based alerting policies");
- MetricThreshold: a filter (at most 2048 characters) that "must specify the metric type and the resource type",
  in the Monitoring filter language (https://cloud.google.com/monitoring/api/v3/filters); only COMPARISON_GT and
  COMPARISON_LT; `duration` a multiple of a minute; an aligner other than ALIGN_NONE needs an alignment period of
  at least 60 s (at most 90,000 s for alerting policies); a cross-series reducer needs an aligner;
- PromQL: a non-empty query; `duration` non-negative; `evaluation_interval` a positive multiple of 30 s; the
  metrics it names must exist unless `disable_metric_validation` ("allows alerting policies to be defined on
  metrics that do not yet exist"): this stand-in knows those in `prometheus_metrics` and looks only for
  namespaced names (vllm:...); the refusal's status code, INVALID_ARGUMENT, is our assumption;
- user labels: keys start with a letter; keys and values use lowercase letters, digits, `_` and `-`, at most 63;
- notification channels named by a policy must exist; a channel's type must be a known descriptor and its labels
  exactly that descriptor's (required ones present, no others).
Metric types: Cloud Run's own (https://cloud.google.com/monitoring/api/metrics_gcp#gcp-run) by name; Managed
Service for Prometheus series by their naming, `prometheus.googleapis.com/<name>/<kind>`. Anything else is
INVALID_ARGUMENT. The status codes are gRPC's; the message texts are ours, not Google's wording.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable
from typing import Any, NoReturn

import grpc
from google.cloud.monitoring_v3.types import alert, alert_service, common, notification, notification_service
from google.protobuf import empty_pb2

_PROJECT = re.compile(r"^projects/[a-z0-9][a-z0-9-]{0,61}[a-z0-9]$|^projects/[0-9]+$")
_LABEL = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")

# Cloud Run metric types (https://cloud.google.com/monitoring/api/metrics_gcp#gcp-run), the ones a policy here uses
# or the bot reads; the list is not exhaustive, an unlisted real type would be refused by this stand-in only.
CLOUD_RUN_METRICS = frozenset(
    "run.googleapis.com/" + m
    for m in (
        "request_count",
        "request_latencies",
        "container/instance_count",
        "container/cpu/utilizations",
        "container/memory/utilizations",
        "container/gpu/utilizations",
        "container/gpu/memory_utilizations",
        "container/startup_latencies",
        "container/completed_probe_count",
        "container/completed_probe_attempt_count",
        "container/billable_instance_time",
        "container/max_request_concurrencies",
    )
)
# Managed Service for Prometheus keeps the Prometheus name (colons included) and adds the kind:
# prometheus.googleapis.com/<name>/gauge|counter|histogram|summary|unknown (and summary:counter etc.).
_PROMETHEUS = re.compile(
    r"^prometheus\.googleapis\.com/[a-zA-Z_:][a-zA-Z0-9_:]*/(gauge|counter|histogram|summary|unknown)(:counter)?$"
)
# Each resource type's labels: cloud_run_revision's (https://cloud.google.com/monitoring/api/resources#tag_cloud_run_revision),
# prometheus_target's as Managed Service for Prometheus writes them (the sidecar's protected target labels,
# GoogleCloudPlatform/run-gmp-sidecar confgenerator/config.go). A filter or group-by naming another resource label
# is refused here: our choice (such a filter would match nothing), not a documented refusal of the API.
RESOURCE_LABELS: dict[str, frozenset[str]] = {
    "cloud_run_revision": frozenset({"project_id", "service_name", "revision_name", "location", "configuration_name"}),
    "prometheus_target": frozenset({"project_id", "location", "cluster", "namespace", "job", "instance"}),
}
RESOURCE_TYPES = frozenset(RESOURCE_LABELS)

# Channel types and their labels (projects.notificationChannelDescriptors: webhook_tokenauth carries the URL,
# token in its query string; webhook_basicauth adds user and password; pubsub names the topic).
CHANNEL_LABELS: dict[str, tuple[frozenset[str], frozenset[str]]] = {  # type -> (required, optional)
    "webhook_tokenauth": (frozenset({"url"}), frozenset()),
    "webhook_basicauth": (frozenset({"url", "username", "password"}), frozenset()),
    "pubsub": (frozenset({"topic"}), frozenset()),
    "email": (frozenset({"email_address"}), frozenset()),
}

# One term of the filter language: selector, operator, value (a quoted string, a bare word, or a function).
_SELECTOR = r"(?:metric\.type|resource\.type|(?:metric|resource)\.labels?\.[a-zA-Z_][a-zA-Z0-9_]*)"
_QUOTED = r'"(?:[^"\\]|\\.)*"'
_VALUE = rf"(?:{_QUOTED}|[A-Za-z0-9_.-]+|(?:starts_with|ends_with|has_substring|one_of)\((?:\s*{_QUOTED}\s*,?)+\))"
_TERM = re.compile(rf"\s*(?P<sel>{_SELECTOR})\s*(?P<op>!=|=|:)\s*(?P<val>{_VALUE})\s*")
_JOIN = re.compile(r"\s*(AND|OR)\s+")
# The LogEntry fields a Logging query compares (https://cloud.google.com/logging/docs/view/logging-query-language;
# LogEntry: https://cloud.google.com/logging/docs/reference/v2/rest/v2/LogEntry): `log_name` is not one of them.
LOG_FIELDS = frozenset(
    {"resource", "logName", "severity", "textPayload", "jsonPayload", "protoPayload", "labels", "timestamp",
     "receiveTimestamp", "insertId", "httpRequest", "operation", "trace", "spanId", "sourceLocation"}
)  # fmt: skip
_LOG_FIELD = re.compile(r"(?<![\w.\"])([A-Za-z_][\w.]*)\s*(?:=~|!~|!=|>=|<=|[:=<>])")
_PROM_NAME = re.compile(r"\b[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_:]+")  # namespaced names (vllm:...), not functions


class FilterError(ValueError):
    pass


def parse_filter(text: str) -> list[tuple[str, str, str]]:
    """The (selector, operator, value) terms of a Monitoring filter joined by AND/OR, or FilterError."""
    terms: list[tuple[str, str, str]] = []
    pos = 0
    while True:
        m = _TERM.match(text, pos)
        if not m:
            raise FilterError(f"cannot parse the filter at {pos}: {text[pos : pos + 40]!r}")
        terms.append((m["sel"], m["op"], m["val"].strip('"')))
        pos = m.end()
        if pos == len(text):
            return terms
        j = _JOIN.match(text, pos)
        if not j:
            raise FilterError(f"expected AND or OR at {pos}: {text[pos : pos + 40]!r}")
        pos = j.end()


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    context.abort(code, message)
    raise AssertionError("unreachable: abort raises")


class AlertingStandIn:
    def __init__(self) -> None:
        self.policies: dict[str, alert.AlertPolicy] = {}
        self.channels: dict[str, notification.NotificationChannel] = {}
        self.calls: list[str] = []  # method names, in order
        self.fail_with: grpc.StatusCode | None = None  # every call fails (e.g. PERMISSION_DENIED)
        self.prometheus_metrics: set[str] = set()  # Prometheus names with points written (vllm:...)
        self._ids = itertools.count(1000)
        self._lock = threading.Lock()

    # --- helpers -----------------------------------------------------------------------------------------
    def _enter(self, method: str, context: grpc.ServicerContext) -> None:
        with self._lock:
            self.calls.append(method)
        if self.fail_with is not None:
            _abort(context, self.fail_with, "simulated failure")

    def _project(self, name: str, context: grpc.ServicerContext) -> str:
        if not _PROJECT.match(name):
            _abort(
                context, grpc.StatusCode.INVALID_ARGUMENT, f"name must be projects/[PROJECT_ID_OR_NUMBER], got {name!r}"
            )
        return name

    def _page(
        self, items: list[Any], page_size: int, token: str, context: grpc.ServicerContext
    ) -> tuple[list[Any], str]:
        if page_size < 0:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "page_size must not be negative")
        try:
            start = int(token) if token else 0
        except ValueError:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"invalid page_token {token!r}")
        size = page_size or 100
        chunk = items[start : start + size]
        return chunk, str(start + size) if start + size < len(items) else ""

    # --- validation --------------------------------------------------------------------------------------
    def _check_labels(self, labels: Any, where: str, context: grpc.ServicerContext) -> None:
        for k, v in labels.items():
            if not _LABEL.match(k) or not _LABEL_VALUE.match(v):
                _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}: invalid user label {k}={v!r}")

    def _check_metric_filter(self, text: str, where: str, context: grpc.ServicerContext) -> str:
        if not text:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}.filter is required")
        if len(text) > 2048:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}.filter is longer than 2048 characters")
        try:
            terms = parse_filter(text)
        except FilterError as exc:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}.filter: {exc}")
        metric = [v for s, op, v in terms if s == "metric.type" and op == "="]
        resource = [v for s, op, v in terms if s == "resource.type" and op == "="]
        if len(metric) != 1 or len(resource) != 1:
            _abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{where}.filter must name one metric.type and one resource.type",
            )
        if metric[0] not in CLOUD_RUN_METRICS and not _PROMETHEUS.match(metric[0]):
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}.filter: unknown metric type {metric[0]!r}")
        if resource[0] not in RESOURCE_TYPES:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}.filter: unknown resource type {resource[0]!r}")
        expected = "prometheus_target" if metric[0].startswith("prometheus.googleapis.com/") else "cloud_run_revision"
        if resource[0] != expected:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}.filter: {metric[0]} is written for {expected}")
        self._check_resource_labels(
            [s.split(".", 2)[2] for s, _, _ in terms if s.startswith("resource.label")], resource[0], where, context
        )
        return resource[0]

    def _check_resource_labels(
        self, names: list[str], resource: str, where: str, context: grpc.ServicerContext
    ) -> None:
        unknown = sorted(set(names) - RESOURCE_LABELS[resource])
        if unknown:
            _abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{where}: {resource} has no resource label {', '.join(unknown)}",
            )

    def _check_aggregation(self, agg: common.Aggregation, where: str, context: grpc.ServicerContext) -> None:
        aligner = agg.per_series_aligner
        period = agg.alignment_period.total_seconds() if "alignment_period" in agg else 0
        none = common.Aggregation.Aligner.ALIGN_NONE
        if aligner != none and not 60 <= period <= 90_000:
            _abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{where}.alignment_period must be 60..90000 s with an aligner",
            )
        if agg.cross_series_reducer != common.Aggregation.Reducer.REDUCE_NONE and aligner == none:
            _abort(
                context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}.cross_series_reducer needs a per_series_aligner"
            )

    def _check_condition(
        self, c: alert.AlertPolicy.Condition, where: str, creating: bool, context: grpc.ServicerContext
    ) -> str:
        if creating and c.name:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}.name must not be set when creating a policy")
        if not c.display_name:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}.display_name is required")
        kind = alert.AlertPolicy.Condition.pb(c).WhichOneof("condition")
        if kind is None:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}: a condition kind is required")
        if kind == "condition_threshold":
            t = c.condition_threshold
            resource = self._check_metric_filter(t.filter, f"{where}.condition_threshold", context)
            if t.comparison not in (common.ComparisonType.COMPARISON_GT, common.ComparisonType.COMPARISON_LT):
                _abort(
                    context,
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"{where}: only COMPARISON_GT and COMPARISON_LT are supported",
                )
            if t.duration.total_seconds() % 60:
                _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}.duration must be a multiple of 60 s")
            for i, agg in enumerate(t.aggregations):
                self._check_aggregation(agg, f"{where}.aggregations[{i}]", context)
                fields = list(agg.group_by_fields)
                bad = [f for f in fields if not re.match(r"^(resource|metric)\.labels?\.[a-zA-Z_][a-zA-Z0-9_]*$", f)]
                if bad:
                    _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}: malformed group_by_fields {bad}")
                self._check_resource_labels(
                    [f.split(".", 2)[2] for f in fields if f.startswith("resource.")],
                    resource,
                    f"{where}.aggregations[{i}].group_by_fields",
                    context,
                )
        elif kind == "condition_prometheus_query_language":
            q = c.condition_prometheus_query_language
            if not q.query.strip():
                _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}.query is required")
            if q.duration.total_seconds() < 0:
                _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}.duration must not be negative")
            interval = q.evaluation_interval.total_seconds() if "evaluation_interval" in q else 30
            if interval <= 0 or interval % 30:
                _abort(
                    context,
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"{where}.evaluation_interval: a positive multiple of 30 s",
                )
            named = {re.sub(r"_(bucket|sum|count)$", "", m) for m in _PROM_NAME.findall(q.query)}
            missing = sorted(named - self.prometheus_metrics)
            if missing and not q.disable_metric_validation:
                _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}: no data for {', '.join(missing)}")
        elif kind == "condition_matched_log":
            text = c.condition_matched_log.filter
            if not text.strip():
                _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}.condition_matched_log.filter is required")
            unknown = sorted({f for f in _LOG_FIELD.findall(text) if f.split(".")[0] not in LOG_FIELDS})
            if unknown:
                _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}: unknown log field(s) {', '.join(unknown)}")
        else:
            _abort(context, grpc.StatusCode.UNIMPLEMENTED, f"{where}: {kind} is not served by this stand-in")
        return kind

    def _check_policy(self, project: str, p: alert.AlertPolicy, creating: bool, context: grpc.ServicerContext) -> None:
        if creating and p.name:
            _abort(
                context, grpc.StatusCode.INVALID_ARGUMENT, "alert_policy.name must not be set when creating a policy"
            )
        if not p.display_name or len(p.display_name) > 512:
            _abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                "alert_policy.display_name is required (at most 512 characters)",
            )
        if not 1 <= len(p.conditions) <= 6:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "alert_policy.conditions: from one to six conditions")
        kinds = [
            self._check_condition(c, f"alert_policy.conditions[{i}]", creating, context)
            for i, c in enumerate(p.conditions)
        ]
        if "condition_matched_log" in kinds:
            if len(kinds) > 1:
                _abort(
                    context,
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "a condition_matched_log must be the policy's only condition",
                )
            if "period" not in p.alert_strategy.notification_rate_limit:
                _abort(
                    context,
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "log-based policies need alert_strategy.notification_rate_limit",
                )
        self._check_labels(p.user_labels, "alert_policy.user_labels", context)
        for ch in p.notification_channels:
            if not ch.startswith(project + "/notificationChannels/"):
                _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"notification channel {ch!r} is not in {project}")
            if ch not in self.channels:
                _abort(context, grpc.StatusCode.NOT_FOUND, f"notification channel {ch} does not exist")

    def _check_channel(self, project: str, ch: notification.NotificationChannel, context: grpc.ServicerContext) -> None:
        if ch.type_ not in CHANNEL_LABELS:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"unknown notification channel type {ch.type_!r}")
        required, optional = CHANNEL_LABELS[ch.type_]
        keys = set(ch.labels.keys())
        if not required <= keys or keys - required - optional:
            _abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{ch.type_} channels take labels {sorted(required | optional)}, got {sorted(keys)}",
            )
        if ch.type_ == "pubsub" and not re.match(r"^projects/[^/]+/topics/[^/]+$", ch.labels["topic"]):
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "labels.topic must be projects/P/topics/T")
        if ch.type_.startswith("webhook") and not ch.labels["url"].startswith(("https://", "http://")):
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "labels.url must be an http(s) URL")
        self._check_labels(ch.user_labels, "notification_channel.user_labels", context)

    # --- AlertPolicyService --------------------------------------------------------------------------------
    def list_policies(
        self, req: alert_service.ListAlertPoliciesRequest, context: grpc.ServicerContext
    ) -> alert_service.ListAlertPoliciesResponse:
        self._enter("ListAlertPolicies", context)
        project = self._project(req.name, context)
        if req.filter or req.order_by:
            _abort(context, grpc.StatusCode.UNIMPLEMENTED, "filter and order_by are not served by this stand-in")
        with self._lock:
            mine = [p for n, p in sorted(self.policies.items()) if n.startswith(project + "/")]
        page, token = self._page(mine, req.page_size, req.page_token, context)
        return alert_service.ListAlertPoliciesResponse(alert_policies=page, next_page_token=token, total_size=len(mine))

    def create_policy(
        self, req: alert_service.CreateAlertPolicyRequest, context: grpc.ServicerContext
    ) -> alert.AlertPolicy:
        self._enter("CreateAlertPolicy", context)
        project = self._project(req.name, context)
        if "alert_policy" not in req:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "alert_policy is required")
        policy = alert.AlertPolicy(req.alert_policy)
        self._check_policy(project, policy, True, context)
        with self._lock:
            name = f"{project}/alertPolicies/{next(self._ids)}"
            policy.name = name
            for c in policy.conditions:
                c.name = f"{name}/conditions/{next(self._ids)}"
            if "enabled" not in policy:
                policy.enabled = True
            self.policies[name] = policy
        return policy

    def update_policy(
        self, req: alert_service.UpdateAlertPolicyRequest, context: grpc.ServicerContext
    ) -> alert.AlertPolicy:
        self._enter("UpdateAlertPolicy", context)
        policy = alert.AlertPolicy(req.alert_policy)
        m = re.match(r"^(projects/[^/]+)/alertPolicies/[^/]+$", policy.name)
        if not m:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"alert_policy.name is malformed: {policy.name!r}")
        if req.update_mask.paths:
            _abort(
                context,
                grpc.StatusCode.UNIMPLEMENTED,
                "update_mask is not served by this stand-in: send the whole policy",
            )
        with self._lock:
            old = self.policies.get(policy.name)
        if old is None:
            _abort(context, grpc.StatusCode.NOT_FOUND, f"{policy.name} does not exist")
        self._check_policy(m.group(1), policy, False, context)
        known = {c.name for c in old.conditions}
        with self._lock:
            for c in policy.conditions:
                if c.name and c.name not in known:
                    _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"condition {c.name} is not in {policy.name}")
                if not c.name:  # "Conditions without names are added to the updated policy."
                    c.name = f"{policy.name}/conditions/{next(self._ids)}"
            if "enabled" not in policy:
                policy.enabled = True
            self.policies[policy.name] = policy
        return policy

    def get_policy(self, req: alert_service.GetAlertPolicyRequest, context: grpc.ServicerContext) -> alert.AlertPolicy:
        self._enter("GetAlertPolicy", context)
        with self._lock:
            found = self.policies.get(req.name)
        if found is None:
            _abort(context, grpc.StatusCode.NOT_FOUND, f"{req.name} does not exist")
        return found

    def delete_policy(
        self, req: alert_service.DeleteAlertPolicyRequest, context: grpc.ServicerContext
    ) -> empty_pb2.Empty:
        self._enter("DeleteAlertPolicy", context)
        with self._lock:
            if self.policies.pop(req.name, None) is None:
                _abort(context, grpc.StatusCode.NOT_FOUND, f"{req.name} does not exist")
        return empty_pb2.Empty()

    # --- NotificationChannelService ----------------------------------------------------------------------
    def list_channels(
        self, req: notification_service.ListNotificationChannelsRequest, context: grpc.ServicerContext
    ) -> notification_service.ListNotificationChannelsResponse:
        self._enter("ListNotificationChannels", context)
        project = self._project(req.name, context)
        if req.filter or req.order_by:
            _abort(context, grpc.StatusCode.UNIMPLEMENTED, "filter and order_by are not served by this stand-in")
        with self._lock:
            mine = [c for n, c in sorted(self.channels.items()) if n.startswith(project + "/")]
        page, token = self._page(mine, req.page_size, req.page_token, context)
        return notification_service.ListNotificationChannelsResponse(
            notification_channels=page, next_page_token=token, total_size=len(mine)
        )

    def create_channel(
        self, req: notification_service.CreateNotificationChannelRequest, context: grpc.ServicerContext
    ) -> notification.NotificationChannel:
        self._enter("CreateNotificationChannel", context)
        project = self._project(req.name, context)
        ch = notification.NotificationChannel(req.notification_channel)
        if ch.name:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "notification_channel.name must not be set when creating")
        self._check_channel(project, ch, context)
        with self._lock:
            ch.name = f"{project}/notificationChannels/{next(self._ids)}"
            if "enabled" not in ch:
                ch.enabled = True
            self.channels[ch.name] = ch
        return ch

    def update_channel(
        self, req: notification_service.UpdateNotificationChannelRequest, context: grpc.ServicerContext
    ) -> notification.NotificationChannel:
        self._enter("UpdateNotificationChannel", context)
        ch = notification.NotificationChannel(req.notification_channel)
        m = re.match(r"^(projects/[^/]+)/notificationChannels/[^/]+$", ch.name)
        if not m:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"notification_channel.name is malformed: {ch.name!r}")
        if req.update_mask.paths:
            _abort(context, grpc.StatusCode.UNIMPLEMENTED, "update_mask is not served by this stand-in")
        with self._lock:
            if ch.name not in self.channels:
                _abort(context, grpc.StatusCode.NOT_FOUND, f"{ch.name} does not exist")
        self._check_channel(m.group(1), ch, context)
        with self._lock:
            self.channels[ch.name] = ch
        return ch


def alerting_services(standin: AlertingStandIn) -> dict[str, dict[str, grpc.RpcMethodHandler]]:
    """The two services' method handlers, for serve_grpc_services."""

    def unary(fn: Callable[..., Any], req: Any, resp: Any) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(
            fn, request_deserializer=req.deserialize, response_serializer=resp.serialize
        )

    empty = grpc.unary_unary_rpc_method_handler(
        standin.delete_policy,
        request_deserializer=alert_service.DeleteAlertPolicyRequest.deserialize,
        response_serializer=empty_pb2.Empty.SerializeToString,
    )
    return {
        "google.monitoring.v3.AlertPolicyService": {
            "ListAlertPolicies": unary(
                standin.list_policies, alert_service.ListAlertPoliciesRequest, alert_service.ListAlertPoliciesResponse
            ),
            "GetAlertPolicy": unary(standin.get_policy, alert_service.GetAlertPolicyRequest, alert.AlertPolicy),
            "CreateAlertPolicy": unary(
                standin.create_policy, alert_service.CreateAlertPolicyRequest, alert.AlertPolicy
            ),
            "UpdateAlertPolicy": unary(
                standin.update_policy, alert_service.UpdateAlertPolicyRequest, alert.AlertPolicy
            ),
            "DeleteAlertPolicy": empty,
        },
        "google.monitoring.v3.NotificationChannelService": {
            "ListNotificationChannels": unary(
                standin.list_channels,
                notification_service.ListNotificationChannelsRequest,
                notification_service.ListNotificationChannelsResponse,
            ),
            "CreateNotificationChannel": unary(
                standin.create_channel,
                notification_service.CreateNotificationChannelRequest,
                notification.NotificationChannel,
            ),
            "UpdateNotificationChannel": unary(
                standin.update_channel,
                notification_service.UpdateNotificationChannelRequest,
                notification.NotificationChannel,
            ),
        },
    }

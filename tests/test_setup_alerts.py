"""`gemma-sre setup-alerts` against the strict Monitoring stand-in (AlertPolicyService, NotificationChannelService)
through google-cloud-monitoring's own clients: policies created once, a rerun changes nothing, a changed threshold
is an update, a dry run asks only List questions and says which it could not ask; and the stand-in refuses what
the real API refuses."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import grpc
import pytest
from google.api_core import exceptions as gexc
from google.cloud import monitoring_v3
from google.cloud.monitoring_v3.services.alert_policy_service.transports import AlertPolicyServiceGrpcTransport

from bot.cli import main
from bot.deploy.alert_policies import AlertThresholds, desired_policies
from bot.sandbox.monitoring_grpc import MonitoringStandIn, serve_monitoring

URL = "https://bot.example.run.app/alerts/gcp?auth_token=s3cret-token"


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[MonitoringStandIn]:
    s = MonitoringStandIn()
    with serve_monitoring(s) as addr:
        monkeypatch.setenv("CLOUD_MONITORING_API_ENDPOINT", addr)
        s.alerting.addr = addr  # type: ignore[attr-defined]
        yield s


def setup_alerts(*extra: str) -> int:
    return main(["setup-alerts", "--project", "p1", "--webhook-url", URL, *extra])


def test_creates_the_channel_and_policies_once_then_changes_nothing(
    standin: MonitoringStandIn, capsys: pytest.CaptureFixture[str]
) -> None:
    assert setup_alerts() == 0
    first = capsys.readouterr().out
    a = standin.alerting
    assert len(a.channels) == 1 and len(a.policies) == 6, first
    (channel,) = a.channels.values()
    assert channel.type_ == "webhook_tokenauth" and channel.labels["url"] == URL
    assert "s3cret-token" not in first and "auth_token=…" in first
    assert "Prometheus sidecar scrapes vLLM's /metrics on vllm-gemma4" in first  # what the vLLM conditions need
    assert all(list(p.notification_channels) == [channel.name] for p in a.policies.values())
    # vLLM's series carry no service_name: the policy's labels tell the bot which service an incident is about
    assert all(p.user_labels["service"] == "vllm-gemma4" for p in a.policies.values())
    by_key = {p.user_labels["gemma-sre-policy"]: p for p in a.policies.values()}
    assert by_key["startup-failure-logs"].user_labels["severity"] == "critical"
    assert by_key["kv-cache-usage"].severity == monitoring_v3.AlertPolicy.Severity.WARNING
    filters = " ".join(
        c.condition_threshold.filter or c.condition_prometheus_query_language.query or c.condition_matched_log.filter
        for p in a.policies.values()
        for c in p.conditions
    )
    for needed in (
        "run.googleapis.com/container/completed_probe_count",
        "run.googleapis.com/request_count",
        'response_code_class = "5xx"',
        "prometheus.googleapis.com/vllm:kv_cache_usage_perc/gauge",
        "prometheus.googleapis.com/vllm:time_to_first_token_seconds/histogram",
        "vllm:num_requests_waiting",
        "run.googleapis.com%2Fvarlog%2Fsystem",
    ):
        assert needed in filters, needed
    # vLLM's series are narrowed to the service and split by revision through the Prometheus sidecar's labels
    for key in ("kv-cache-usage", "ttft-p95"):
        t = by_key[key].conditions[0].condition_threshold
        assert (
            'resource.labels.namespace = "vllm-gemma4"' in t.filter
            and 'resource.labels.cluster = "__run__"' in t.filter
        )
        assert list(t.aggregations[0].group_by_fields) == ["metric.labels.revision_name"]
    query = by_key["requests-waiting"].conditions[0].condition_prometheus_query_language.query
    assert query == 'max by (revision_name) (vllm:num_requests_waiting{cluster="__run__", namespace="vllm-gemma4"}) > 0'
    before = dict(a.policies)
    a.calls.clear()

    assert setup_alerts() == 0
    second = capsys.readouterr().out
    assert [c for c in a.calls if not c.startswith("List")] == [], a.calls
    assert a.policies == before
    assert "0 created, 0 updated, 7 unchanged" in second


def test_a_changed_threshold_updates_that_policy_in_place(
    standin: MonitoringStandIn, capsys: pytest.CaptureFixture[str]
) -> None:
    assert setup_alerts() == 0
    a = standin.alerting
    kv = next(p for p in a.policies.values() if p.user_labels["gemma-sre-policy"] == "kv-cache-usage")
    a.calls.clear()
    assert setup_alerts("--kv-cache-usage", "0.9") == 0
    assert [c for c in a.calls if not c.startswith("List")] == ["UpdateAlertPolicy"]
    after = a.policies[kv.name]
    assert after.conditions[0].condition_threshold.threshold_value == 0.9
    assert after.conditions[0].name == kv.conditions[0].name  # the condition kept its id
    assert "1 updated" in capsys.readouterr().out


def test_dry_run_asks_only_list_questions(standin: MonitoringStandIn, capsys: pytest.CaptureFixture[str]) -> None:
    assert setup_alerts("--dry-run") == 0
    out = capsys.readouterr().out
    assert standin.alerting.policies == {} and standin.alerting.channels == {}
    assert set(standin.alerting.calls) == {"ListNotificationChannels", "ListAlertPolicies"}
    assert out.count("would create alert policy") == 6 and "could not check" not in out


def test_dry_run_whose_checks_fail_says_so(standin: MonitoringStandIn, capsys: pytest.CaptureFixture[str]) -> None:
    standin.alerting.fail_with = grpc.StatusCode.PERMISSION_DENIED
    assert setup_alerts("--dry-run") == 1
    out = capsys.readouterr().out
    assert "The dry run could not check:" in out
    assert "list alert policies (PERMISSION_DENIED" in out and "list notification channels (PERMISSION_DENIED" in out
    assert "would create alert policy" not in out  # never claims they are missing
    assert out.count("could not check, so would create if absent") == 7


def test_a_real_run_that_is_refused_says_what_to_do(
    standin: MonitoringStandIn, capsys: pytest.CaptureFixture[str]
) -> None:
    standin.alerting.fail_with = grpc.StatusCode.PERMISSION_DENIED
    assert setup_alerts() == 1
    err = capsys.readouterr().err
    assert "Cloud Monitoring refused" in err and "roles/monitoring.editor" in err


def test_pubsub_channel(standin: MonitoringStandIn) -> None:
    assert main(["setup-alerts", "--project", "p1", "--pubsub-topic", "projects/p1/topics/gemma-sre-alerts"]) == 0
    (channel,) = standin.alerting.channels.values()
    assert channel.type_ == "pubsub" and channel.labels["topic"] == "projects/p1/topics/gemma-sre-alerts"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--webhook-url", "https://bot.example/alerts/gcp"], "auth_token"),
        (["--webhook-url", "http://bot.example/alerts/gcp?auth_token=x"], "https://"),
        (["--webhook-url", "https://bot.example/alerts?auth_token=x"], "/alerts/gcp"),
        (["--pubsub-topic", "gemma-sre-alerts"], "projects/p1/topics/"),
        (["--webhook-url", URL, "--kv-cache-usage", "1.5"], "kv-cache-usage"),
        (["--webhook-url", URL, "--waiting-for-s", "-3"], "waiting-for-s"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(
    standin: MonitoringStandIn, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    assert main(["setup-alerts", "--project", "p1", *args]) == 2
    err = capsys.readouterr().err
    assert says in err and "Value error" not in err and "Input should" not in err
    assert standin.alerting.calls == []


# --- the stand-in is as strict as the API ------------------------------------------------------------------


@pytest.fixture
def client(standin: MonitoringStandIn) -> Iterator[monitoring_v3.AlertPolicyServiceClient]:
    channel = grpc.insecure_channel(standin.alerting.addr)  # type: ignore[attr-defined]
    c = monitoring_v3.AlertPolicyServiceClient(transport=AlertPolicyServiceGrpcTransport(channel=channel))
    yield c
    c.transport.close()


def _policy(**cond: object) -> monitoring_v3.AlertPolicy:
    base = desired_policies("svc", AlertThresholds(), [])["kv-cache-usage"]
    t = base.conditions[0].condition_threshold
    for k, v in cond.items():
        setattr(t, k, v)
    return base


@pytest.mark.parametrize(
    "bad",
    [
        {"filter": 'metric.type = "prometheus.googleapis.com/vllm:kv_cache_usage_perc/gauge"'},  # no resource.type
        {"filter": 'metric.type = "run.googleapis.com/nope" AND resource.type = "cloud_run_revision"'},
        {"filter": 'metric.type == "x" AND resource.type = "prometheus_target"'},  # malformed
        {"filter": ""},
        {"duration": timedelta(seconds=30)},  # a threshold's duration is whole minutes
        # vLLM's series carry the service as `namespace`: prometheus_target has no service_name label
        {
            "filter": 'metric.type = "prometheus.googleapis.com/vllm:kv_cache_usage_perc/gauge" AND '
            'resource.type = "prometheus_target" AND resource.labels.service_name = "svc"'
        },
        {"comparison": monitoring_v3.ComparisonType.COMPARISON_GE},
    ],
)
def test_standin_rejects_malformed_conditions(client: monitoring_v3.AlertPolicyServiceClient, bad: dict) -> None:
    with pytest.raises(gexc.InvalidArgument):
        client.create_alert_policy(name="projects/p1", alert_policy=_policy(**bad))


def test_standin_rejects_a_group_by_on_a_label_the_resource_lacks(
    client: monitoring_v3.AlertPolicyServiceClient,
) -> None:
    policy = _policy()
    policy.conditions[0].condition_threshold.aggregations[0].group_by_fields = ["resource.labels.revision_name"]
    with pytest.raises(gexc.InvalidArgument, match="revision_name"):
        client.create_alert_policy(name="projects/p1", alert_policy=policy)


def test_standin_checks_that_a_promql_metric_exists_unless_told_not_to(
    standin: MonitoringStandIn, client: monitoring_v3.AlertPolicyServiceClient
) -> None:
    policy = desired_policies("svc", AlertThresholds(), [])["requests-waiting"]
    assert policy.conditions[0].condition_prometheus_query_language.disable_metric_validation  # setup's choice
    policy.conditions[0].condition_prometheus_query_language.disable_metric_validation = False
    with pytest.raises(gexc.InvalidArgument, match="vllm:num_requests_waiting"):
        client.create_alert_policy(name="projects/p1", alert_policy=policy)
    standin.alerting.prometheus_metrics.add("vllm:num_requests_waiting")  # the sidecar has written a point
    assert client.create_alert_policy(name="projects/p1", alert_policy=policy).name


def test_standin_rejects_missing_fields_names_and_unknown_channels(
    client: monitoring_v3.AlertPolicyServiceClient,
) -> None:
    p = _policy()
    p.display_name = ""
    with pytest.raises(gexc.InvalidArgument):
        client.create_alert_policy(name="projects/p1", alert_policy=p)
    with pytest.raises(gexc.InvalidArgument):
        client.create_alert_policy(name="p1", alert_policy=_policy())
    named = _policy()
    named.name = "projects/p1/alertPolicies/7"
    with pytest.raises(gexc.InvalidArgument):
        client.create_alert_policy(name="projects/p1", alert_policy=named)
    chan = _policy()
    chan.notification_channels = ["projects/p1/notificationChannels/404"]
    with pytest.raises(gexc.NotFound):
        client.create_alert_policy(name="projects/p1", alert_policy=chan)
    typo = desired_policies("svc", AlertThresholds(), [])["startup-failure-logs"]
    typo.conditions[0].condition_matched_log.filter = 'log_name:"run.googleapis.com%2Fvarlog%2Fsystem"'
    with pytest.raises(gexc.InvalidArgument, match="log_name"):  # LogEntry's field is logName
        client.create_alert_policy(name="projects/p1", alert_policy=typo)
    log = desired_policies("svc", AlertThresholds(), [])["startup-failure-logs"]
    del log.alert_strategy
    with pytest.raises(gexc.InvalidArgument):  # log-match policies need a notification rate limit
        client.create_alert_policy(name="projects/p1", alert_policy=log)
    missing = _policy()
    missing.name = "projects/p1/alertPolicies/404"
    with pytest.raises(gexc.NotFound):
        client.update_alert_policy(alert_policy=missing)

"""The Cloud Monitoring adapter (google-cloud-monitoring over gRPC) against an in-process stand-in,
and its figures in /gemma status."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import grpc
import pytest
from google.cloud import monitoring_v3

from bot.adapters.cloud_monitoring import CloudMonitoringMetrics, make_metrics
from bot.sandbox.monitoring_grpc import MonitoringStandIn, serve_monitoring
from bot.settings import Settings
from handlers.context import CommandContext
from handlers.registry import load_all
from handlers.router import run_command
from skills.errors import UserFacingError
from skills.observe.service_metrics import service_metrics
from tests.fake_time import FakeTime
from tests.observe_fixtures import RecordingResponder, deps_for, reply_text  # noqa: F401

load_all()
SERVICE = "vllm-gemma4"


@pytest.fixture
def monitoring() -> Iterator[tuple[MonitoringStandIn, str]]:
    standin = MonitoringStandIn()
    with serve_monitoring(standin) as addr:
        yield standin, addr


def _seed(m: MonitoringStandIn) -> None:
    m.add("container/gpu/utilizations", SERVICE, [0.2, 0.9, 0.75])
    m.add("container/gpu/memory_utilizations", SERVICE, [0.88, 0.9, 0.91])
    m.add("container/instance_count", SERVICE, [1, 1, 1], labels={"state": "active"}, int_values=True)
    m.add("container/instance_count", SERVICE, [0, 1, 0], labels={"state": "idle"}, int_values=True)
    m.add("request_count", SERVICE, [0.5, 1.5, 2.0], labels={"response_code_class": "2xx"})
    m.add("request_latencies", SERVICE, [900.0, 2400.0, 1800.0])
    m.add("container/memory/utilizations", SERVICE, [0.4, 0.5, 0.45])
    m.add("container/gpu/utilizations", "other-service", [0.01])


async def test_series_over_grpc_with_the_librarys_messages(monitoring, settings: Settings) -> None:
    standin, addr = monitoring
    _seed(standin)
    metrics = CloudMonitoringMetrics(settings.model_copy(update={"cloud_monitoring_api_endpoint": addr}))
    series = await metrics.series(SERVICE, "container/gpu/utilizations", 30)
    assert len(series) == 1
    s = series[0]
    assert [p.value for p in s.points] == [0.2, 0.9, 0.75]  # oldest first
    assert s.labels == {}  # a cross-series reducer keeps only the group-by labels (none here), as the API does
    req = standin.requests[-1]
    assert req.name == "projects/test-proj"
    assert 'metric.type = "run.googleapis.com/container/gpu/utilizations"' in req.filter
    assert f'resource.labels.service_name = "{SERVICE}"' in req.filter
    assert req.aggregation.per_series_aligner == monitoring_v3.Aggregation.Aligner.ALIGN_MEAN
    span = req.interval.end_time.timestamp() - req.interval.start_time.timestamp()
    assert span == pytest.approx(30 * 60, abs=1)
    ints = await metrics.series(SERVICE, "container/instance_count", 30)
    assert sorted(p.value for s in ints for p in s.points) == [0, 0, 1, 1, 1, 1]


async def test_summary_sums_groups_and_keeps_the_split(monitoring, settings: Settings) -> None:
    standin, addr = monitoring
    _seed(standin)
    metrics = CloudMonitoringMetrics(settings.model_copy(update={"cloud_monitoring_api_endpoint": addr}))
    summary = await service_metrics(metrics, SERVICE, 15)
    figs = {f.metric: f for f in summary.figures}
    gpu = figs["container/gpu/utilizations"]
    assert (gpu.latest, gpu.peak) == (0.75, 0.9) and gpu.text() == "75% now, peak 90%"
    inst = figs["container/instance_count"]
    assert (inst.latest, inst.peak) == (1, 2) and inst.by_label == {"active": 1, "idle": 0}
    assert figs["request_latencies"].text() == "1800 ms now, peak 2400 ms"


async def test_api_errors_become_a_readable_message(monitoring, settings: Settings) -> None:
    standin, addr = monitoring
    standin.fail_with = grpc.StatusCode.PERMISSION_DENIED
    metrics = CloudMonitoringMetrics(settings.model_copy(update={"cloud_monitoring_api_endpoint": addr}))
    with pytest.raises(UserFacingError, match=r"roles/monitoring\.viewer"):
        await metrics.series(SERVICE, "request_count", 5)
    summary = await service_metrics(metrics, SERVICE, 5)
    assert all("permission denied" in f.error for f in summary.figures)


def test_not_wired_when_it_could_only_reach_google_anonymously(settings: Settings) -> None:
    assert make_metrics(settings.model_copy(update={"cloud_monitoring_api_endpoint": None})) is None
    assert make_metrics(settings.model_copy(update={"cloud_monitoring_api_endpoint": "127.0.0.1:1"})) is not None


async def test_status_includes_cloud_monitoring_when_wired(monitoring, cloud_run, deps_for) -> None:  # noqa: F811
    standin, addr = monitoring
    _seed(standin)
    cloud_run.seed_service(SERVICE)
    deps = deps_for(cloud_run.base_url, cloud_monitoring_api_endpoint=addr)
    ctx = CommandContext(deps=deps, responder=RecordingResponder(), user_id="U1", channel_id="C1", args=["--fresh"])
    reply = await run_command(ctx, "status")
    assert reply is not None
    text = reply_text(reply)
    assert "Cloud Monitoring (last 30 min)" in text
    assert "75% now, peak 90%" in text and "2.00/s now" in text and "active 1" in text


async def test_transient_errors_are_retried_with_one_warning_each(
    monitoring, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    standin, addr = monitoring
    _seed(standin)
    standin.fail_next = [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED]
    t = FakeTime()
    metrics = CloudMonitoringMetrics(
        settings.model_copy(update={"cloud_monitoring_api_endpoint": addr}), clock=t.clock, sleep=t.sleep
    )
    with caplog.at_level(logging.WARNING, logger="bot.adapters.cloud_monitoring"):
        series = await metrics.series(SERVICE, "container/gpu/utilizations", 30)
    assert [p.value for p in series[0].points] == [0.2, 0.9, 0.75]
    assert len(standin.requests) == 3 and len(t.sleeps) == 2 and t.sleeps[0] < t.sleeps[1]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and all(m.startswith("Cloud Monitoring: container/gpu/utilizations: ") for m in lines)


async def test_retries_stop_within_the_call_deadline(monitoring, settings: Settings) -> None:
    standin, addr = monitoring
    standin.fail_with = grpc.StatusCode.UNAVAILABLE
    t = FakeTime()
    s = settings.model_copy(update={"cloud_monitoring_api_endpoint": addr, "cloud_call_deadline_s": 10.0})
    metrics = CloudMonitoringMetrics(s, clock=t.clock, sleep=t.sleep)
    with pytest.raises(UserFacingError, match="could not list request_count"):
        await metrics.series(SERVICE, "request_count", 5)
    assert sum(t.sleeps) <= 10.0 and len(standin.requests) == len(t.sleeps) + 1 >= 5


async def test_series_of_one_revision_filter_on_its_revision_name(monitoring, settings: Settings) -> None:
    standin, addr = monitoring
    for rev, errors in (("vllm-gemma4-00001-abc", 0.1), ("vllm-gemma4-canary-123456", 2.0)):
        standin.add("request_count", SERVICE, [10.0], labels={"response_code_class": "2xx"}, revision=rev)
        standin.add("request_count", SERVICE, [errors], labels={"response_code_class": "5xx"}, revision=rev)
    metrics = CloudMonitoringMetrics(settings.model_copy(update={"cloud_monitoring_api_endpoint": addr}))
    series = await metrics.series(SERVICE, "request_count", 10, revision="vllm-gemma4-canary-123456")
    assert {(s.labels["response_code_class"], s.points[0].value) for s in series} == {("2xx", 10.0), ("5xx", 2.0)}
    assert 'resource.labels.revision_name = "vllm-gemma4-canary-123456"' in standin.requests[-1].filter
    # Without a revision: every revision's, summed per response code class (the reducer's group-by)
    both = await metrics.series(SERVICE, "request_count", 10)
    assert {(s.labels["response_code_class"], s.points[0].value) for s in both} == {("2xx", 20.0), ("5xx", 2.1)}

"""The Cloud Logging adapter with the real google-cloud-logging client (HTTP) against the local stand-in:
the filter (explicit timestamp bound, service, severity, request/system logs), paging, caps; and the
/gemma logs and /gemma diagnose commands end to end."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from bot.adapters.cloud_logging import CloudLoggingLogs
from bot.sandbox.cloud_logging_api import CloudLoggingStandIn
from bot.sandbox.server import serve
from bot.settings import Settings, load_settings
from skills.errors import CloudUnavailable, InvalidInput
from skills.ports import LogQuery
from tests.example_data import SCENARIOS
from tests.fake_time import FakeTime


def _shift_to_now(standin: CloudLoggingStandIn) -> None:
    """Move the scenario so its last entry is a minute ago (relative windows like --since 1h then apply)."""
    last = max(datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")) for e in standin.entries)
    delta = datetime.now(UTC) - timedelta(minutes=1) - last
    for e in standin.entries:
        ts = datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")) + delta
        e["timestamp"] = ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.fixture
def logging_api() -> Iterator[CloudLoggingStandIn]:
    standin = CloudLoggingStandIn()
    with serve(standin.app()) as url:
        standin.base_url = url  # type: ignore[attr-defined]
        yield standin


@pytest.fixture
def log_settings(logging_api: CloudLoggingStandIn) -> Settings:
    return load_settings(
        google_cloud_project="test-proj",
        google_anonymous_credentials=True,
        cloud_logging_api_endpoint=logging_api.base_url,  # type: ignore[attr-defined]
    )


def _query(**kw: object) -> LogQuery:
    base: dict[str, object] = {"service": "vllm-gemma4", "since": datetime(2026, 11, 20, 13, 0, tzinfo=UTC)}
    base.update(kw)
    return LogQuery(**base)  # type: ignore[arg-type]


async def test_fetch_sends_explicit_time_bound_and_reads_in_order(
    logging_api: CloudLoggingStandIn, log_settings: Settings
) -> None:
    logging_api.load(SCENARIOS / "example-startup-probe-timeout.jsonl", project="test-proj")
    batch = await CloudLoggingLogs(log_settings).fetch(_query())
    assert len(batch.entries) == 50 and batch.truncated == ""
    times = [e.timestamp for e in batch.entries]
    assert times == sorted(times)  # fetched newest first, returned oldest first
    flt = logging_api.filters[0]
    # Our bound, and only ours: the library adds a 24 h window when a filter has no timestamp.
    assert flt.count("timestamp>=") == 1 and 'timestamp>="2026-11-20T13:00:00' in flt
    assert 'resource.labels.service_name="vllm-gemma4"' in flt and 'resource.type="cloud_run_revision"' in flt
    assert "varlog%2Fsystem" in flt and "httpRequest.status>=500" in flt and "httpRequest.status=429" in flt
    assert logging_api.requests[0]["resourceNames"] == ["projects/test-proj"]
    assert any(e.log_name.endswith("varlog%2Fsystem") for e in batch.entries)


async def test_window_severity_and_revision_filters(logging_api: CloudLoggingStandIn, log_settings: Settings) -> None:
    logging_api.load(SCENARIOS / "example-startup-probe-timeout.jsonl", project="test-proj")
    logs = CloudLoggingLogs(log_settings)
    errors = await logs.fetch(_query(min_severity="ERROR"))
    assert [e.severity for e in errors.entries] == ["ERROR"]
    late = await logs.fetch(_query(since=datetime(2026, 11, 20, 14, 18, 30, tzinfo=UTC)))
    assert late.entries and all(
        e.timestamp and e.timestamp >= datetime(2026, 11, 20, 14, 18, 30, tzinfo=UTC) for e in late.entries
    )
    await logs.fetch(_query(revision="vllm-gemma4-0009-x7k", until=datetime(2026, 11, 21, tzinfo=UTC)))
    assert 'resource.labels.revision_name="vllm-gemma4-0009-x7k"' in logging_api.filters[-1]
    assert "timestamp<=" in logging_api.filters[-1]
    with pytest.raises(InvalidInput):
        await logs.fetch(_query(service='x" OR true'))


async def test_request_log_5xx_and_429_only(logging_api: CloudLoggingStandIn, log_settings: Settings) -> None:
    for i, status in enumerate((200, 503, 429, 404)):
        logging_api.entries.append(
            {
                "logName": "projects/test-proj/logs/run.googleapis.com%2Frequests",
                "resource": {"type": "cloud_run_revision", "labels": {"service_name": "vllm-gemma4"}},
                "timestamp": f"2026-11-20T14:00:0{i}.000000Z",
                "severity": "ERROR" if status >= 500 else "INFO",
                "httpRequest": {
                    "requestMethod": "POST",
                    "requestUrl": "https://x.run.app/v1/chat/completions",
                    "status": status,
                },
            }
        )
    batch = await CloudLoggingLogs(log_settings).fetch(_query())
    assert sorted(e.http_status for e in batch.entries if e.http_status) == [429, 503]


async def test_paging_and_caps(logging_api: CloudLoggingStandIn, log_settings: Settings) -> None:
    logging_api.load(SCENARIOS / "example-healthy.jsonl", project="test-proj")
    logging_api.max_page = 100  # the server pages even when asked for more
    logs = CloudLoggingLogs(log_settings)
    full = await logs.fetch(_query())
    assert len(full.entries) == 549 and not full.truncated
    assert len(logging_api.requests) == 6 and logging_api.requests[1]["pageToken"] == "100"

    capped = await logs.fetch(_query(max_entries=120))
    assert len(capped.entries) == 120 and "120-entry cap" in capped.truncated
    assert capped.entries[-1].timestamp == full.entries[-1].timestamp  # the cap keeps the newest lines

    small = await logs.fetch(_query(max_bytes=20_000))
    assert 0 < len(small.entries) < 549 and "byte cap" in small.truncated


async def test_commands_logs_and_diagnose(
    logging_api: CloudLoggingStandIn, settings: Settings, redis_client: object
) -> None:
    from bot.wiring import build_deps, close_deps
    from handlers.context import CommandContext
    from handlers.registry import COMMANDS, load_all
    from handlers.reply import PLAN_ACTION

    logging_api.load(SCENARIOS / "example-kv-cache-insufficient.jsonl", project="test-proj")
    _shift_to_now(logging_api)
    st = settings.model_copy(update={"cloud_logging_api_endpoint": logging_api.base_url})  # type: ignore[attr-defined]
    deps = build_deps(st)
    load_all()
    try:
        ctx = CommandContext(deps=deps, responder=None, user_id="U1", channel_id="C1", args=["--since", "2h"])  # type: ignore[arg-type]
        reply = await COMMANDS["diagnose"].run(ctx)
        assert reply is not None
        assert "kv" in reply.sections[0].heading.lower() if reply.sections[0].heading else False
        values = [json.loads(b.value) for b in reply.buttons if b.action_id == PLAN_ACTION]
        assert {"action": "redeploy", "params": {"max_model_len": 76208}} in values

        ctx.args = ["--since", "2h", "--severity", "warning"]
        digest = await COMMANDS["logs"].run(ctx)
        assert digest is not None
        text = "\n".join((s.code or "") + (s.text or "") for s in digest.sections)
        assert "estimated maximum model length is 76208" in text
        assert "severity>=WARNING" in logging_api.filters[-1]

        ctx.args = ["--since", "banana"]
        with pytest.raises(InvalidInput):
            await COMMANDS["logs"].run(ctx)
    finally:
        await close_deps(deps)


async def test_transient_errors_are_retried_with_one_warning_each(
    logging_api: CloudLoggingStandIn, log_settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    logging_api.load(SCENARIOS / "example-startup-probe-timeout.jsonl", project="test-proj")
    logging_api.fail_next = [503, 429, 500]
    t = FakeTime()
    with caplog.at_level(logging.WARNING, logger="bot.adapters.cloud_logging"):
        batch = await CloudLoggingLogs(log_settings, clock=t.clock, sleep=t.sleep).fetch(_query())
    assert len(batch.entries) == 50
    assert len(logging_api.requests) == 4 and len(t.sleeps) == 3
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3 and all(m.startswith("Cloud Logging: ") and "retry" in m for m in lines)


async def test_retries_stop_within_the_call_deadline(logging_api: CloudLoggingStandIn, log_settings: Settings) -> None:
    logging_api.fail_next = [503] * 100
    t = FakeTime()
    s = log_settings.model_copy(update={"cloud_call_deadline_s": 5.0})
    with pytest.raises(CloudUnavailable, match="Cloud Logging failed"):
        await CloudLoggingLogs(s, clock=t.clock, sleep=t.sleep).fetch(_query())
    assert sum(t.sleeps) <= 5.0 and len(logging_api.requests) == len(t.sleeps) + 1 >= 4


async def test_client_errors_are_not_retried(logging_api: CloudLoggingStandIn, log_settings: Settings) -> None:
    t = FakeTime()
    with pytest.raises(InvalidInput):
        await CloudLoggingLogs(log_settings, clock=t.clock, sleep=t.sleep).fetch(_query(service="Bad_Name"))
    assert t.sleeps == [] and logging_api.requests == []

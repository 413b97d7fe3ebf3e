"""Issue 34, the write-up: `/gemma postmortem` drafts from a recorded incident (its alerts, the thread's findings,
lifecycle actions, the audit, the revisions and Cloud Monitoring), with and without a model, with no secret in
what is posted, attached or sent to the model; `/gemma handoff`; and Slack's files upload v2 as the stand-in
enforces it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.sandbox.monitoring_grpc import MonitoringStandIn, serve_monitoring
from bot.sandbox.openai_script import OpenAIScript, Turn
from bot.sandbox.server import serve
from bot.sandbox.slack_api import SlackStandIn
from handlers.reply import Reply, Section
from skills.audit import AuditEntry, record
from skills.incidents.lifecycle_store import IncidentLifecycle
from skills.incidents.model import Alert, Fix
from skills.incidents.store import IncidentStore
from tests.agent_fixtures import logging_api, make_deps, script  # noqa: F401  (fixtures)
from tests.deploy_helpers import command
from tests.observe_fixtures import reply_text

SECRET = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"  # an HF token shape the redactor knows


@pytest.fixture
def monitoring() -> Iterator[tuple[MonitoringStandIn, str]]:
    standin = MonitoringStandIn()
    with serve_monitoring(standin) as addr:
        yield standin, addr


async def _record_incident(deps: Any) -> tuple[str, datetime]:
    """An incident as the pipeline records it: fired 10 min ago, findings in its thread, acknowledged and owned,
    a redeploy confirmed from it (audited, its detail quoting a token), the alert closed a minute ago."""
    s = deps.settings
    store = IncidentStore(deps.redis, s.key_prefix)
    now = datetime.now(UTC)
    start = (now - timedelta(minutes=10)).replace(microsecond=0)
    end = (now - timedelta(minutes=1)).replace(microsecond=0)
    alert = Alert(source="gcp", fingerprint="0.pm", state="firing", name="vLLM revision failed to start",
                  service="vllm-gemma4", severity="critical", started_at=start)  # fmt: skip
    inc, _ = await store.record("1-0", alert, start, channel="C1", known=frozenset({"vllm-gemma4"}), window_s=1800)
    findings = Reply(title=":mag: vllm-gemma4: 1 finding(s)")
    findings.sections.append(
        Section(heading=":red_circle: KV cache too small for --max-model-len  `kv_cache_insufficient`")
    )
    await store.add_reply(inc, 0, findings.model_dump_json())
    life = IncidentLifecycle(store)
    await life.act(inc.id, "ack", "UALICE", start + timedelta(minutes=1))
    await life.act(inc.id, "own", "UBOB", start + timedelta(minutes=2))
    fixed_at = start + timedelta(minutes=6)
    await record(deps.redis, s.key("audit"), AuditEntry(
        at=fixed_at.timestamp(), user_id="UBOB", action="redeploy", service="vllm-gemma4", result="ok",
        detail=f"revision ready; token {SECRET}", plan_id="p1", revision="vllm-gemma4-00003-fix",
    ))  # fmt: skip
    await store.record_fix(inc.id, Fix(action="redeploy `vllm-gemma4`", revision="vllm-gemma4-00003-fix", by="UBOB",
                                       at=fixed_at, serving=100, serving_since=fixed_at), fixed_at)  # fmt: skip
    closed = alert.model_copy(update={"state": "resolved", "ended_at": end})
    await store.record("2-0", closed, end, channel="C1", known=frozenset({"vllm-gemma4"}), window_s=1800)
    return inc.id, start


def _timeline(text: str) -> list[str]:
    block = text[text.index("## Timeline") : text.index("## Cause")]
    return [line for line in block.splitlines() if line.startswith("| ") and ":" in line.split("|")[1]]


async def test_a_postmortem_from_records_without_a_model(
    make_deps: Any,  # noqa: F811
    monitoring: tuple[MonitoringStandIn, str],
) -> None:
    standin, addr = monitoring
    standin.add(
        "request_count", "vllm-gemma4", [9.0, 3.0, 4.5, 1.0, 8.0], labels={"response_code_class": "5xx"}, step_s=240
    )
    standin.add("request_latencies", "vllm-gemma4", [800.0, 2400.0, 5100.0, 3000.0, 900.0], step_s=240)
    deps = make_deps(cloud_monitoring_api_endpoint=addr)
    deps.agent = None  # no model configured: the deterministic draft
    inc_id, start = await _record_incident(deps)
    reply, _ = await command(deps, f"postmortem {inc_id}")
    assert reply is not None
    [file] = reply.files
    md = file.content.decode()
    assert file.filename == f"postmortem-{inc_id}.md"
    rows = _timeline(md)
    whats = [r.split("|")[2].strip() for r in rows]
    # In time order, each from its record: the alert, the thread's lifecycle, the audited fix, the close.
    assert whats[0] == "alert fired: vLLM revision failed to start (critical)"
    order = ["acknowledged by UALICE", "UBOB took ownership", "redeploy ok (UBOB, revision vllm-gemma4-00003-fix)",
             "alert resolved: vLLM revision failed to start"]  # fmt: skip
    seen = [next(i for i, w in enumerate(whats) if w.startswith(o)) for o in order]
    # The fix's write is one row, its audit record's, marked as the incident's fix (not a second "fix landed" row).
    assert next(w for w in whats if "vllm-gemma4-00003-fix" in w).endswith("; the incident's fix"), whats
    assert not [w for w in whats if w.startswith("fix landed")], whats
    assert seen == sorted(seen), whats
    assert rows[0].split("|")[3].strip() == "alert"
    assert rows[0].split("|")[1].strip() == f"{start:%H:%M:%S}"
    assert "Finding `kv_cache_insufficient`: KV cache too small for --max-model-len" in md
    assert "duration 9m" in md  # fired 10 min ago, closed 1 min ago
    # Status's figures over the window, as Cloud Monitoring aligns them by the minute: a request rate counts over
    # its point's interval (the 240 s before it: 4.5, 1 and 8 per second during the window, 8 at its end), a
    # latency percentile at its point's time (16 and 12 min ago: before; now: after)
    assert "Requests: 8.00/s at its end, peak 8.00/s during the incident" in md
    assert "Request latency p95: 3000 ms at its end, peak 5100 ms during the incident" in md
    assert "Review `runbooks/kv_cache_insufficient.md`" in md
    assert "## Summary" not in md  # no model: no prose, the same facts
    shown = reply_text(reply) + md
    assert SECRET not in shown and "hf_AbCd" not in shown


async def test_a_postmortem_with_a_model_adds_prose_and_sends_it_no_secret(
    make_deps: Any,  # noqa: F811
    script: OpenAIScript,  # noqa: F811
) -> None:
    deps = make_deps()
    inc_id, _ = await _record_incident(deps)
    prose = "The revision failed to start because its KV cache was too small; a redeploy fixed it."
    script.push(Turn(content=prose))
    reply, _ = await command(deps, f"postmortem {inc_id}")
    assert reply is not None
    md = reply.files[0].content.decode()
    assert "## Summary" in md and prose in md
    assert "alert fired: vLLM revision failed to start" in md  # the facts stay the records'
    sent = str(script.chat_requests[-1])
    assert "KV cache too small" in sent and "redeploy" in sent
    assert SECRET not in sent and SECRET not in md and SECRET not in reply_text(reply)


async def test_handoff_lists_incidents_changes_and_capacity(make_deps: Any) -> None:  # noqa: F811
    deps = make_deps()
    deps.agent = None
    inc_id, _ = await _record_incident(deps)
    reply, _ = await command(deps, "handoff --since 2h")
    assert reply is not None
    text = reply_text(reply)
    assert inc_id in text and "Resolved (1)" in text
    assert "redeploy `vllm-gemma4` by" in text and "Capacity" in text
    bad, _ = await command(deps, "handoff --since 90d")
    assert bad is not None and "out of range" in reply_text(bad) and bad.ephemeral


@pytest.fixture
def slack_files() -> Iterator[SlackStandIn]:
    standin = SlackStandIn()
    with serve(standin.app) as url:
        standin.base_url = url
        yield standin


async def test_files_upload_v2_through_slack_sdk_and_the_stand_ins_rules(slack_files: SlackStandIn) -> None:
    client = AsyncWebClient(token="xoxb-test", base_url=slack_files.base_url + "/api/")
    await client.files_upload_v2(
        channel="C1", thread_ts="1700000001.000100", content=b"# Postmortem\n", filename="pm.md", title="PM"
    )
    [shared] = slack_files.shared
    assert shared["content"] == b"# Postmortem\n" and shared["thread_ts"] == "1700000001.000100"
    assert shared["channel"] == "C1" and shared["filename"] == "pm.md"
    with pytest.raises(SlackApiError) as e:  # length 0 (or missing): Slack's missing_argument
        await client.files_getUploadURLExternal(filename="x.md", length=0)
    assert e.value.response["error"] == "missing_argument"
    with pytest.raises(SlackApiError) as e:  # a file id never issued (or completed once already)
        await client.files_completeUploadExternal(files=[{"id": shared["id"], "title": "again"}], channel_id="C1")
    assert e.value.response["error"] == "invalid_arguments"

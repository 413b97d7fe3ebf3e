"""Alerts become Slack incident threads: webhook -> Redis Stream -> workers -> Slack stand-in, all real."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from bot.alert_queue import GROUP, AlertQueue, build_alert_queue
from bot.deps import Deps
from bot.sandbox.cloud_logging_api import CloudLoggingStandIn
from bot.sandbox.server import serve
from bot.sandbox.slack_api import Fault
from bot.settings import Settings
from bot.web import create_app
from handlers.incident_chat import RenderedIncidentChat
from handlers.reply import Reply
from skills.clock import ScaledClock
from skills.incidents.model import Alert, Incident
from skills.incidents.threads import IncidentThreads
from tests.alerts_fixtures import (
    PostsSlack,
    am_alert,
    basic,
    bearer,
    eventually,
    gcp_alert,
    header_ts,
    headers_posted,
    make_deps,
    payload,
    thread_replies,
    tuned,
)
from tests.example_data import SCENARIOS

CHANNEL = "#gemma-alerts"


@dataclass
class Bot:
    client: httpx.AsyncClient
    queue: AlertQueue
    deps: Deps
    slack: PostsSlack

    async def drained(self, timeout: float = 15.0) -> bool:  # noqa: ASYNC109
        async def empty() -> bool:
            b = await self.queue.backlog()
            assert self.queue.publisher is not None
            return b["queued"] == 0 and b["pending"] == 0 and await self.queue.publisher.pending() == 0

        return bool(await eventually(empty, timeout=timeout))


def text_of(msg: dict[str, Any]) -> str:
    return msg.get("text", "") + json.dumps(msg.get("blocks", []))


async def quiet(inc: Incident, alert: Alert) -> AsyncIterator[Reply]:
    """No investigation (tests about the thread mechanics, not the findings)."""
    return
    yield


async def _bot(settings: Settings, slack: PostsSlack, investigate: Any = quiet, **overrides: Any) -> Bot:
    deps = make_deps(tuned(settings, **overrides), slack.clock)
    queue = build_alert_queue(deps, investigate, concurrency=2)
    app = create_app(deps)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test")
    await queue.start()
    return Bot(client, queue, deps, slack)


async def _close(bot: Bot) -> None:
    await bot.queue.stop()
    await bot.client.aclose()
    await bot.deps.redis.aclose()


@pytest.fixture
def slack() -> Iterator[PostsSlack]:
    """Overrides conftest's: records accepted posts, and shares a scaled clock with the bot, so Slack's
    Retry-After and the client's retry backoff (0.5 s, 1 s) are waited out in full on it, not on the wall."""
    standin = PostsSlack(clock=ScaledClock(100))
    with serve(standin.app) as url:
        standin.base_url = url
        yield standin


@pytest.fixture
async def bot(settings: Settings, redis_client, slack: PostsSlack) -> AsyncIterator[Bot]:
    b = await _bot(settings, slack)
    yield b
    await _close(b)


@pytest.fixture(autouse=True)
def no_unhandled(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO)
    yield
    crashes = [r for r in caplog.records if r.exc_info and r.name.startswith(("bot.alert_queue", "handlers"))]
    assert not crashes, f"unhandled exception logged: {crashes[0].getMessage()}"


async def test_gcp_incident_opens_one_thread_and_closing_edits_the_header(bot: Bot) -> None:
    resp = await bot.client.post("/alerts/gcp", json=payload("gcp-monitoring-open.json"), headers=basic())
    assert resp.status_code == 202
    [header] = await eventually(lambda: headers_posted(bot.slack, CHANNEL))
    text = text_of(header)
    for expected in (
        "FIRING: vLLM p95 latency high on vllm-gemma4",
        "critical",
        "2026-11-20 14:00 UTC",
        "console.cloud.google.com/monitoring/alerting/incidents/0.nq7ol5mhb4x1",
    ):
        assert expected in text, expected
    # a retry of the same notification changes nothing
    await bot.client.post("/alerts/gcp", json=payload("gcp-monitoring-open.json"), headers=basic())
    resp = await bot.client.post("/alerts/gcp", json=payload("gcp-monitoring-closed.json"), headers=basic())
    assert resp.json()["new"] == 1
    [update] = await eventually(lambda: bot.slack.of("chat.update"))
    assert update["ts"] == header_ts(bot.slack)
    assert "RESOLVED: vLLM p95 latency high" in text_of(update)
    assert "30m 00s" in text_of(update)  # duration on the resolved header
    assert await bot.drained()
    assert len(headers_posted(bot.slack)) == 1
    lines = thread_replies(bot.slack, header_ts(bot.slack))
    assert [("Resolved" in text_of(m)) for m in lines] == [True]


async def test_one_condition_groups_into_one_thread_another_condition_gets_its_own(bot: Bot) -> None:
    """One failure, one thread: the same alertname on another instance (another fingerprint) joins the thread;
    another alertname on the same service is another failure, with its own thread (and investigation)."""
    await bot.client.post("/alerts/alertmanager", json=am_alert("fp-a"), headers=bearer())
    assert await eventually(lambda: headers_posted(bot.slack))
    await bot.client.post("/alerts/alertmanager", json=am_alert("fp-a2"), headers=bearer())  # same condition
    await bot.client.post(
        "/alerts/alertmanager", json=am_alert("fp-b", alertname="VLLMRequestsWaiting"), headers=bearer()
    )
    await bot.client.post("/alerts/gcp", json=gcp_alert("other-1", service="billing-api"), headers=basic())
    assert await bot.drained()
    headers = headers_posted(bot.slack)
    assert len(headers) == 3
    [own] = [h for h in headers if "FIRING: VLLMRequestsWaiting on vllm-gemma4" in text_of(h)]  # its own thread
    [other] = [h for h in headers if "billing-api" in text_of(h)]
    assert "not a service this bot manages" in text_of(other)  # unknown service: posted with a note
    ts = header_ts(bot.slack)
    assert "VLLMKVCacheNearlyFull" in text_of(headers[0])
    [joined] = thread_replies(bot.slack, ts)
    assert "Another alert of *VLLMKVCacheNearlyFull* on `vllm-gemma4`" in text_of(joined)
    assert thread_replies(bot.slack, own["ts"]) == []
    [update] = bot.slack.of("chat.update")
    assert update["ts"] == ts and "2 grouped (2 firing)" in text_of(update)
    # resolving one keeps the thread firing; resolving both resolves the header
    await bot.client.post("/alerts/alertmanager", json=am_alert("fp-a", status="resolved"), headers=bearer())
    assert await bot.drained()
    assert "FIRING" in text_of(bot.slack.of("chat.update")[-1])
    await bot.client.post("/alerts/alertmanager", json=am_alert("fp-a2", status="resolved"), headers=bearer())
    assert await bot.drained()
    assert "RESOLVED" in text_of(bot.slack.of("chat.update")[-1])
    assert "Incident resolved; duration" in text_of(thread_replies(bot.slack, ts)[-1])
    assert len(headers_posted(bot.slack)) == 3


async def test_ten_thousand_identical_alerts_make_one_thread(bot: Bot) -> None:
    body = am_alert("storm")
    body["alerts"] = body["alerts"] * 250
    raw = json.dumps(body).encode()
    for _ in range(40):
        assert (await bot.client.post("/alerts/alertmanager", content=raw, headers=bearer())).status_code == 202
    assert await bot.drained()
    assert len(headers_posted(bot.slack)) == 1
    assert bot.slack.of("chat.update") == [] and thread_replies(bot.slack, header_ts(bot.slack)) == []


async def test_repeat_after_dedup_window_adds_a_line_not_a_thread(bot: Bot) -> None:
    await bot.client.post("/alerts/alertmanager", json=am_alert("fp-r"), headers=bearer())
    assert await bot.drained()
    # the dedup key expiring is what lets a later repeat (Alertmanager repeat_interval) through
    keys = [k async for k in bot.deps.redis.scan_iter(match=bot.deps.settings.key("alerts", "seen", "*"))]
    await bot.deps.redis.delete(*keys)
    await bot.client.post("/alerts/alertmanager", json=am_alert("fp-r"), headers=bearer())
    assert await bot.drained()
    assert len(headers_posted(bot.slack)) == 1
    [line] = thread_replies(bot.slack, header_ts(bot.slack))
    assert "Still firing: *VLLMKVCacheNearlyFull* (repeat notification #1)" in text_of(line)


async def test_worker_dying_mid_job_loses_nothing_and_duplicates_nothing(settings, redis_client, slack) -> None:
    s = tuned(settings)
    deps = make_deps(s)
    queue = build_alert_queue(deps, quiet)
    app = create_app(deps)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test") as client:
        await queue.ensure_group()
        await client.post("/alerts/alertmanager", json=am_alert("fp-k1"), headers=bearer())
        await client.post("/alerts/alertmanager", json=am_alert("fp-k2", service="other-svc"), headers=bearer())
        # worker A takes both entries; it does all the Slack work for the first, then dies before acking,
        # and dies before touching the second.
        got = await deps.redis.xreadgroup(GROUP, "worker-a", {queue.stream: ">"}, count=10)
        [(_, entries)] = got
        assert len(entries) == 2
        chat = RenderedIncidentChat(_responder(deps), s.vllm_service_name)
        threads = IncidentThreads(deps.redis, s, chat, quiet)
        first_id, first_fields = entries[0]
        await threads.handle(first_id, Alert.model_validate_json(first_fields["alert"]))  # recorded, not posted
        await threads.publisher.step()  # A's publisher posts the header, then A dies
        assert len(headers_posted(slack)) == 1
        await threads.publisher.stop()
        # worker B starts, waits for the idle timeout, reclaims both: no lost incident, no duplicate thread
        await queue.start()
        assert await eventually(lambda: len(headers_posted(slack)) >= 2)
        await _wait_drained(queue)
        await queue.stop()
    assert len(headers_posted(slack)) == 2
    assert {("other-svc" in text_of(h)) for h in headers_posted(slack)} == {True, False}
    await deps.redis.aclose()


def _responder(deps: Deps):
    from bot.slack_app import ChannelResponder

    return lambda channel: ChannelResponder(deps.chat, channel)


async def _wait_drained(queue: AlertQueue, timeout: float = 15.0) -> None:  # noqa: ASYNC109
    async def empty() -> bool:
        b = await queue.backlog()
        publisher = queue.publisher
        return b["queued"] == 0 and b["pending"] == 0 and publisher is not None and await publisher.pending() == 0

    assert await eventually(empty, timeout=timeout), "queue did not drain"


async def test_slack_429_is_retried_after_retry_after(bot: Bot) -> None:
    bot.slack.inject("chat.postMessage", Fault(status=429, retry_after=1))
    await bot.client.post("/alerts/gcp", json=payload("gcp-monitoring-open.json"), headers=basic())
    assert await bot.drained()
    calls = [c for c in bot.slack.calls if c.method == "chat.postMessage"]
    assert len(calls) == 2  # the 429, then the retry
    assert calls[1].at - calls[0].at >= 1.0  # Retry-After respected
    assert len(headers_posted(bot.slack)) == 1


async def test_slack_500_transient_is_retried_once_posted(bot: Bot) -> None:
    bot.slack.inject("chat.postMessage", Fault(status=500), Fault(status=500), Fault(status=500), Fault(status=500))
    await bot.client.post("/alerts/gcp", json=payload("gcp-monitoring-open.json"), headers=basic())
    assert await bot.drained()
    assert len([p for p in headers_posted(bot.slack) if "FIRING" in text_of(p)]) == 1
    assert await bot.deps.redis.xlen(bot.queue.dead_stream) == 0


async def test_slack_500_persistent_goes_to_dead_letter_with_a_message(bot: Bot) -> None:
    # 3 attempts x (1 call + 2 client retries) all fail; the dead-letter notice then gets through
    bot.slack.inject("chat.postMessage", *[Fault(status=500)] * 9)
    await bot.client.post("/alerts/gcp", json=payload("gcp-monitoring-open.json"), headers=basic())
    assert await bot.drained(timeout=30)
    dead = await bot.deps.redis.xrange(bot.queue.dead_stream)
    assert len(dead) == 1
    assert "internal_error" in dead[0][1]["error"] and dead[0][1]["attempts"] == "3"
    [notice] = await eventually(lambda: [p for p in headers_posted(bot.slack) if ":skull:" in text_of(p)])
    assert "vLLM p95 latency high" in text_of(notice) and "after 3 attempts" in text_of(notice)
    # the sender's retry is still a duplicate: nothing re-queued, nothing lost (it is in the dead letters)
    resp = await bot.client.post("/alerts/gcp", json=payload("gcp-monitoring-open.json"), headers=basic())
    assert resp.json()["duplicates"] == 1
    # given up is given up: once Slack answers again, the dead incident's header is not posted after all
    assert await bot.drained(timeout=30)
    assert not [p for p in headers_posted(bot.slack) if "FIRING" in text_of(p)]


async def test_findings_then_plan_posted_in_thread_once(settings, redis_client, slack) -> None:
    calls: list[str] = []

    async def investigate(inc: Incident, alert: Alert) -> AsyncIterator[Reply]:
        calls.append(inc.id)
        yield Reply(title="Findings: KV cache too small")
        yield Reply(title="Plan: scale up")

    b = await _bot(settings, slack, investigate)
    try:
        await b.client.post("/alerts/gcp", json=payload("gcp-monitoring-open.json"), headers=basic())
        await b.client.post("/alerts/gcp", json=payload("gcp-monitoring-closed.json"), headers=basic())
        await b.client.post("/alerts/gcp", json=gcp_alert("inc-other", service="billing-api"), headers=basic())
        assert await b.drained()
    finally:
        await _close(b)
    first_ts = header_ts(slack)
    replies = [text_of(m) for m in thread_replies(slack, first_ts)]
    assert ["Findings" in t for t in replies[:2]] == [True, False] and "Plan: scale up" in replies[1]
    assert len(calls) == 1  # not for the resolve, not for a service the bot does not manage


@pytest.fixture
def logging_api() -> Any:
    standin = CloudLoggingStandIn()
    with serve(standin.app()) as url:
        standin.base_url = url  # type: ignore[attr-defined]
        yield standin


async def test_real_findings_for_the_alert_window_with_plan_buttons(settings, redis_client, slack, logging_api) -> None:
    logging_api.load(SCENARIOS / "example-kv-cache-insufficient.jsonl", project="test-proj")
    s = settings.model_copy(update={"cloud_logging_api_endpoint": logging_api.base_url})
    b = await _bot(s, slack, investigate=None)  # the real investigator: logs port -> diagnose
    try:
        await b.client.post("/alerts/gcp", json=payload("gcp-monitoring-open.json"), headers=basic())
        assert await b.drained()
    finally:
        await _close(b)
    findings, changes, plan = thread_replies(slack, header_ts(slack))
    text = text_of(findings)
    # issue 34: what changed comes between them (this stand-in has no such service: it says it could not read it)
    assert "Could not read what changed: service vllm-gemma4: not found" in text_of(changes)
    # the model stand-in answers /health but has no chat API: the agent's fallback plan, saying why
    assert "deterministic findings (no model plan)" in text_of(plan) and "model" in text_of(plan).lower()
    assert "kv_cache_insufficient" in text
    assert "deterministic findings for the alert window 13:45" in text
    assert any(
        el.get("action_id") == "gemma_plan"
        for blk in findings["blocks"]
        if blk["type"] == "actions"
        for el in blk["elements"]
    )
    # the fetch asked for the alert's window: from 15 minutes before it started
    assert 'timestamp>="2026-11-20T13:45:00' in logging_api.filters[0]

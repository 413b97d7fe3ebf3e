"""Alerts pulled from Pub/Sub (google-cloud-pubsub's asyncio client via PUBSUB_EMULATOR_HOST, against the
in-process Subscriber stand-in) go through the webhook's own queue: same dedup, same incident thread; a message
is acked only once enqueued; a malformed one is acked and logged, never crashing the loop."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import httpx
import pytest
import redis.asyncio as redis

from bot.alert_pubsub import PubSubAlerts, make_subscriber
from bot.alert_queue import AlertQueue
from bot.sandbox.pubsub_grpc import PubSubStandIn, serve_pubsub
from bot.sandbox.slack_api import SlackStandIn
from bot.settings import Settings
from bot.web import create_app
from tests.alerts_fixtures import basic, gcp_alert, make_deps, queued, tuned
from tests.eventually import eventually
from tests.fake_time import FakeTime

SUB = "projects/test-proj/subscriptions/gemma-alerts"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def pubsub(clock: Clock, monkeypatch: pytest.MonkeyPatch) -> Iterator[PubSubStandIn]:
    standin = PubSubStandIn(now=clock, pull_wait_s=0.2)
    standin.create_subscription(SUB, ack_deadline_s=10)
    with serve_pubsub(standin) as host:
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", host)
        yield standin


def data(incident_id: str, **kw: object) -> bytes:
    return json.dumps(gcp_alert(incident_id, **kw)).encode()


async def test_alert_is_enqueued_then_acked_and_a_replay_is_a_duplicate(
    settings: Settings, queue: AlertQueue, pubsub: PubSubStandIn
) -> None:
    puller = PubSubAlerts(SUB, queue.enqueue, make_subscriber(settings))
    await puller.start()
    try:
        first = pubsub.publish(SUB, data("inc-ps-1"))
        assert await eventually(lambda: first in pubsub.acked)
        [alert] = await queued(queue)
        assert alert.source == "gcp" and alert.service == "vllm-gemma4"
        again = pubsub.publish(SUB, data("inc-ps-1"))  # Pub/Sub is at-least-once: the same incident again
        assert await eventually(lambda: again in pubsub.acked)
        assert len(await queued(queue)) == 1, "the redelivered alert was queued twice"
    finally:
        await puller.stop()
    assert pubsub.unacked(SUB) == 0


async def test_malformed_messages_are_acked_and_logged_and_the_loop_goes_on(
    settings: Settings, queue: AlertQueue, pubsub: PubSubStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    puller = PubSubAlerts(SUB, queue.enqueue, make_subscriber(settings))
    bad = [b"", b"\x00\xff\xfe binary", b"[1, 2]", b'{"hello": "world"}', b'{"incident": {"state": "open"}}']
    with caplog.at_level(logging.INFO, logger="bot.alert_pubsub"):
        await puller.start()
        try:
            ids = [pubsub.publish(SUB, b) for b in bad]
            good = pubsub.publish(SUB, data("inc-ps-2"))
            assert await eventually(lambda: set([*ids, good]) <= set(pubsub.acked))
        finally:
            await puller.stop()
    assert [a.fingerprint for a in await queued(queue)] == ["inc-ps-2"]
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(dropped) == len(bad)
    assert any("not JSON" in m for m in dropped) and any("invalid alert payload" in m for m in dropped)
    assert all(r.exc_info is None for r in caplog.records)


async def test_queue_down_means_no_ack_and_redelivery_later(
    settings: Settings, queue: AlertQueue, pubsub: PubSubStandIn, clock: Clock
) -> None:
    down = make_deps(settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"}))
    backoff = FakeTime()
    puller = PubSubAlerts(SUB, AlertQueue(down).enqueue, make_subscriber(settings), sleep=backoff.sleep)
    await puller.start()
    mid = pubsub.publish(SUB, data("inc-ps-3"))
    # The puller backs off (on its injected clock) only after it has handled the pulled batch: any (wrong) ack
    # of the message it could not enqueue would already have been sent by then.
    assert await eventually(lambda: backoff.sleeps)
    await puller.stop()
    assert "Pull" in pubsub.calls and pubsub.unacked(SUB) == 1 and "Acknowledge" not in pubsub.calls
    await down.redis.aclose()
    assert mid not in pubsub.acked and await queued(queue) == []

    clock.t += 11  # past the ack deadline: Pub/Sub delivers it again (before the next puller's first Pull)
    pubsub.expire()
    healthy = PubSubAlerts(SUB, queue.enqueue, make_subscriber(settings))
    await healthy.start()
    try:
        assert await eventually(lambda: mid in pubsub.acked, timeout=30)
    finally:
        await healthy.stop()
    assert [a.fingerprint for a in await queued(queue)] == ["inc-ps-3"]


async def test_unknown_subscription_is_one_clear_error_line(
    settings: Settings, queue: AlertQueue, pubsub: PubSubStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    puller = PubSubAlerts("projects/test-proj/subscriptions/nope", queue.enqueue, make_subscriber(settings))
    with caplog.at_level(logging.ERROR, logger="bot.alert_pubsub"):
        await puller.start()
        assert await eventually(lambda: caplog.records)
        await puller.stop()
    msg = caplog.records[0].getMessage()
    assert "NotFound" in msg and "ALERT_PUBSUB_SUBSCRIPTION" in msg and caplog.records[0].exc_info is None


async def test_pubsub_and_webhook_share_one_incident_thread(
    settings: Settings, redis_client: redis.Redis, pubsub: PubSubStandIn, slack: SlackStandIn
) -> None:
    deps = make_deps(tuned(settings, alert_pubsub_subscription="gemma-alerts"))  # short name + project
    app = create_app(deps)
    async with app.router.lifespan_context(app):
        first = pubsub.publish(SUB, data("inc-ps-4"))
        assert await eventually(lambda: first in pubsub.acked)
        posted = await eventually(lambda: slack.of("chat.postMessage"))
        assert posted and "vLLM p95 latency high" in json.dumps(posted[0])
        # The same incident by webhook too (both channels configured): a duplicate, not a second thread.
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test") as c:
            resp = await c.post("/alerts/gcp", json=gcp_alert("inc-ps-4"), headers=basic())
        assert resp.status_code == 202 and resp.json()["duplicates"] == 1
        await deps.drain()
    headers = [p for p in slack.of("chat.postMessage") if not p.get("thread_ts")]
    assert len(headers) == 1
    await deps.redis.aclose()

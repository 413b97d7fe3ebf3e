"""The one retry helper (skills/retrying.py): budget, growing jittered waits, a WARNING line per retry, an
injected clock so nothing sleeps; and the alert workers and Pub/Sub pull that now retry through it."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from bot.alert_pubsub import PubSubAlerts, make_subscriber
from bot.alert_queue import AlertQueue
from bot.sandbox.pubsub_grpc import PubSubStandIn, serve_pubsub
from bot.settings import Settings
from skills.retrying import RetryPolicy, retry_call
from tests.alerts_fixtures import gcp_alert, make_deps
from tests.eventually import eventually
from tests.fake_time import FakeTime


class Flaky:
    def __init__(self, failures: int, exc: type[BaseException] = ConnectionError) -> None:
        self.left, self.exc, self.calls = failures, exc, 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.left:
            self.left -= 1
            raise self.exc("Bearer ya29.secret-token-value refused")
        return "ok"


def policy(t: FakeTime, **kw: Any) -> RetryPolicy:
    base: dict[str, Any] = {
        "what": "test call",
        "transient": lambda e: isinstance(e, ConnectionError),
        "budget_s": 60.0,
        "initial_s": 1.0,
        "max_s": 8.0,
        "clock": t.clock,
        "sleep": t.sleep,
    }
    return RetryPolicy(**{**base, **kw})


async def test_rides_out_transient_errors_with_growing_capped_waits(caplog: pytest.LogCaptureFixture) -> None:
    t, fn = FakeTime(), Flaky(6)
    with caplog.at_level(logging.WARNING, logger="skills.retrying"):
        assert await retry_call(policy(t), fn) == "ok"
    assert fn.calls == 7 and len(t.sleeps) == 6
    assert all(1.0 * 2**i <= s <= min(8.0, 1.0 * 2**i + 1.0) for i, s in enumerate(t.sleeps[:3]))
    assert max(t.sleeps) <= 8.0  # capped
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 6 and all(r.levelno == logging.WARNING for r in caplog.records)
    assert lines[0].startswith("test call: ConnectionError: ") and "retry 1 in " in lines[0]
    assert "ya29.secret" not in "".join(lines)  # the error text is redacted


async def test_never_sleeps_past_the_budget() -> None:
    t, fn = FakeTime(), Flaky(100)
    with pytest.raises(ConnectionError):
        await retry_call(policy(t, budget_s=10.0), fn)
    assert sum(t.sleeps) <= 10.0 and t.now <= 10.0
    assert fn.calls == len(t.sleeps) + 1


async def test_other_errors_are_raised_at_once() -> None:
    t, fn = FakeTime(), Flaky(1, ValueError)
    with pytest.raises(ValueError):
        await retry_call(policy(t), fn)
    assert fn.calls == 1 and t.sleeps == []


async def test_cancellation_is_never_retried() -> None:
    t, fn = FakeTime(), Flaky(1, asyncio.CancelledError)
    with pytest.raises(asyncio.CancelledError):
        await retry_call(policy(t, transient=lambda e: True), fn)
    assert t.sleeps == []


async def test_on_retry_sees_each_failure_before_its_wait() -> None:
    t, fn = FakeTime(), Flaky(2)
    seen: list[tuple[str, int, float]] = []

    async def note(exc: BaseException, attempt: int, wait_s: float) -> None:
        seen.append((type(exc).__name__, attempt, wait_s))

    await retry_call(policy(t), fn, on_retry=note)
    assert [(n, a) for n, a, _ in seen] == [("ConnectionError", 1), ("ConnectionError", 2)]
    assert [w for *_, w in seen] == t.sleeps


async def test_alert_workers_back_off_and_log_while_redis_is_down(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    down = make_deps(settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"}))
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)
        await asyncio.sleep(0)

    async def handle(_id: str, _alert: Any) -> None:
        raise AssertionError("no entry can arrive while Redis is down")

    queue = AlertQueue(down, handle, concurrency=1, backoff_sleep=sleep)
    with caplog.at_level(logging.WARNING, logger="bot.alert_queue"):
        await queue.start()
        try:
            assert await eventually(lambda: len(waits) >= 6)
        finally:
            await queue.stop()
            await down.redis.aclose()
    assert waits[0] < waits[3] and max(waits) <= 5.0 + 0.1  # exponential, capped at 5 s (+ jitter)
    lines = [r for r in caplog.records if "alert worker: Redis unavailable" in r.getMessage()]
    assert len(lines) >= 6 and all(r.levelno == logging.WARNING and r.exc_info is None for r in lines)
    assert "retry 1 in 0." in lines[0].getMessage()


async def test_pubsub_pull_backs_off_while_the_queue_is_down(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    now = [1000.0]
    standin = PubSubStandIn(now=lambda: now[0], pull_wait_s=0.05)
    sub = "projects/test-proj/subscriptions/gemma-alerts"
    standin.create_subscription(sub, ack_deadline_s=10)
    down = make_deps(settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"}))
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)
        now[0] += 11  # past the ack deadline: the unacknowledged message comes again on the next pull
        standin.expire()
        await asyncio.sleep(0)

    with serve_pubsub(standin) as host:
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", host)
        puller = PubSubAlerts(sub, AlertQueue(down).enqueue, make_subscriber(settings), max_backoff_s=4.0, sleep=sleep)
        standin.publish(sub, json.dumps(gcp_alert("inc-retry")).encode())
        with caplog.at_level(logging.WARNING, logger="bot.alert_pubsub"):
            await puller.start()
            try:
                assert await eventually(lambda: len(waits) >= 4)
            finally:
                await puller.stop()
                await down.redis.aclose()
    assert waits[0] < waits[2] and max(waits) <= 4.0
    retries = [r.getMessage() for r in caplog.records if "alert queue unavailable; unacknowledged" in r.getMessage()]
    assert len(retries) >= 4 and retries[0].startswith(f"Pub/Sub alerts ({sub}): ")

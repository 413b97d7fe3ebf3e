"""A queued alert whose job fails in Redis itself is never acknowledged (bot/alert_queue.py, AlertQueue._process):
it stays pending, is retried once idle for alert_reclaim_idle_ms, and after alert_max_attempts goes to the
dead-letter stream and the alerts channel is told which alert it was. If the failure clears before the attempts
run out, the retry records the alert and its thread opens: nothing is lost.

The fault is real and in the job's own path (skills/incidents/threads.py -> IncidentStore.record): the service's
grouping pointer (incident:by-group:...) holds a hash, as a record in another shape would (an older version's, a
tool sharing the database), so the job's GET of it is refused with WRONGTYPE, a ResponseError: not a Redis outage
(the worker's back-off path) but a failed job. Redis and Slack otherwise answer normally, so nothing here goes
through the publisher's own retry path. tests/test_alert_job_failures.py fails the job in its investigation.
"""

from __future__ import annotations

from typing import Any

from bot.alert_queue import GROUP
from bot.settings import Settings
from handlers.alerts import gcp
from skills.clock import ScaledClock
from skills.incidents.store import IncidentStore
from tests.alerts_fixtures import PostsSlack, basic, eventually, gcp_alert, tuned
from tests.test_incidents_storm import (  # noqa: F401  (the scaled clock, the rate-limited Slack)
    Instance,
    clock,
    close,
    drained,
    incident_headers,
    slack,
    start,
    text_of,
)

ALERT_NAME = "vLLM p95 latency high"


def _r(bot: Instance) -> Any:
    """The bot's Redis client (decoded: answers are str)."""
    return bot.deps.redis


async def _queue_with_a_stray_grouping_record(bot: Instance, incident_id: str) -> tuple[str, str]:
    """Put the fault in place, then queue Cloud Monitoring's open notice (workers not started yet). Returns the
    queue entry's id and the faulty key."""
    body = gcp_alert(incident_id)
    [alert] = gcp.to_alerts(gcp.Notification.model_validate(body))
    stray = IncidentStore(bot.deps.redis, bot.deps.settings.key_prefix).k_by_group(alert)
    await _r(bot).hset(stray, mapping={"incident": "inc-legacy", "v": "1"})
    r = await bot.client.post("/alerts/gcp", json=body, headers=basic())
    assert r.status_code == 202 and r.json()["new"] == 1, r.text
    [(entry_id, _fields)] = await _r(bot).xrange(bot.queue.stream)
    return entry_id, stray


async def _first_attempt_over(bot: Instance, entry_id: str) -> str:
    """Wait until the job's first attempt is over: its failure recorded, or the entry gone from the stream (which
    is how an acknowledged one looks). Returns the recorded error ("" for none)."""

    async def over() -> str | bool:
        err = await _r(bot).hget(bot.queue.errors_key, entry_id)
        return str(err) if err else not await _r(bot).xrange(bot.queue.stream, min=entry_id, max=entry_id)

    err = await eventually(over, timeout=10)
    return err if isinstance(err, str) else ""


async def _pending_ids(bot: Instance) -> list[str]:
    rows = await _r(bot).xpending_range(bot.queue.stream, GROUP, min="-", max="+", count=10)
    return [str(row["message_id"]) for row in rows]


def _skulls(standin: PostsSlack) -> list[dict[str, Any]]:
    return [m for m in standin.accepted if m["_method"] == "chat.postMessage" and ":skull:" in text_of(m)]


async def test_a_job_refused_by_redis_is_retried_then_dead_lettered_and_announced_with_its_alert(
    settings: Settings,
    redis_client: Any,
    slack: PostsSlack,  # noqa: F811
    clock: ScaledClock,  # noqa: F811
) -> None:
    bot = await start(tuned(settings, alert_max_attempts=3, alert_reclaim_idle_ms=300), clock, run=False)
    try:
        entry_id, _stray = await _queue_with_a_stray_grouping_record(bot, "0.wrongtype-stays")
        await bot.queue.start()
        error = await _first_attempt_over(bot, entry_id)
        assert entry_id in await _pending_ids(bot), "the failed job was acknowledged: its alert would be lost"
        assert "WRONGTYPE" in error
        assert await drained(bot, timeout=30)
        dead = await _r(bot).xrange(bot.queue.dead_stream)
        leftovers = [await _r(bot).hlen(k) for k in (bot.queue.attempts_key, bot.queue.errors_key)]
    finally:
        await close(bot)
    assert len(dead) == 1, "the failed alert never reached the dead-letter stream"
    [(_, kept)] = dead
    assert kept["entry"] == entry_id and kept["attempts"] == "3"  # every attempt ran, then it was given up
    assert "WRONGTYPE" in kept["error"]
    assert "0.wrongtype-stays" in kept["alert"]  # the alert itself is kept, to be replayed
    assert leftovers == [0, 0]
    [notice] = _skulls(slack)
    shown = text_of(notice)
    assert f"*{ALERT_NAME}* on `vllm-gemma4`" in shown and "after 3 attempts" in shown
    assert "WRONGTYPE" in shown and entry_id in shown  # why, and which entry to replay
    assert incident_headers(slack) == [notice]  # the alert was never recorded: the notice is all the channel saw


async def test_a_failed_job_stays_pending_and_its_retry_opens_the_thread_once_the_fault_is_gone(
    settings: Settings,
    redis_client: Any,
    slack: PostsSlack,  # noqa: F811
    clock: ScaledClock,  # noqa: F811
) -> None:
    # A second's idle limit: time enough to clear the fault between the first failure and the retry.
    bot = await start(tuned(settings, alert_max_attempts=5, alert_reclaim_idle_ms=1000), clock, run=False)
    try:
        entry_id, stray = await _queue_with_a_stray_grouping_record(bot, "0.wrongtype-clears")
        await bot.queue.start()
        error = await _first_attempt_over(bot, entry_id)
        assert await _pending_ids(bot) == [entry_id], "the failed job was acknowledged: its alert would be lost"
        assert "WRONGTYPE" in error
        assert await bot.queue.backlog() == {"queued": 1, "pending": 1, "dead": 0}
        await _r(bot).delete(stray)  # the stray record is removed
        assert await drained(bot, timeout=30)
        dead = await _r(bot).xlen(bot.queue.dead_stream)
    finally:
        await close(bot)
    [header] = incident_headers(slack)  # the retry recorded the alert, and its thread opened
    assert ALERT_NAME in text_of(header) and "FIRING" in text_of(header)
    assert dead == 0 and _skulls(slack) == []

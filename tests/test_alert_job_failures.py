"""A queued alert whose job fails is never lost: it stays pending, is retried once idle for alert_reclaim_idle_ms,
and after alert_max_attempts goes to the dead-letter stream, and the alerts channel is told which alert it was.
The job here fails in the incident's investigation (what it raises retries the job: skills/incidents/threads.py),
as it would when the logs it reads cannot be had; Slack itself answers fine, so nothing of this goes through the
publisher's own retry path (tests/test_incidents_threads.py covers that one)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from bot.settings import Settings
from handlers.reply import Reply
from skills.clock import ScaledClock
from skills.incidents.model import Alert, Incident
from tests.alerts_fixtures import PostsSlack, basic, eventually, gcp_alert, tuned
from tests.test_incidents_storm import clock, close, drained, slack, start, text_of  # noqa: F401  (the scaled clock, the rate-limited Slack)


async def test_a_failing_job_is_retried_then_dead_lettered_and_announced(
    settings: Settings,
    redis_client: Any,
    slack: PostsSlack,  # noqa: F811
    clock: ScaledClock,  # noqa: F811
) -> None:
    tries: list[str] = []

    async def investigate(inc: Incident, alert: Alert) -> AsyncIterator[Reply]:
        tries.append(inc.id)
        # A long error, as a client library's may be: the queue keeps 500 characters of it.
        raise RuntimeError("Cloud Logging answered 503 Service Unavailable: " + "upstream connect error; " * 60)
        yield Reply(title="never")

    bot = await start(tuned(settings, alert_max_attempts=3, alert_reclaim_idle_ms=200), clock, investigate)
    try:
        r = await bot.client.post("/alerts/gcp", json=gcp_alert("0.job-fails"), headers=basic())
        assert r.status_code == 202, r.text
        # After the first failure the entry is still pending: nothing acknowledged it.
        await eventually(lambda: len(tries) >= 1)
        assert len(tries) >= 2 or (await bot.queue.backlog())["pending"] == 1
        assert await drained(bot, timeout=30)
        dead = await bot.deps.redis.xrange(bot.queue.dead_stream)
        # Nothing of the entry is left behind once it is dead-lettered: its attempt count and last error go too.
        leftovers = [await bot.deps.redis.hlen(k) for k in (bot.queue.attempts_key, bot.queue.errors_key)]
    finally:
        await close(bot)
    assert len(tries) == 3  # every attempt ran the job again
    assert len(dead) == 1
    assert dead[0][1]["attempts"] == "3" and "503 Service Unavailable" in dead[0][1]["error"]
    assert len(dead[0][1]["error"]) <= 500 and dead[0][1]["entry"]  # which queue entry it was, to replay it
    assert leftovers == [0, 0]
    assert "0.job-fails" in dead[0][1]["alert"]  # the alert itself is kept, to be replayed
    notices = [p for p in slack.posted if ":skull:" in text_of(p)]
    assert len(notices) == 1
    assert "vLLM p95 latency high" in text_of(notices[0]) and "after 3 attempts" in text_of(notices[0])


async def test_a_dead_job_whose_record_cannot_be_read_is_announced_in_the_alerts_channel(
    settings: Settings,
    redis_client: Any,
    slack: PostsSlack,  # noqa: F811
    clock: ScaledClock,  # noqa: F811
) -> None:
    """The job dies of its own alert's record (here a key of the wrong type where the alert's incident id belongs),
    and the announcement's lookup of the thread reads that same record: the notice goes to the alerts channel."""
    s = tuned(settings, alert_max_attempts=2, alert_reclaim_idle_ms=200)
    await redis_client.hset(f"{s.key_prefix}:incident:by-alert:gcp:0.record-bad", "not", "an id")
    bot = await start(s, clock)
    try:
        r = await bot.client.post("/alerts/gcp", json=gcp_alert("0.record-bad"), headers=basic())
        assert r.status_code == 202, r.text
        assert await drained(bot, timeout=30)
        dead = await bot.deps.redis.xrange(bot.queue.dead_stream)
    finally:
        await close(bot)
    assert len(dead) == 1 and "WRONGTYPE" in dead[0][1]["error"]  # it died of the record
    notices = [p for p in slack.posted if ":skull:" in text_of(p)]
    assert len(notices) == 1, [text_of(p) for p in slack.posted]
    assert notices[0]["channel"] == s.slack_alerts_channel and not notices[0].get("thread_ts")
    assert "vLLM p95 latency high" in text_of(notices[0]) and "after 2 attempts" in text_of(notices[0])

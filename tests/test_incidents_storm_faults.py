"""A storm under faults: one of two bot instances SIGKILLed mid-storm; Redis restarted mid-storm.

The invariants: every incident gets its thread (nothing lost), no thread twice except where a holder died
between Slack's answer and the Redis write, and those are counted (`alerts:ambiguous`), never silent.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from redis.exceptions import RedisError

from bot.sandbox.server import serve
from bot.sandbox.slack_limits import RateLimits
from bot.settings import Settings
from skills.clock import REAL_CLOCK
from skills.incidents.outbox import IncidentOutbox
from skills.incidents.store import IncidentStore
from tests.alerts_fixtures import PostsSlack, eventually, tuned
from tests.test_incidents_faults import OwnRedis, _env
from tests.test_incidents_storm import am, close, drained, incident_headers, service_of, start

# Slack's shape of limits, scaled up 20x so the storm takes a second of wall time, not a minute.
FAST = RateLimits(post_per_channel_rate=20, post_per_channel_burst=4, post_workspace_rate=40, update_rate=20)
FAST_BOT = {"slack_post_per_s": 20, "slack_update_per_min": 1200, "alert_storm_threshold_per_min": 1000}

_INSTANCE = """
import asyncio
from bot.alert_queue import build_alert_queue
from bot.settings import load_settings
from bot.slack_app import make_web_client
from bot.wiring import build_deps

async def main():
    deps = build_deps(load_settings())
    deps.chat = make_web_client(deps.settings)
    queue = build_alert_queue(deps, concurrency=2)
    await queue.start()
    print("READY", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


@pytest.fixture
def slack() -> Iterator[PostsSlack]:
    standin = PostsSlack(limits=FAST)
    with serve(standin.app) as url:
        standin.base_url = url
        yield standin


def _count(slack: PostsSlack, services: list[str]) -> tuple[int, int]:
    """(incidents without a thread, threads posted more than once)."""
    seen = Counter(service_of(h) for h in incident_headers(slack))
    return sum(1 for s in services if not seen[s]), sum(n - 1 for n in seen.values() if n > 1)


async def test_one_instance_killed_mid_storm_the_other_finishes_it(
    settings: Settings, redis_client: Any, slack: PostsSlack
) -> None:
    s = tuned(settings, **FAST_BOT)
    env = {**_env(s), "SLACK_POST_PER_S": "20", "SLACK_UPDATE_PER_MIN": "1200", "ALERT_CHANNEL_LEASE_MS": "1000"}
    env["ALERT_STORM_THRESHOLD_PER_MIN"] = "1000"
    victim = subprocess.Popen([sys.executable, "-c", _INSTANCE], env=env, stdout=subprocess.PIPE)  # noqa: ASYNC220
    survivor = await start(s, REAL_CLOCK, run=False)
    services = [f"kill-svc-{i:02d}" for i in range(30)]
    try:
        assert (await asyncio.to_thread(victim.stdout.readline)).strip() == b"READY"  # type: ignore[union-attr]
        for svc in services:
            await survivor.post(am(svc, "Boom", "critical"))
        assert await eventually(lambda: len(incident_headers(slack)) >= 5, timeout=20)
        os.kill(victim.pid, signal.SIGKILL)  # mid-storm: holding the channel lease and queue entries
        victim.wait(timeout=10)
        await survivor.queue.start()  # reclaims the victim's entries, takes its channel once the lease lapses
        assert await drained(survivor, timeout=30)
        ambiguous = await IncidentOutbox(IncidentStore(redis_client, s.key_prefix)).ambiguous()
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()
        await close(survivor)
    lost, duplicates = _count(slack, services)
    assert lost == 0
    assert duplicates <= ambiguous  # a duplicate only where a holder died between Slack's answer and Redis
    print(f"kill -9 mid-storm: {duplicates} duplicate thread(s), {ambiguous} ambiguous re-post(s)")


async def test_redis_restart_mid_storm_loses_nothing_and_posts_nothing_twice(
    settings: Settings, slack: PostsSlack, caplog: pytest.LogCaptureFixture
) -> None:
    own = OwnRedis()
    own.start()
    s = tuned(settings, redis_url=own.url, **FAST_BOT)
    bot = await start(s, REAL_CLOCK)
    services = [f"rr-svc-{i:02d}" for i in range(30)]
    try:
        for svc in services:
            await bot.post(am(svc, "Boom", "error"))
        assert await eventually(lambda: len(incident_headers(slack)) >= 5, timeout=20)
        own.stop()
        assert await eventually(lambda: any("publisher: Redis unavailable" in r.getMessage() for r in caplog.records))
        own.start()
        assert await eventually(lambda: len(incident_headers(slack)) >= 30, timeout=30)
        for _ in range(100):
            try:
                assert await drained(bot, timeout=60)
                break
            except (OSError, RedisError):  # a pooled connection from before the restart fails once
                await asyncio.sleep(0.05)
        ambiguous = await IncidentOutbox(IncidentStore(bot.deps.redis, s.key_prefix)).ambiguous()
    finally:
        await close(bot)
        own.stop()
    lost, duplicates = _count(slack, services)
    assert (lost, duplicates, ambiguous) == (0, 0, 0)

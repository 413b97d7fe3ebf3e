"""Redis state: the real server when REDIS_URL is set, otherwise an in-process store with the same API."""

from __future__ import annotations

from typing import Any

import redis.asyncio as redis

from bot.settings import Settings


def make_redis(settings: Settings) -> redis.Redis:
    if settings.redis_url:
        # No socket timeout (yet): with redis-py 8.1 on Python 3.11, setting one made a cancelled deploy watch lose
        # its cancellation and poll on (tests/test_truthful_writes.py's dead-watch test hung 2 runs in 5 under
        # load, 0 in 10 without it). Known gap: a half-open connection still waits on the kernel's TCP timeouts.
        return redis.Redis.from_url(settings.redis_url, decode_responses=True, health_check_interval=30)
    # fakeredis speaks the redis.asyncio API (streams, consumer groups, SET NX PX, Lua) in process, so the
    # console runs with no server while every code path stays the one production uses.
    import fakeredis

    fake: Any = fakeredis.FakeAsyncRedis(decode_responses=True)
    return fake  # type: ignore[no-any-return]

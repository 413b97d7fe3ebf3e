"""Redis state: the real server when REDIS_URL is set, otherwise an in-process store with the same API."""

from __future__ import annotations

from typing import Any

import redis.asyncio as redis

from bot.settings import Settings


def make_redis(settings: Settings) -> redis.Redis:
    if settings.redis_url:
        # redis-py's own socket and connect timeouts apply (5 s each, redis/_defaults.py): a half-open connection
        # fails a call instead of hanging it. Its sends go through asyncio.wait_for, which on Python 3.11 can lose
        # a cancellation; the long poll loops check for that (skills/cancellation.py).
        return redis.Redis.from_url(settings.redis_url, decode_responses=True, health_check_interval=30)
    # fakeredis speaks the redis.asyncio API (streams, consumer groups, SET NX PX, Lua) in process, so the
    # console runs with no server while every code path stays the one production uses.
    import fakeredis

    fake: Any = fakeredis.FakeAsyncRedis(decode_responses=True)
    return fake  # type: ignore[no-any-return]

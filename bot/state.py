"""Redis state: the real server when REDIS_URL is set, otherwise an in-process store with the same API."""

from __future__ import annotations

from typing import Any

import redis.asyncio as redis

from bot.settings import Settings


def make_redis(settings: Settings) -> redis.Redis:
    if settings.redis_url:
        # Timeouts so a half-open connection (a Memorystore failover, a dropped VPC path) fails a call with an
        # error the retry paths handle instead of hanging a handler forever.
        return redis.Redis.from_url(
            settings.redis_url,
            decode_responses=True,
            health_check_interval=30,
            socket_timeout=settings.redis_timeout_s,
            socket_connect_timeout=settings.redis_timeout_s,
        )
    # fakeredis speaks the redis.asyncio API (streams, consumer groups, SET NX PX, Lua) in process, so the
    # console runs with no server while every code path stays the one production uses.
    import fakeredis

    fake: Any = fakeredis.FakeAsyncRedis(decode_responses=True)
    return fake  # type: ignore[no-any-return]

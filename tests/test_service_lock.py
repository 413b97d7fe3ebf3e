"""The per-service write lock on real Redis: the TTL it sets, what a refusal says about the holder, and a
release that only ever removes its own lock."""

from __future__ import annotations

import time
from typing import Any

import pytest

from skills.locks import LockHeld, LockHolder, ServiceLock


def test_the_holder_is_described_in_utc_with_minutes_elapsed(new_york: None) -> None:
    since = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC (17:13:20 in New York)
    two_hours_ago = time.time() - (2 * 3600 + 30)
    text = LockHolder(token="t", user_id="U1", what="deploy", since=since).describe()
    assert text.startswith("deploy by <@U1> in progress since 22:13:20 UTC (")
    recent = LockHolder(token="t", user_id="U1", what="scale", since=two_hours_ago).describe()
    assert recent.endswith("(120 min ago)"), recent
    just_now = LockHolder(token="t", user_id="U1", what="scale", since=time.time() - 5).describe()
    assert just_now.endswith("(0 min ago)"), just_now


def test_lock_held_names_the_holder_or_says_someone_is_busy() -> None:
    holder = LockHolder(token="t", user_id="U9", what="destroy", since=time.time())
    held = LockHeld(holder)
    assert held.holder is holder and str(held).startswith("destroy by <@U9>")
    unknown = LockHeld(None)  # the holder's lock expired between our SET NX and our GET
    assert unknown.holder is None and str(unknown) == "another change is in progress"


async def test_acquire_sets_the_ttl_and_release_only_removes_its_own_lock(redis_client: Any, key_prefix: str) -> None:
    key = f"{key_prefix}:lock:svc"
    lock = ServiceLock(redis_client, key, ttl_s=60)
    assert await lock.holder() is None
    assert await lock.release() is False  # never acquired: nothing to release
    me = await lock.acquire("U1", "scale")
    assert 59_000 < await redis_client.pttl(key) <= 60_000  # a dead holder's lock lapses after the TTL
    assert (await lock.holder()) == me
    with pytest.raises(LockHeld) as held:
        await ServiceLock(redis_client, key, ttl_s=60).acquire("U2", "deploy")
    assert held.value.holder == me
    assert await lock.release() is True and await redis_client.get(key) is None
    assert await lock.release() is False  # released once
    # a holder whose lock expired and was taken by someone else does not delete the new holder's lock
    await lock.acquire("U1", "scale")
    await redis_client.delete(key)
    other = ServiceLock(redis_client, key, ttl_s=60)
    await other.acquire("U2", "deploy")
    assert await lock.release() is False
    assert (await other.holder()) is not None and (await other.holder()).user_id == "U2"  # type: ignore[union-attr]

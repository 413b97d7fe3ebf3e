"""Fenced leases in Redis: a lock that expires unless its holder renews it, with a fencing token.

A holder renews while it works (every ttl/3); if it dies, the lease lapses after `ttl_ms` and another instance
takes it with a higher token. Every write the holder makes under the lease goes through `guarded_hset`, which
applies it only while the lease still names this holder: a holder that stalled past its lease (GC pause, a
long Retry-After) cannot overwrite what the new holder recorded.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any

from skills.cancellation import raise_if_cancelled
from skills.ports import Store

log = logging.getLogger(__name__)

# KEYS[1] lease, KEYS[2] fence counter; ARGV[1] owner id, ARGV[2] ttl ms. Returns "owner:token" or false.
_ACQUIRE = """
local cur = redis.call('GET', KEYS[1])
if cur then
  if string.sub(cur, 1, string.len(ARGV[1]) + 1) == ARGV[1] .. ':' then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return cur
  end
  return false
end
local token = redis.call('INCR', KEYS[2])
local v = ARGV[1] .. ':' .. token
redis.call('SET', KEYS[1], v, 'PX', ARGV[2])
return v
"""
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
# KEYS[1] lease, KEYS[2] hash; ARGV[1] lease value, ARGV[2..] field, value pairs. 1 if written.
_GUARDED_HSET = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
for i = 2, #ARGV, 2 do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
return 1
"""


class Lease:
    def __init__(self, store: Store, key: str, ttl_ms: int, owner: str | None = None) -> None:
        self.store = store
        self.key = key
        self.ttl_ms = ttl_ms
        self.owner = owner or secrets.token_hex(6)
        self.value: str | None = None  # "owner:token" while held
        self._renewer: asyncio.Task[None] | None = None

    @property
    def token(self) -> int:
        return int(self.value.rsplit(":", 1)[1]) if self.value else 0

    @property
    def held(self) -> bool:
        return self.value is not None

    async def acquire(self) -> bool:
        got: Any = await self.store.eval(_ACQUIRE, 2, self.key, self.key + ":fence", self.owner, self.ttl_ms)
        self.value = str(got) if got else None
        if self.value and self._renewer is None:
            self._renewer = asyncio.get_running_loop().create_task(self._renew_loop())
        return self.value is not None

    async def _renew_loop(self) -> None:
        period = self.ttl_ms / 3000
        failing = False
        while self.value is not None:
            await asyncio.sleep(period)
            # A cancel lost inside the store's call (3.11's wait_for) would renew a dropped lease forever.
            raise_if_cancelled()
            if self.value is None:
                break
            try:
                ok = await self.store.eval(_RENEW, 1, self.key, self.value, self.ttl_ms)
            except Exception:
                # The store away (or any failed call): keep trying; if it lapses, the guarded writes will say so.
                # Said once per outage, not on every tick.
                if not failing:
                    log.warning("lease %s: renewal failed; retrying every %.1f s", self.key, period, exc_info=True)
                failing = True
                continue
            failing = False
            if not ok:
                log.warning("lease %s lost (expired or taken over)", self.key)
                self.value = None
        self._renewer = None

    async def release(self) -> None:
        value, self.value = self.value, None
        if self._renewer is not None:
            self._renewer.cancel()
            self._renewer = None
        if value:
            try:
                await self.store.eval(_RELEASE, 1, self.key, value)
            except Exception:
                # Unreleased, the lease lapses after its TTL: a slower hand-over, not a failure.
                log.warning("lease %s: release failed; it lapses in %d ms", self.key, self.ttl_ms, exc_info=True)

    def drop(self) -> None:
        """Forget the lease without telling Redis (it lapses): for a holder that found itself fenced."""
        self.value = None

    async def guarded_hset(self, key: str, mapping: dict[str, str]) -> bool:
        """Write fields only while this lease is ours; False (and the lease forgotten) if it is not."""
        if self.value is None:
            return False
        args: list[str] = [self.value]
        for k, v in mapping.items():
            args += [k, v]
        ok = await self.store.eval(_GUARDED_HSET, 2, self.key, key, *args)
        if not ok:
            self.drop()
        return bool(ok)

"""A Redis lock per service, so two write actions never run against the same service at once.

SET NX PX with an owner token; release is a Lua compare-and-delete so a holder whose lock expired (and was
taken by someone else) cannot delete the new holder's lock. The TTL makes a dead holder's lock expire.
"""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime

from pydantic import BaseModel

from skills.ports import Store

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class LockHolder(BaseModel):
    token: str
    user_id: str
    what: str
    since: float  # epoch seconds

    def describe(self) -> str:
        at = datetime.fromtimestamp(self.since, UTC).strftime("%H:%M:%S UTC")
        mins = max(0, int((time.time() - self.since) // 60))
        return f"{self.what} by <@{self.user_id}> in progress since {at} ({mins} min ago)"


class LockHeld(Exception):
    def __init__(self, holder: LockHolder | None) -> None:
        super().__init__(holder.describe() if holder else "another change is in progress")
        self.holder = holder


class ServiceLock:
    def __init__(self, store: Store, key: str, ttl_s: int) -> None:
        self._store = store
        self._key = key
        self._ttl_ms = int(ttl_s * 1000)
        self._value: str | None = None

    async def holder(self) -> LockHolder | None:
        raw = await self._store.get(self._key)
        return LockHolder.model_validate_json(raw) if raw else None

    async def acquire(self, user_id: str, what: str) -> LockHolder:
        """Take the lock or raise LockHeld naming who holds it."""
        me = LockHolder(token=secrets.token_hex(8), user_id=user_id, what=what, since=time.time())
        value = me.model_dump_json()
        if await self._store.set(self._key, value, nx=True, px=self._ttl_ms):
            self._value = value
            return me
        raise LockHeld(await self.holder())

    async def release(self) -> bool:
        if self._value is None:
            return False
        released = await self._store.eval(_RELEASE, 1, self._key, self._value)
        self._value = None
        return bool(released)

"""JSON values kept a short while in Redis: answers from rate-limited APIs (e.g. Slack's usergroups.users.list),
shared by every instance."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from skills.ports import Store


class ShortCache:
    def __init__(self, r: Store, key: Callable[..., str], namespace: str, ttl_s: int) -> None:
        self.r = r
        self.key = key
        self.namespace = namespace
        self.ttl_s = ttl_s

    async def get(self, name: str) -> Any | None:
        raw = await self.r.get(self.key(self.namespace, name))
        return None if raw is None else json.loads(raw)

    async def put(self, name: str, value: Any) -> None:
        await self.r.set(self.key(self.namespace, name), json.dumps(value), ex=self.ttl_s)

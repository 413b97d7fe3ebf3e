"""Plan buttons carry an id; their payload (action and params as JSON) lives in Redis.

Slack caps a button's value at 2,000 characters (https://api.slack.com/reference/block-kit/block-elements#button),
and clipping JSON makes it invalid, so the Slack responders stash every plan button's payload here before
rendering (handlers/button_payloads.py) and the click handler reads it back. Content-addressed: the same
proposal gets the same id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from skills.errors import InvalidInput
from skills.ports import Store

ID_PREFIX = "pb:"
TTL_S = 14 * 24 * 3600  # a proposal older than two weeks is stale anyway: ask again


def is_id(value: str) -> bool:
    return value.startswith(ID_PREFIX)


class PayloadStore:
    def __init__(self, redis: Store, key: Callable[..., str]) -> None:
        self.redis = redis
        self.key = key

    async def put(self, payload: str) -> str:
        """Store a payload; the id a button carries instead."""
        pid = hashlib.sha256(payload.encode()).hexdigest()[:32]
        await self.redis.set(self.key("button", pid), payload, ex=TTL_S)
        return ID_PREFIX + pid

    async def resolve(self, value: str) -> str:
        """The payload a clicked button stands for (a value that is no id is the payload itself)."""
        if not is_id(value):
            return value
        found = await self.redis.get(self.key("button", value[len(ID_PREFIX) :]))
        if found is None:
            raise InvalidInput("This proposal has expired.", "Ask for the plan again.")
        return found.decode() if isinstance(found, bytes) else str(found)

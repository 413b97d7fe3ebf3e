"""Plan buttons carry an id; their payload (action and params as JSON) lives in Redis.

Slack caps a button's value at 2,000 characters (https://api.slack.com/reference/block-kit/block-elements#button),
and clipping JSON makes it invalid, so the Slack responders stash every plan button's payload here before
rendering and the click handler reads it back. Content-addressed: the same proposal gets the same id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import redis.asyncio as redis

from skills.errors import InvalidInput

from .reply import PLAN_ACTION, Reply

ID_PREFIX = "pb:"
TTL_S = 14 * 24 * 3600  # a proposal older than two weeks is stale anyway: ask again


class ButtonPayloads:
    def __init__(self, store: redis.Redis, key: Callable[..., str]) -> None:
        self.redis = store
        self.key = key

    async def stash(self, reply: Reply) -> Reply:
        """A copy of `reply` whose plan buttons carry ids; the payloads are stored first."""
        if not any(b.action_id == PLAN_ACTION and not b.value.startswith(ID_PREFIX) for b in reply.buttons):
            return reply
        out = reply.model_copy(deep=True)
        for b in out.buttons:
            if b.action_id != PLAN_ACTION or b.value.startswith(ID_PREFIX):
                continue
            pid = hashlib.sha256(b.value.encode()).hexdigest()[:32]
            await self.redis.set(self.key("button", pid), b.value, ex=TTL_S)
            b.value = ID_PREFIX + pid
        return out

    async def resolve(self, value: str) -> str:
        """The payload a clicked button stands for (a value that is no id is the payload itself)."""
        if not value.startswith(ID_PREFIX):
            return value
        found = await self.redis.get(self.key("button", value[len(ID_PREFIX) :]))
        if found is None:
            raise InvalidInput("This proposal has expired.", "Ask for the plan again.")
        return found.decode() if isinstance(found, bytes) else str(found)

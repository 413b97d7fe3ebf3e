"""Plans for write actions: what will change, stored in Redis for a limited time, confirmed at most once.

A plan is computed when someone asks for a write (a command or a plan button) and executed only when a
deployer confirms it. Storing the computed spec (not just the request) means what runs is exactly what was
shown. The plan key's TTL is the confirm window; a separate claim key (SET NX) makes confirm one-shot.
"""

from __future__ import annotations

import json
import time
from typing import Any

from skills.ports import Store
from skills.targets.plan import Plan


class PlanStore:
    def __init__(self, store: Store, key_prefix: str, ttl_s: int) -> None:
        self._store = store
        self._prefix = key_prefix  # e.g. settings.key("plan")
        self.ttl_s = ttl_s

    def _key(self, plan_id: str) -> str:
        return f"{self._prefix}:{plan_id}"

    def _claim_key(self, plan_id: str) -> str:
        return f"{self._prefix}:{plan_id}:claim"

    def _by_key(self, plan_id: str) -> str:
        return f"{self._prefix}:{plan_id}:by"

    async def save(self, plan: Plan) -> Plan:
        plan.expires_at = plan.created_at + self.ttl_s
        await self._store.set(self._key(plan.id), plan.model_dump_json(), ex=self.ttl_s)
        # Who proposed it outlives the plan (a confirm consumes it) as long as its claim and progress do, so a
        # follower may be told about a plan only if it is the proposer (MCP's plan_status).
        await self._store.set(self._by_key(plan.id), plan.created_by, ex=self.ttl_s * 4)
        return plan

    async def proposed_by(self, plan_id: str) -> str | None:
        if not plan_id or len(plan_id) > 64:
            return None
        raw = await self._store.get(self._by_key(plan_id))
        if not raw:
            return None
        return raw.decode() if isinstance(raw, bytes) else str(raw)

    async def set_message(self, plan: Plan, message_ts: str) -> None:
        """Remember the plan message (posted after the plan was stored), keeping the plan's own expiry."""
        plan.message_ts = message_ts
        left_ms = int((plan.expires_at - time.time()) * 1000)
        if left_ms > 0:
            await self._store.set(self._key(plan.id), plan.model_dump_json(), px=left_ms, xx=True)

    async def get(self, plan_id: str) -> Plan | None:
        if not plan_id or len(plan_id) > 64:
            return None
        raw = await self._store.get(self._key(plan_id))
        if not raw:
            return None
        plan = Plan.model_validate_json(raw)
        return None if plan.expired() else plan

    async def claim(self, plan_id: str, user_id: str) -> bool:
        """One-shot: True for the first caller only (a double click gets False)."""
        # Kept longer than the plan so a late second click still learns who confirmed it.
        return bool(await self._store.set(self._claim_key(plan_id), user_id, nx=True, ex=self.ttl_s * 4))

    async def claimed_by(self, plan_id: str) -> str | None:
        raw = await self._store.get(self._claim_key(plan_id))
        return str(raw) if raw else None

    async def unclaim(self, plan_id: str) -> None:
        await self._store.delete(self._claim_key(plan_id))

    def _progress_key(self, plan_id: str) -> str:
        return f"{self._prefix}:{plan_id}:progress"

    async def set_progress(self, plan_id: str, progress: dict[str, Any]) -> None:
        """The latest progress of a confirmed plan's write, for whoever follows it from another surface (MCP's
        plan_status); kept as long as the claim."""
        await self._store.set(self._progress_key(plan_id), json.dumps(progress), ex=self.ttl_s * 4)

    async def progress(self, plan_id: str) -> dict[str, Any] | None:
        if not plan_id or len(plan_id) > 64:
            return None
        raw = await self._store.get(self._progress_key(plan_id))
        return json.loads(raw) if raw else None

    async def discard(self, plan_id: str) -> bool:
        return bool(await self._store.delete(self._key(plan_id)))

"""What `/gemma eval` keeps in Redis: plans waiting for their Run click (single use) and the one-evaluation-at-a-
time lock (an evaluation sends real requests to the model, like a benchmark)."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, Field

from skills.locks import ServiceLock
from skills.ports import Store

LOCK_TTL_S = 3600  # a dead runner's lock lapses after this (an evaluation of every scenario takes minutes)


class EvalPlan(BaseModel):
    id: str
    names: list[str] = Field(default_factory=list)  # empty: every bundled scenario
    user_id: str = ""
    channel_id: str = ""


class EvalPlans:
    def __init__(self, r: Store, key: Callable[..., str], plan_ttl_s: int) -> None:
        self.r = r
        self.key = key
        self.plan_ttl_s = plan_ttl_s

    async def save(self, plan: EvalPlan) -> None:
        await self.r.set(self.key("eval", "plan", plan.id), plan.model_dump_json(), ex=self.plan_ttl_s)

    async def get(self, plan_id: str) -> EvalPlan | None:
        raw = await self.r.get(self.key("eval", "plan", plan_id))
        return EvalPlan.model_validate_json(raw) if raw else None

    async def take(self, plan_id: str) -> EvalPlan | None:
        """The plan, removed as it is read: a double click runs it once."""
        raw = await self.r.getdel(self.key("eval", "plan", plan_id))
        return EvalPlan.model_validate_json(raw) if raw else None

    async def drop(self, plan_id: str) -> None:
        await self.r.delete(self.key("eval", "plan", plan_id))

    def lock(self) -> ServiceLock:
        return ServiceLock(self.r, self.key("eval", "lock"), LOCK_TTL_S)

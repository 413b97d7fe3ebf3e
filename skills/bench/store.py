"""What the benchmark keeps in Redis: plans waiting for Confirm (single use), Stop requests, the one-sweep-at-a-
time lock, and the history `bench compare` reads."""

from __future__ import annotations

from collections.abc import Callable

from skills.bench import report
from skills.bench.loadgen import SweepResult
from skills.bench.sweep_preview import SweepPreview
from skills.locks import ServiceLock
from skills.ports import Store

STOP_TTL_S = 3600


class BenchStore:
    def __init__(self, r: Store, key: Callable[..., str], plan_ttl_s: int) -> None:
        self.r = r
        self.key = key
        self.plan_ttl_s = plan_ttl_s

    async def save_preview(self, plan: SweepPreview) -> None:
        await self.r.set(self.key("bench", "plan", plan.id), plan.model_dump_json(), ex=self.plan_ttl_s)

    async def take_preview(self, plan_id: str) -> SweepPreview | None:
        """The plan, removed as it is read: a double click on Confirm runs it once."""
        raw = await self.r.getdel(self.key("bench", "plan", plan_id))
        return SweepPreview.model_validate_json(raw) if raw else None

    async def get_preview(self, plan_id: str) -> SweepPreview | None:
        raw = await self.r.get(self.key("bench", "plan", plan_id))
        return SweepPreview.model_validate_json(raw) if raw else None

    async def drop_preview(self, plan_id: str) -> None:
        await self.r.delete(self.key("bench", "plan", plan_id))

    async def request_stop(self, plan_id: str, user_id: str) -> None:
        await self.r.set(self.key("bench", "stop", plan_id), user_id, ex=STOP_TTL_S)

    async def stop_requested(self, plan_id: str) -> bool:
        return bool(await self.r.exists(self.key("bench", "stop", plan_id)))

    async def clear_stop(self, plan_id: str) -> None:
        await self.r.delete(self.key("bench", "stop", plan_id))

    def lock(self, ttl_s: int) -> ServiceLock:
        """One sweep at a time, whichever instance runs it."""
        return ServiceLock(self.r, self.key("bench", "lock"), ttl_s)

    async def save_sweep(self, result: SweepResult) -> None:
        await report.save_sweep(self.r, self.key("bench", "history"), result)

    async def recent_sweeps(self, n: int) -> list[SweepResult]:
        return await report.recent_sweeps(self.r, self.key("bench", "history"), n)

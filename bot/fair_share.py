"""Fair shares of the work started after an ack: one user, or one kind of work, cannot take every slot.

Each piece of background work has a kind and a user. It runs once it holds a slot of its own (user, kind) --
a few per user -- and then a slot of its kind's pool. So:
- 24 questions from one user hold that user's few "read" slots; the rest of them wait in that user's queue,
  holding nothing, and other users' commands go by;
- a write's plan ("write": plan commands and plan buttons) never waits behind reads: writes have their pool;
- long runs (a deploy's progress watch, a benchmark, an eval: minutes each) are "watch" work, counted in their
  own pool, so a few running deploys do not hold the slots that quick commands need. Work that turns long
  part-way (a confirmed deploy) moves itself there with `watching()`.
Sizes are our choice, not measured: a 2-vCPU instance serves a few concurrent model calls well (estimates).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

KINDS = ("write", "read", "watch", "system")
POOL = {"write": 6, "read": 10, "watch": 8, "system": 4}  # slots per kind, this process
PER_USER = {"write": 2, "read": 3, "watch": 2, "system": 4}  # slots per (user, kind)


@dataclass
class _Held:
    """The semaphores one piece of work holds, released once whatever path gets there first."""

    sems: list[asyncio.Semaphore] = field(default_factory=list)
    keys: list[tuple[str, str]] = field(default_factory=list)

    def release(self, shares: FairShares) -> None:
        while self.sems:
            self.sems.pop().release()
        while self.keys:
            shares._unref(self.keys.pop())


_current: contextvars.ContextVar[_Held | None] = contextvars.ContextVar("fair_share_slot", default=None)


class FairShares:
    def __init__(self, pool: dict[str, int] | None = None, per_user: dict[str, int] | None = None) -> None:
        self.pool = {k: asyncio.Semaphore(n) for k, n in (pool or POOL).items()}
        self.per_user_size = per_user or PER_USER
        self._users: dict[tuple[str, str], tuple[asyncio.Semaphore, int]] = {}  # (user, kind) -> (sem, refs)

    def _ref(self, key: tuple[str, str]) -> asyncio.Semaphore:
        sem, refs = self._users.get(key) or (asyncio.Semaphore(self.per_user_size[key[1]]), 0)
        self._users[key] = (sem, refs + 1)
        return sem

    def _unref(self, key: tuple[str, str]) -> None:
        sem, refs = self._users[key]
        if refs <= 1:
            del self._users[key]  # nobody holds or waits: forget the user
        else:
            self._users[key] = (sem, refs - 1)

    async def _take(self, held: _Held, kind: str, user: str) -> None:
        if kind not in self.pool:
            raise ValueError(f"unknown kind of background work {kind!r} (one of {', '.join(KINDS)})")
        key = (user, kind)
        sem = self._ref(key)
        held.keys.append(key)
        await sem.acquire()
        held.sems.append(sem)
        await self.pool[kind].acquire()
        held.sems.append(self.pool[kind])

    @contextlib.asynccontextmanager
    async def slot(self, kind: str, user: str) -> AsyncIterator[None]:
        held = _Held()
        token = _current.set(held)
        try:
            await self._take(held, kind, user)
            yield
        finally:
            held.release(self)
            _current.reset(token)

    @contextlib.asynccontextmanager
    async def watching(self, user: str) -> AsyncIterator[None]:
        """Move the running work from its slot to a "watch" slot for a long wait (a deploy's progress)."""
        held = _current.get()
        if held is not None:
            held.release(self)
        moved = _Held()
        try:
            await self._take(moved, "watch", user)
            yield
        finally:
            moved.release(self)

    def queued(self) -> int:
        """Pieces of work holding or waiting for a per-user slot (the bench and tests read it)."""
        return sum(refs for _, refs in self._users.values())

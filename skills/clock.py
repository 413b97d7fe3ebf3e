"""Clocks: the real one, and a scaled one that tests and benches inject so that waiting for time to pass
(rate-limit windows, Retry-After, coalescing intervals) costs no wall-clock time.

Both the bot (pacing, debouncing, Retry-After waits) and the Slack stand-in (its rate-limit buckets) take a
`Clock`, so in a test they share one notion of time.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds; comparable across the processes that share this clock's state."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    """Epoch seconds: instances on different machines compare times recorded in Redis (storm windows,
    coalescing, debounce), which a per-machine monotonic clock could not do."""

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))


class ScaledClock:
    """Time that runs `speed` times faster than the wall clock, and can be jumped forward with `advance`.

    Thread-safe (the Slack stand-in serves from another thread). A 1-second Retry-After at speed 100 takes
    10 ms; `advance(3600)` ends an hour-long coalescing interval at once.
    """

    def __init__(self, speed: float = 100.0) -> None:
        self.speed = speed
        self._t0 = time.monotonic()
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return (time.monotonic() - self._t0) * self.speed + self._offset

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += seconds

    async def sleep(self, seconds: float) -> None:
        deadline = self.now() + max(seconds, 0.0)
        # `advance` may end the wait early, so re-check in short slices
        while (left := deadline - self.now()) > 0:  # noqa: ASYNC110
            await asyncio.sleep(min(left / self.speed, 0.05))


REAL_CLOCK = RealClock()

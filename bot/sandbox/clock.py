"""The sandbox clock: simulated seconds that run `speed` times faster than the wall clock.

A GPU cold start takes minutes (field notes: 12B QAT 4-5 min, 26B QAT ~11 min of weight loading); at the
default speed of 30 a five-minute start plays in ten seconds, so every phase the bot reports is visible.
Tests call `advance()` (or use speed 0: time moves only when told) instead of sleeping.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

DEFAULT_SPEED = 30.0  # simulated seconds per real second (SANDBOX_SPEED)


class SandboxClock:
    def __init__(self, speed: float = DEFAULT_SPEED, monotonic: Callable[[], float] = time.monotonic) -> None:
        if speed < 0:
            raise ValueError("the sandbox clock's speed cannot be negative")
        self.speed = speed
        self._monotonic = monotonic
        self._origin = monotonic()
        self._offset = 0.0  # simulated seconds added by advance()
        self._lock = threading.Lock()

    def now(self) -> float:
        """Simulated seconds since the sandbox started."""
        with self._lock:
            return (self._monotonic() - self._origin) * self.speed + self._offset

    def advance(self, seconds: float) -> None:
        """Move simulated time forward at once (tests; `/gemma sandbox` never needs it)."""
        if seconds < 0:
            raise ValueError("the sandbox clock only moves forward")
        with self._lock:
            self._offset += seconds

    def real_seconds(self, simulated: float) -> float:
        """How long `simulated` seconds take on the wall clock at this speed (inf when stopped)."""
        return simulated / self.speed if self.speed else float("inf")

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` of simulated time (skills.clock.Clock): the incident pipeline's intervals (coalescing,
        the fix follow-up) then pass at the sandbox's speed. At most a quarter second of real time per call, so
        a stopped clock (speed 0, moved only by advance()) is polled rather than waited on forever."""
        await asyncio.sleep(min(self.real_seconds(max(seconds, 0.0)), 0.25))

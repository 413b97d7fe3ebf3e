"""A clock that moves only when something sleeps on it: retry and backoff tests wait no wall-clock time."""

from __future__ import annotations


class FakeTime:
    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

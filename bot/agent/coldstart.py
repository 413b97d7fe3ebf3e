"""Waiting out a cold model service instead of failing.

A Cloud Run GPU service scaled to zero answers the first request only after an instance has started and
vLLM has loaded the weights: minutes. Meanwhile the call fails with connection refused, 503, 429 ('no
available instance') or a timeout. We retry within a budget (the shared policy, skills/retrying.py) and tell
the user once, with the planner's estimate of the cold start, so the thread says "the model is starting"
rather than "error".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from skills.errors import UserFacingError
from skills.retrying import Clock, RetryPolicy, Sleep, retry_call

log = logging.getLogger(__name__)

T = TypeVar("T")
Progress = Callable[[str], Awaitable[None]]

COLD_STATUS = frozenset({429, 502, 503, 504})
DEFAULT_COLD_START_MIN = 5.0  # without a planner estimate: a 12B QAT model over GCS FUSE, as reported


class ModelUnavailable(UserFacingError):
    """The model did not answer within the cold-start budget."""


def is_cold(exc: BaseException, *, warm: bool) -> bool:
    """Errors a starting service produces. Once the model has answered in this run, a timeout is slowness
    (not a cold start) and is not retried."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return not warm
    if isinstance(exc, openai.APIConnectionError):
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code in COLD_STATUS


class ColdStart:
    """Retry policy for one conversation with the model; remembers whether the model already answered."""

    def __init__(
        self,
        budget_s: float,
        estimate_min: Callable[[], Awaitable[float | None]] | None = None,
        progress: Progress | None = None,
        initial_backoff_s: float = 2.0,
        max_backoff_s: float = 30.0,
        *,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.budget_s = budget_s
        self._estimate = estimate_min  # asked only when a cold start is actually seen
        self.progress = progress
        self.initial_backoff_s = initial_backoff_s
        self.max_backoff_s = max_backoff_s
        self._clock = clock
        self._sleep = sleep
        self.warm = False
        self.waited_s = 0.0  # time spent waiting for the model to start (not counted in the time budget)
        self.retries = 0
        self._told = False

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        import openai

        policy = RetryPolicy(
            what="model service",
            transient=lambda exc: is_cold(exc, warm=self.warm),
            budget_s=self.budget_s,
            initial_s=self.initial_backoff_s,
            max_s=self.max_backoff_s,
            jitter_s=self.initial_backoff_s / 4,
            clock=self._clock,
            sleep=self._sleep,
            log=log,
            describe=_describe,
        )

        async def before_wait(exc: BaseException, _attempt: int, _wait_s: float) -> None:
            await self._tell(exc)
            self.retries += 1

        started = self._clock()
        retries_before = self.retries
        try:
            result = await retry_call(policy, fn, on_retry=before_wait)
        except openai.OpenAIError as exc:
            elapsed = self._clock() - started
            if not is_cold(exc, warm=self.warm):
                self.waited_s += elapsed if self.retries > retries_before else 0.0
                raise
            self.waited_s += elapsed  # still cold when the next wait would pass the budget
            raise ModelUnavailable(
                f"The model did not answer within {self.budget_s / 60:.0f} min ({_describe(exc)}).",
                "Check `/gemma status`: a service at zero may need longer, or may fail to start.",
            ) from None
        if self.retries > retries_before:
            self.waited_s += self._clock() - started
        self.warm = True
        return result

    async def _tell(self, exc: BaseException) -> None:
        if self._told or self.progress is None:
            return
        self._told = True
        minutes = DEFAULT_COLD_START_MIN
        source = "typical"
        if self._estimate is not None:
            try:
                planned = await self._estimate()
            except Exception as err:  # noqa: BLE001 - an estimate is a nicety; never fail the wait over it
                log.warning(
                    "cold-start estimate failed (%s: %s); using the typical time", type(err).__name__, str(err)[:200]
                )
                planned = None
            if planned:
                minutes, source = planned, "the planner estimates"
        await self.progress(
            f":hourglass_flowing_sand: The model is starting ({_describe(exc)}); {source} cold start "
            f"~{max(1, round(minutes))} min. I will keep trying for up to {self.budget_s / 60:.0f} min."
        )


def _describe(exc: BaseException) -> str:
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return "no answer yet"
    if isinstance(exc, openai.APIConnectionError):
        return "connection refused"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    return type(exc).__name__

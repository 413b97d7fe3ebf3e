"""The one retry policy (tenacity underneath) for calls that can fail for a moment: cloud API reads, a model
service waking from zero, the alert queue's Redis reads, the Pub/Sub pull, the deploy watch's polls.

A policy says what is worth another try, how long the caller can wait in all (`budget_s`; None for a
background loop that never gives up), and how the wait grows (exponential with jitter, capped). A retry never
sleeps past the budget: when the next wait would cross it, the last error is raised instead. Every retry is
one WARNING line naming the call, the error and the wait. The clock and the sleep are injectable so tests
never wait.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_exponential_jitter

from skills.cancellation import raise_if_cancelled
from skills.logs.redact import redact

T = TypeVar("T")
Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]
OnRetry = Callable[[BaseException, int, float], Awaitable[None]]

_log = logging.getLogger(__name__)


def describe_error(exc: BaseException) -> str:
    """`Type: message` with credentials masked and long messages cut: what a retry line says."""
    text = redact(str(exc)).strip()
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


@dataclass(frozen=True)
class RetryPolicy:
    what: str  # names the call in the log line ("Cloud Run: service x", "alert worker")
    transient: Callable[[BaseException], bool]
    budget_s: float | None = None
    initial_s: float = 1.0
    max_s: float = 30.0
    jitter_s: float = 1.0
    clock: Clock = time.monotonic
    sleep: Sleep = asyncio.sleep
    log: logging.Logger = field(default=_log)
    describe: Callable[[BaseException], str] = describe_error
    traceback: Callable[[BaseException], bool] = lambda _exc: False  # add the stack (unexpected errors only)


async def retry_call(policy: RetryPolicy, fn: Callable[[], Awaitable[T]], on_retry: OnRetry | None = None) -> T:
    """`await fn()` until it returns, a non-transient error, or the budget; the last error is re-raised as is.
    `on_retry(exc, attempt, wait_s)` runs before each wait (a progress note, a counter)."""
    start = policy.clock()

    def out_of_budget(state: RetryCallState) -> bool:
        if policy.budget_s is None:
            return False
        return policy.clock() - start + (state.upcoming_sleep or 0.0) > policy.budget_s

    async def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        if exc is None:  # pragma: no cover - tenacity only sleeps after a failed attempt here
            return
        wait = state.upcoming_sleep
        policy.log.warning(
            "%s: %s; retry %d in %.1fs",
            policy.what,
            policy.describe(exc),
            state.attempt_number,
            wait,
            exc_info=exc if policy.traceback(exc) else None,
        )
        if on_retry is not None:
            await on_retry(exc, state.attempt_number, wait)

    retrying = AsyncRetrying(
        # A cancelled task is never retried, whatever the policy's predicate says.
        retry=retry_if_exception(lambda e: not isinstance(e, asyncio.CancelledError) and policy.transient(e)),
        wait=wait_exponential_jitter(multiplier=policy.initial_s, max=policy.max_s, jitter=policy.jitter_s),
        stop=out_of_budget,
        sleep=policy.sleep,
        before_sleep=before_sleep,
        reraise=True,
    )
    async for attempt in retrying:
        # Every poll and worker loop retries through here: a cancel a call below lost (Python 3.11's wait_for,
        # skills/cancellation.py) stops the next attempt instead of polling on.
        raise_if_cancelled()
        with attempt:
            return await fn()
    raise AssertionError("unreachable: tenacity either returns or raises")  # pragma: no cover

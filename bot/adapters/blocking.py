"""One bounded thread pool per blocking cloud client, and per-call deadlines in the client's own terms.

The Google clients used here are synchronous. Run on asyncio's shared default pool, one unreachable service
(Monitoring blackholed) kept every worker busy in retries long after the async side had given up, and every
other command queued behind it. So each client gets its own few threads, a cap on calls waiting for them
(past it: a clear "busy" error at once, not a queue that grows), and a deadline passed to the client itself
(each attempt's `timeout`; retries are the shared policy's, skills/retrying.py, on the async side): a thread
cannot be killed, so each call must stop itself.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from skills.errors import CloudUnavailable

T = TypeVar("T")
log = logging.getLogger(__name__)


class BlockingPool:
    """A named, bounded executor for one blocking client."""

    def __init__(self, name: str, threads: int, max_waiting: int | None = None) -> None:
        self.name = name
        self.threads = max(1, threads)
        self.max_waiting = self.threads * 4 if max_waiting is None else max_waiting
        self._executor = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix=f"cloud-{name}")
        # Calls running or queued in the pool. Counted down when the thread finishes, not when the caller
        # stops waiting (a caller's timeout leaves the thread running until the client's deadline).
        self._in_flight = 0
        self._lock = threading.Lock()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def _done(self, _: object) -> None:
        with self._lock:
            self._in_flight -= 1

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        with self._lock:
            busy = self._in_flight >= self.threads + self.max_waiting
            if not busy:
                self._in_flight += 1
        if busy:
            log.warning("%s: %d calls already in flight; refusing another", self.name, self._in_flight)
            raise CloudUnavailable(
                f"{self.name} is not answering: {self._in_flight} calls are already waiting for it.",
                "Other commands still work; try this one again in a minute.",
            )
        ctx = contextvars.copy_context()
        try:
            fut = self._executor.submit(functools.partial(ctx.run, fn, *args))
        except RuntimeError:  # shut down
            self._done(None)
            raise CloudUnavailable(f"{self.name} client is shut down.") from None
        fut.add_done_callback(self._done)
        return await asyncio.wrap_future(fut)

    def shutdown(self) -> None:
        """Drop queued calls; running ones end at their own deadline (threads cannot be interrupted)."""
        self._executor.shutdown(wait=False, cancel_futures=True)

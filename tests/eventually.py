"""The one polling helper: wait for a condition from inside the event loop (the app's background work runs on
it), instead of sleeping for a guessed time."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any


def _where(predicate: Callable[[], Any]) -> str:
    code = getattr(predicate, "__code__", None)
    return f" ({code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno})" if code is not None else ""


async def eventually(predicate: Callable[[], Any], timeout: float = 15.0) -> Any:  # noqa: ASYNC109
    """Return the first truthy result of `predicate()` (awaited if it returns an awaitable), polling every
    20 ms. If it is still falsy after `timeout` seconds, raise AssertionError with the last result: a wait
    that times out fails the test even when its caller forgets to assert. (A test that expects nothing to
    happen does not wait for it: it advances its injected clock, then asserts.)"""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if loop.time() >= deadline:
            last = repr(result)
            last = last if len(last) <= 500 else last[:500] + "…"
            raise AssertionError(f"condition{_where(predicate)} never held within {timeout} s; last saw {last}")
        await asyncio.sleep(0.02)

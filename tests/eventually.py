"""The one polling helper: wait for a condition from inside the event loop (the app's background work runs on
it), instead of sleeping for a guessed time."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any


async def eventually(predicate: Callable[[], Any], timeout: float = 15.0) -> Any:  # noqa: ASYNC109
    """Return the first truthy result of `predicate()` (awaited if it returns an awaitable), polling every
    20 ms; after `timeout` seconds return its last (falsy) result, for the caller's assert to report."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result or loop.time() >= deadline:
            return result
        await asyncio.sleep(0.02)

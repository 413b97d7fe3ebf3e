"""Poll a condition from inside the event loop (the app's background work runs on it)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any


async def eventually(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:  # noqa: ASYNC109
    """Poll without blocking the event loop (the app's background work runs on it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        await asyncio.sleep(0.02)
    return predicate()

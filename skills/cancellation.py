"""Honour a cancellation that something below swallowed, in loops that poll for minutes.

On Python 3.11, `asyncio.wait_for` returns the inner result instead of raising when its task is cancelled in the
same loop step as the inner future finishes (CPython gh-86296; 3.12 rebuilt wait_for on asyncio.timeout). redis-py
sends every command through `wait_for` when a socket timeout is set, which is its default (5 s,
redis/_defaults.py), so a deploy watch cancelled while it recorded its progress in Redis lost the cancellation and
polled on. The task still counts the request (`Task.cancelling()`), so a poll loop that checks it each turn stops
as asked.
"""

from __future__ import annotations

import asyncio


def raise_if_cancelled() -> None:
    """Raise CancelledError if the current task was asked to cancel and is still running (the request was lost)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError

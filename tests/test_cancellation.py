"""A poll loop stops when its task is cancelled, even when a call below lost the cancellation (Python 3.11's
asyncio.wait_for, which redis-py sends every command through: skills/cancellation.py)."""

from __future__ import annotations

import asyncio

import pytest

from skills.cancellation import raise_if_cancelled


async def _poll_after_a_lost_cancel(inner: asyncio.Future[str], turns: list[int]) -> str:
    # A call that returns its result although the task was cancelled meanwhile (3.11's wait_for when the inner
    # future finishes in the same step as the cancel; emulated by catching it where wait_for does).
    try:
        await asyncio.wait_for(inner, timeout=5)
    except asyncio.CancelledError:
        if not inner.done():
            raise
    for turn in range(1000):  # the watch's poll loop
        raise_if_cancelled()
        turns.append(turn)
        await asyncio.sleep(0)
    return "polled on"


async def test_a_poll_loop_stops_when_a_call_below_lost_the_cancellation() -> None:
    loop = asyncio.get_running_loop()
    inner: asyncio.Future[str] = loop.create_future()
    turns: list[int] = []
    task = asyncio.ensure_future(_poll_after_a_lost_cancel(inner, turns))
    await asyncio.sleep(0)  # the task now waits inside wait_for
    inner.set_result("OK")  # the command's answer arrives ...
    task.cancel()  # ... in the same step as the cancel
    with pytest.raises(asyncio.CancelledError):
        await task
    assert turns == []  # not one more poll


async def test_an_uncancelled_task_polls_on() -> None:
    loop = asyncio.get_running_loop()
    inner: asyncio.Future[str] = loop.create_future()
    inner.set_result("OK")
    turns: list[int] = []
    assert await _poll_after_a_lost_cancel(inner, turns) == "polled on"
    assert len(turns) == 1000


async def test_retry_call_starts_no_attempt_after_a_lost_cancel() -> None:
    """The shared retry loop (every poll and worker goes through it) checks before each attempt."""
    import logging

    from skills.retrying import RetryPolicy, retry_call

    calls: list[int] = []

    async def call() -> str:
        calls.append(1)
        return "answered"

    async def lost_then_retried() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            pass  # lost below, as 3.11's wait_for can
        policy = RetryPolicy(what="t", transient=lambda _e: True, log=logging.getLogger("t"))
        return await retry_call(policy, call)

    task = asyncio.ensure_future(lost_then_retried())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert calls == []

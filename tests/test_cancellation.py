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


class _AnswersAsCancelled:
    """A real Redis whose next eval answers in the same loop step as its task is cancelled: the race in which
    3.11's wait_for (redis-py sends every command through it) returns the answer and drops the cancel."""

    def __init__(self, redis) -> None:
        self.redis = redis
        self.entered = asyncio.Event()
        self.inner: asyncio.Future[None] | None = None

    async def eval(self, *args):
        answer = await self.redis.eval(*args)
        if self.inner is not None:
            self.entered.set()
            try:
                await asyncio.wait_for(self.inner, timeout=5)
            except asyncio.CancelledError:
                if not self.inner.done():
                    raise
            self.inner = None
        return answer


async def test_a_lease_renewer_stops_when_its_cancel_was_lost(redis_client) -> None:
    """A renewer cancelled as the loop shuts down (the lease never released) must not renew forever: a CI run
    hung 300 s at teardown on a heartbeat loop doing exactly this."""
    from skills.leases import Lease

    store = _AnswersAsCancelled(redis_client)
    lease = Lease(store, "test:lost-cancel:lease", ttl_ms=150)  # type: ignore[arg-type]
    assert await lease.acquire()
    renewer = lease._renewer
    assert renewer is not None
    store.inner = asyncio.get_running_loop().create_future()
    await asyncio.wait_for(store.entered.wait(), timeout=5)  # the renewer is inside a renewal
    store.inner.set_result(None)
    renewer.cancel()  # the one cancel the event loop's shutdown sends
    done, _ = await asyncio.wait({renewer}, timeout=2)
    assert done == {renewer} and renewer.cancelled()
    await redis_client.delete("test:lost-cancel:lease", "test:lost-cancel:lease:fence")

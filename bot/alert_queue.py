"""The durable alert queue: a Redis Stream with a consumer group, and the workers that drain it.

- `enqueue` (the webhook's hot path) is one Redis round trip: a Lua script that drops duplicates (SET NX with
  a TTL on the alert's dedup key) and XADDs the rest, atomically.
- Workers run in the bot process (every instance when Cloud Run scales out). An entry is acknowledged only
  after its handler returned, i.e. after its Slack effects are recorded in Redis. A failed entry stays
  pending and is retried when it has been idle for `alert_reclaim_idle_ms` (XAUTOCLAIM), by any worker; an
  entry still being worked on is kept fresh by a heartbeat, so a slow job is not stolen. After
  `alert_max_attempts` it goes to the dead-letter stream and the dead-letter handler says so in Slack.
- Redis going away is survived: workers back off and reconnect, and re-create the group if it vanished.
- A job only records the alert (skills/incidents/threads.py); the Slack calls are made by the incident publisher that
  starts and stops with the workers (`publisher`), so a slow or rate-limited Slack never holds an entry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from pydantic import ValidationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bot.deps import Deps
from skills.cancellation import raise_if_cancelled
from skills.clock import REAL_CLOCK, Clock
from skills.incidents.model import Alert
from skills.logs.redact import redact
from skills.retrying import RetryPolicy, Sleep, describe_error, retry_call

log = logging.getLogger(__name__)

GROUP = "alert-workers"

# KEYS[1] stream, KEYS[2..n+1] dedup keys; ARGV[1] dedup TTL ms, ARGV[2..n+1] alert JSON. Returns 1 per new.
_ENQUEUE = """
local out = {}
for i = 2, #KEYS do
  if redis.call('SET', KEYS[i], '1', 'NX', 'PX', ARGV[1]) then
    redis.call('XADD', KEYS[1], '*', 'alert', ARGV[i])
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
"""

# Reset the entry's idle time only while this consumer still owns it (never steal it back).
_HEARTBEAT = """
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if p[1] and p[1][2] == ARGV[3] then
  redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[2], 'JUSTID')
  return 1
end
return 0
"""


class Companion(Protocol):
    """A background service that runs alongside the workers (the incident publisher)."""

    async def start(self) -> None: ...

    async def stop(self, grace_s: float = 5.0) -> None: ...

    async def pending(self) -> int: ...


JobHandler = Callable[[str, Alert], Awaitable[None]]
DeadHandler = Callable[[str, Alert | None, str, int], Awaitable[None]]
_REDIS_DOWN = (RedisConnectionError, RedisTimeoutError, ConnectionError, OSError)
STORE_DOWN: tuple[type[BaseException], ...] = (
    _REDIS_DOWN  # what a Redis outage raises (the incident pipeline rides it out)
)


def _describe_worker_error(exc: BaseException) -> str:
    if isinstance(exc, _REDIS_DOWN):
        return f"Redis unavailable ({type(exc).__name__})"
    if isinstance(exc, ResponseError):
        return f"Redis refused a command: {redact(str(exc))[:200]}"
    return f"unexpected error ({describe_error(exc)})"


class AlertQueue:
    def __init__(
        self,
        deps: Deps,
        handle: JobHandler | None = None,
        on_dead: DeadHandler | None = None,
        *,
        concurrency: int = 4,
        consumer_prefix: str | None = None,
        publisher: Companion | None = None,
        backoff_sleep: Sleep | None = None,
    ) -> None:
        self.deps = deps
        # The wait between a worker's failed Redis reads: by default cut short by stop(); a test's own never waits.
        self._backoff_sleep = backoff_sleep or self._sleep
        self.publisher = publisher
        s = deps.settings
        self.stream = s.key("alerts", "stream")
        self.dead_stream = s.key("alerts", "dead")
        self.attempts_key = s.key("alerts", "attempts")
        self.errors_key = s.key("alerts", "errors")
        self.dead_marks = s.key("alerts", "deadmarks")
        self.dedup_ttl_ms = max(s.alert_group_window_s, 300) * 1000
        self.max_attempts = s.alert_max_attempts
        self.idle_ms = s.alert_reclaim_idle_ms
        self.handle = handle
        self.on_dead = on_dead
        self.concurrency = concurrency
        self.consumer_prefix = consumer_prefix or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self._enqueue = deps.redis.register_script(_ENQUEUE)
        self._heartbeat = deps.redis.register_script(_HEARTBEAT)
        self._tasks: list[asyncio.Task[None]] = []
        self._waiting: set[asyncio.Task[None]] = set()  # workers blocked in XREADGROUP, holding no entry
        self._stopping = asyncio.Event()

    # --- producer (webhook hot path) -------------------------------------------------------------------
    def dedup_key(self, alert: Alert) -> str:
        return self.deps.settings.key("alerts", "seen", alert.dedup_key())

    async def enqueue(self, alerts: list[Alert]) -> tuple[int, int]:
        """Queue new alerts, drop duplicates; returns (new, duplicates). Raises on Redis trouble."""
        keys: list[str] = [self.stream]
        args: list[str | int] = [self.dedup_ttl_ms]
        for a in alerts:
            try:  # poison is left out alone (one line); the other alerts of the delivery go on
                keys.append(self.dedup_key(a))
                args.append(a.model_dump_json())
            except Exception as exc:  # noqa: BLE001 - e.g. PydanticSerializationError on a lone surrogate
                del keys[len(args) :]
                log.error("alert %s left out: it cannot be queued (%s)", a.key[:200], describe_error(exc)[:300])
        if len(keys) == 1:
            return 0, 0
        flags = await self._enqueue(keys=keys, args=args)
        new = sum(int(f) for f in flags)
        return new, len(keys) - 1 - new

    # --- workers -----------------------------------------------------------------------------------------
    async def ensure_group(self) -> None:
        try:
            await self.deps.redis.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def start(self) -> None:
        if self.handle is None:
            raise RuntimeError("AlertQueue.start needs a job handler")
        self._stopping.clear()
        with contextlib.suppress(*_REDIS_DOWN):
            await self.ensure_group()  # if Redis is down now, the workers create it when it is back
        for i in range(self.concurrency):
            name = f"{self.consumer_prefix}-{i}"
            self._tasks.append(asyncio.get_running_loop().create_task(self._run(name), name=f"alert-worker-{i}"))
        if self.publisher is not None:
            await self.publisher.start()

    async def stop(self, grace_s: float = 5.0) -> None:
        """Let workers finish the entry in hand, then cancel; unfinished entries stay pending (reclaimed)."""
        self._stopping.set()
        if self.publisher is not None:
            await self.publisher.stop(grace_s)
        if not self._tasks:
            return
        # A worker waiting for entries has nothing to finish: cancel it now rather than after its block
        # (up to 1 s; an entry Redis hands it meanwhile stays pending and is reclaimed).
        for t in self._waiting:
            t.cancel()
        _, pending = await asyncio.wait(self._tasks, timeout=grace_s)
        for t in pending:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def _run(self, consumer: str) -> None:
        reclaim_every = max(self.idle_ms / 2000, 0.05)
        block_ms = int(min(1000, reclaim_every * 1000))
        next_reclaim = [0.0]
        loop = asyncio.get_running_loop()
        # Where this consumer's own pending entries are re-read from ("" : nothing to recover). A Redis error
        # mid-batch leaves the entry in hand and the rest of the batch pending for THIS consumer: `>` never hands
        # them out again, and waiting for the idle reclaim (alert_reclaim_idle_ms, a minute by default, 8 at a
        # time) stalled a burst for minutes after Redis came back. They are re-read from the pending list
        # instead (XREADGROUP with an id, Redis's documented recovery of a consumer's own history), once through.
        recover = ["0"]

        async def step() -> None:
            try:
                await read_step()
            except _REDIS_DOWN:
                recover[0] = "0"
                raise

        async def recover_own() -> None:
            try:
                resp: Any = await self.deps.redis.xreadgroup(GROUP, consumer, {self.stream: recover[0]}, count=8)
            except ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                recover[0] = ""  # the group is gone (Redis lost its data): nothing pending to recover
                return
            entries = [e for _stream, es in resp or [] for e in es]
            if not entries:
                recover[0] = ""
                return
            for entry_id, fields in entries:
                recover[0] = entry_id  # a failed job stays pending for the reclaim: read past it, once
                if not fields:  # deleted while pending
                    await self.deps.redis.xack(self.stream, GROUP, entry_id)
                    continue
                if await self.deps.redis.hexists(self.errors_key, entry_id):
                    continue  # a job that failed: it waits for the reclaim's backoff, not a quick retry
                log.info("alert worker %s resumes its pending entry %s", consumer, entry_id)
                await self._process(consumer, entry_id, fields)

        async def read_step() -> None:
            if self._stopping.is_set():
                return
            if recover[0]:
                await recover_own()
                return
            try:
                if loop.time() >= next_reclaim[0]:
                    next_reclaim[0] = loop.time() + reclaim_every
                    await self._reclaim(consumer)
                me = asyncio.current_task()
                self._waiting.add(me)  # type: ignore[arg-type]
                try:
                    resp: Any = await self.deps.redis.xreadgroup(
                        GROUP, consumer, {self.stream: ">"}, count=8, block=block_ms
                    )
                finally:
                    self._waiting.discard(me)  # type: ignore[arg-type]
            except ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                log.warning("alert queue group missing (Redis restarted?); re-creating it")  # at once: no wait
                with contextlib.suppress(*_REDIS_DOWN, ResponseError):
                    await self.ensure_group()
                return
            for _stream, entries in resp or []:
                for entry_id, fields in entries:
                    await self._process(consumer, entry_id, fields)

        # Never give up (budget None): a worker outlives any Redis outage; the wait restarts after a good read.
        policy = RetryPolicy(
            what="alert worker",
            transient=lambda _exc: True,
            initial_s=0.2,
            max_s=5.0,
            jitter_s=0.1,
            sleep=self._backoff_sleep,
            log=log,
            describe=_describe_worker_error,
            traceback=lambda exc: not isinstance(exc, (*_REDIS_DOWN, ResponseError)),
        )
        while not self._stopping.is_set():
            await retry_call(policy, step)

    async def _sleep(self, s: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), timeout=s)

    async def _reclaim(self, consumer: str) -> None:
        """Take over entries another (dead or failed) worker left pending for longer than the idle limit."""
        res = await self.deps.redis.xautoclaim(
            self.stream, GROUP, consumer, min_idle_time=self.idle_ms, start_id="0-0", count=8
        )
        entries = res[1] if len(res) > 1 else []
        for entry_id, fields in entries:
            if fields is None:  # deleted while pending (Redis 6.2 reports these)
                await self.deps.redis.xack(self.stream, GROUP, entry_id)
                continue
            log.info("alert worker %s reclaimed entry %s", consumer, entry_id)
            await self._process(consumer, entry_id, fields)

    async def _process(self, consumer: str, entry_id: str, fields: dict[str, Any]) -> None:
        r = self.deps.redis
        attempts = int(await r.hincrby(self.attempts_key, entry_id, 1))
        try:
            alert: Alert | None = Alert.model_validate_json(fields["alert"])
        except (KeyError, ValidationError, ValueError, RecursionError) as exc:  # poison: dead-lettered alone
            reason = f"field {exc}" if isinstance(exc, KeyError) else describe_error(exc)
            await self._dead(entry_id, fields, None, f"unreadable queue entry: {redact(reason)[:300]}", attempts)
            return
        assert alert is not None
        if attempts > self.max_attempts:  # e.g. a job that kills its worker every time
            last = str(await r.hget(self.errors_key, entry_id) or "worker stopped mid-job")
            await self._dead(entry_id, fields, alert, last, attempts - 1)
            return
        hb = asyncio.get_running_loop().create_task(self._keepalive(consumer, entry_id))
        try:
            assert self.handle is not None
            await self.handle(entry_id, alert)
        except asyncio.CancelledError:
            raise
        except _REDIS_DOWN:
            raise  # not the job's fault: the worker loop backs off; the entry stays pending
        except Exception as exc:  # noqa: BLE001 - any job failure is retried, then dead-lettered; logged
            err = redact(f"{type(exc).__name__}: {exc}")[:500]
            log.warning("alert entry %s failed (attempt %d/%d): %s", entry_id, attempts, self.max_attempts, err)
            await r.hset(self.errors_key, entry_id, err)
            if attempts >= self.max_attempts:
                await self._dead(entry_id, fields, alert, err, attempts)
            return  # stays pending: retried once idle for alert_reclaim_idle_ms
        finally:
            hb.cancel()
        await self._ack(entry_id)

    async def _keepalive(self, consumer: str, entry_id: str) -> None:
        period = max(self.idle_ms / 3000, 0.03)
        while True:
            await asyncio.sleep(period)
            # `hb.cancel()` is asked once: a cancel lost inside the heartbeat's Redis call (3.11's wait_for)
            # kept heartbeating an acked entry every period, and hung the loop's shutdown.
            raise_if_cancelled()
            with contextlib.suppress(*_REDIS_DOWN, ResponseError):
                await self._heartbeat(keys=[self.stream], args=[GROUP, entry_id, consumer])

    async def _ack(self, entry_id: str) -> None:
        async with self.deps.redis.pipeline(transaction=True) as p:
            p.xack(self.stream, GROUP, entry_id)
            p.xdel(self.stream, entry_id)
            p.hdel(self.attempts_key, entry_id)
            p.hdel(self.errors_key, entry_id)
            await p.execute()

    async def _dead(
        self, entry_id: str, fields: dict[str, Any], alert: Alert | None, error: str, attempts: int
    ) -> None:
        r = self.deps.redis
        if await r.hsetnx(self.dead_marks, entry_id, "1"):
            await r.xadd(
                self.dead_stream,
                {
                    "entry": entry_id,
                    "alert": str(fields.get("alert", "")),
                    "error": error,
                    "attempts": str(attempts),
                },
            )
            log.error("alert entry %s dead-lettered after %d attempts: %s", entry_id, attempts, error)
            if self.on_dead is not None:
                try:
                    await self.on_dead(entry_id, alert, error, attempts)
                except Exception as exc:  # noqa: BLE001 - the entry is safe in the dead-letter stream; logged
                    log.error("could not announce dead-lettered alert %s: %s", entry_id, redact(str(exc))[:300])
        await self._ack(entry_id)
        await r.hdel(self.dead_marks, entry_id)

    # --- inspection (tests, bench, a future `/gemma alerts` command) -----------------------------------
    async def backlog(self) -> dict[str, int]:
        r = self.deps.redis
        pending = 0
        with contextlib.suppress(ResponseError):
            info = await r.xpending(self.stream, GROUP)
            pending = int(info.get("pending", 0)) if isinstance(info, dict) else 0
        return {
            "queued": int(await r.xlen(self.stream)),
            "pending": pending,
            "dead": int(await r.xlen(self.dead_stream)),
        }


def build_alert_queue(
    deps: Deps, investigate: Any = None, *, concurrency: int = 4, clock: Clock = REAL_CLOCK
) -> AlertQueue:
    """Wire the queue to the incident threads and their publisher, posting through a ChannelResponder on
    deps.chat. `clock`: a test's or bench's scaled clock (pacing, debounce, coalescing)."""
    from bot.slack_app import ChannelResponder, make_web_client
    from handlers.button_payloads import ButtonPayloads
    from handlers.incident_chat import RenderedIncidentChat
    from handlers.incident_investigation import make_investigator
    from skills.incidents.threads import IncidentThreads

    if investigate is None:
        investigate = make_investigator(deps)
    client = deps.chat if deps.chat is not None else make_web_client(deps.settings, clock)
    payloads = ButtonPayloads(deps.redis, deps.settings.key)
    chat = RenderedIncidentChat(
        lambda channel: ChannelResponder(client, channel, payloads=payloads), deps.settings.vllm_service_name
    )
    threads = IncidentThreads(
        deps.redis, deps.settings, chat, investigate, clock, store_down=_REDIS_DOWN, known=deps.service_targets
    )
    return AlertQueue(deps, threads.handle, threads.on_dead, concurrency=concurrency, publisher=threads.publisher)

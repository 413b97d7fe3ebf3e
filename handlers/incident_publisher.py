"""The publisher: turns recorded incident state into Slack messages, within Slack's rate limits.

Workers only record (skills/incident_store.py); this loop, one per process, makes every Slack call. For each
channel with work it holds a fenced lease (skills/leases.py), so one instance at a time posts into a channel:
a storm split across instances still yields one thread per incident and no duplicate line, and a killed
instance's channel is taken over when its lease lapses (`alert_channel_lease_ms`).

Each step picks the most urgent effect that Slack's budget allows, one call at a time, so new work jumps the
queue: storm summary > new headers (most severe first) > resolves > investigation replies and thread lines >
header edits. Repeats coalesce into one line per `alert_coalesce_interval_s`; header edits wait
`alert_header_debounce_s` and show the latest state. Beyond `alert_storm_threshold_per_min` new incidents a
minute on one channel, one storm summary lists them all (edited in place every `alert_storm_edit_interval_s`)
while their own threads open as the rate allows.

Idempotency: before a post, the effect's intent is recorded (fx:<effect> = intent:<lease>), after it the
result (done:<ts>). A new holder that finds another holder's intent without a result cannot know whether
Slack got the message (Slack has no idempotency key, and searching the channel is rate-limited), so it posts
again and counts it in `alerts:ambiguous`: that instant between Slack's answer and the Redis write is the one
place a duplicate remains possible. Transient failures (429 after slack-sdk's own retries, 5xx) back off here,
well under the queue's reclaim idle time; after `alert_max_attempts` an effect is given up (a header goes to
the dead-letter stream with a notice).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import socket
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from slack_sdk.errors import SlackApiError

from handlers.context import Responder
from handlers.incident_render import header_reply, lines_reply, storm_reply
from handlers.reply import Reply
from skills.clock import Clock
from skills.incident_store import IncidentStore
from skills.incidents import Alert, Incident, severity_rank
from skills.leases import Lease
from skills.redact import redact

if TYPE_CHECKING:
    from bot.deps import Deps

log = logging.getLogger(__name__)

ResponderFor = Callable[[str], Responder]
DeadNotice = Callable[[str, Alert | None, str, int], Awaitable[None]]
_REDIS_DOWN = (RedisConnectionError, RedisTimeoutError, ConnectionError, OSError)
STORM_WINDOW_S = 60.0


@dataclass
class _Bucket:
    """Our own pacing, mirroring Slack's documented rates so that 429s are the exception."""

    rate: float
    burst: float
    tokens: float = -1.0
    at: float = 0.0

    def wait(self, now: float) -> float:
        if self.tokens < 0:
            self.tokens, self.at = self.burst, now
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate

    def take(self, now: float) -> None:
        self.wait(now)
        self.tokens -= 1.0


@dataclass(order=True)
class _Effect:
    prio: tuple[Any, ...]
    due: float = field(compare=False)
    kind: str = field(compare=False)  # header | reply | lines | edit | summary | summary-edit
    method: str = field(compare=False)  # post | update
    inc: Incident | None = field(compare=False, default=None)
    pub: dict[str, str] = field(compare=False, default_factory=dict)
    arg: Any = field(compare=False, default=None)

    @property
    def name(self) -> str:
        return f"{self.inc.id if self.inc else 'storm'}:{self.kind}"


class IncidentPublisher:
    def __init__(
        self, deps: Deps, responder_for: ResponderFor, clock: Clock, on_dead: DeadNotice | None = None
    ) -> None:
        self.deps = deps
        self.s = deps.settings
        self.r = deps.redis
        self.clock = clock
        self.store = IncidentStore(deps.redis, self.s.key_prefix, clock)
        self.responder_for = responder_for
        self.on_dead = on_dead
        self.owner = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.leases: dict[str, Lease] = {}
        self.post_buckets: dict[str, _Bucket] = {}
        self.update_bucket = _Bucket(self.s.slack_update_per_min / 60, 5)
        self.retry_at: dict[str, float] = {}
        self._unsaved: list[tuple[Lease, str, dict[str, str]]] = []
        self._parsed: dict[str, tuple[str, Incident]] = {}
        self.stats: Counter[str] = Counter()
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # --- lifecycle -------------------------------------------------------------------------------------
    async def start(self) -> None:
        self._stopping.clear()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="incident-publisher")

    async def stop(self, grace_s: float = 5.0) -> None:
        self._stopping.set()
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(self._task, timeout=grace_s)
            self._task = None
        for lease in self.leases.values():
            with contextlib.suppress(*_REDIS_DOWN):
                await lease.release()

    def wake(self) -> None:
        self._wake.set()

    async def pending(self) -> int:
        """Incidents with Slack work not yet done (tests and the bench wait for 0)."""
        total = 0
        for ch in await self.r.smembers(self.store.k_channels):
            total += int(await self.r.zcard(self.store.k_outbox(str(ch))))
        return total

    async def _run(self) -> None:
        backoff = 0.2
        while not self._stopping.is_set():
            try:
                did, due_in = await self.step()
                backoff = 0.2
                if not did:
                    await self._idle(due_in)
            except asyncio.CancelledError:
                raise
            except _REDIS_DOWN as exc:
                log.warning("publisher: Redis unavailable (%s); retrying in %.1fs", type(exc).__name__, backoff)
                await self._idle(None, real_s=backoff)
                backoff = min(backoff * 2, 5.0)
            except Exception:
                log.exception("publisher: unexpected error; continuing")
                await self._idle(None, real_s=backoff)
                backoff = min(backoff * 2, 5.0)

    async def _idle(self, due_in: float | None, real_s: float = 0.1) -> None:
        """Wait before the next look at the outboxes. If something is waiting for Slack's budget or its
        interval, sleep towards that (at most a quarter second, so a new incident is not kept waiting) rather
        than re-evaluating on every recorded alert: a storm records hundreds a second. Otherwise wait to be
        woken (a worker here recorded something) or a short poll (work recorded by other instances)."""
        if due_in is not None:
            await self.clock.sleep(min(max(due_in, 0.0), 0.25))
            return
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=real_s)
        if self._wake.is_set():
            await asyncio.sleep(0.02)  # let the rest of a burst of records land: one evaluation for all of them

    # --- one step: every channel with work, one effect each ----------------------------------------------
    async def step(self) -> tuple[bool, float | None]:
        await self._flush()
        did = False
        due: float | None = None
        for ch in sorted(str(c) for c in await self.r.smembers(self.store.k_channels)):
            d, n = await self._channel_step(ch)
            did = did or d
            if n is not None:
                due = n if due is None else min(due, n)
        return did, due

    def _lease(self, channel: str) -> Lease:
        if channel not in self.leases:
            key = self.s.key("outbox", channel, "lease")
            self.leases[channel] = Lease(self.r, key, self.s.alert_channel_lease_ms, owner=self.owner)
        return self.leases[channel]

    async def _channel_step(self, ch: str) -> tuple[bool, float | None]:
        store = self.store
        raw: Any = await self.r.zrange(store.k_outbox(ch), 0, -1, withscores=True)
        entries: list[tuple[str, float]] = [(str(m), float(sc)) for m, sc in raw]
        storm_key = self.s.key("outbox", ch, "storm")
        now = self.clock.now()
        recent = int(await self.r.zcount(store.k_opens(ch), now - STORM_WINDOW_S, "+inf"))
        storm = {str(k): str(v) for k, v in (await self.r.hgetall(storm_key)).items()}
        if not entries and not storm:
            return False, None
        lease = self._lease(ch)
        if not lease.held and not await lease.acquire():
            return False, None  # another live instance posts here
        if not storm and recent >= self.s.alert_storm_threshold_per_min:
            since = now - STORM_WINDOW_S
            wall = datetime.now(UTC) - timedelta(seconds=STORM_WINDOW_S)
            storm = {"since": repr(since), "since_wall": wall.isoformat(), "edit_at": "0"}
            if not await lease.guarded_hset(storm_key, storm):
                return False, None
            log.warning("alert storm on %s: %d new incidents in the last minute", ch, recent)
        effects: list[_Effect] = []
        loaded = await self._load([str(m) for m, _ in entries])
        scores = {str(m): s for m, s in entries}
        clean: list[str] = []
        for inc_id, (inc, pub, n_replies) in loaded.items():
            fx = self._effects(inc, pub, n_replies, now) if inc else []
            if fx:
                effects += fx
            else:
                clean.append(inc_id)
        if storm:
            effects += await self._storm_effects(ch, storm_key, storm, recent, now)
        for inc_id in clean:
            await store.clean(ch, inc_id, scores[inc_id])
        if not effects:
            return False, None
        return await self._run_best(ch, lease, sorted(effects), now)

    async def _load(self, ids: list[str]) -> dict[str, tuple[Incident | None, dict[str, str], int]]:
        if not ids:
            return {}
        async with self.r.pipeline(transaction=False) as p:
            for i in ids:
                p.get(self.store.k_incident(i))
                p.hgetall(self.store.k_pub(i))
                p.hlen(self.store.k_replies(i))
            res = await p.execute()
        out = {}
        for n, i in enumerate(ids):
            raw, pub, replies = res[3 * n : 3 * n + 3]
            out[i] = (self._parse(i, raw), {str(k): str(v) for k, v in pub.items()}, int(replies))
        return out

    def _parse(self, inc_id: str, raw: str | None) -> Incident | None:
        """Parse an incident record, reusing the last parse while the record is unchanged (a storm's step
        looks at every incident in the outbox, a few times a second)."""
        if not raw:
            return None
        hit = self._parsed.get(inc_id)
        if hit is not None and hit[0] == raw:
            return hit[1]
        if len(self._parsed) > 5000:
            self._parsed.clear()
        inc = Incident.model_validate_json(raw)
        self._parsed[inc_id] = (raw, inc)
        return inc

    def _effects(self, inc: Incident, pub: dict[str, str], n_replies: int, now: float) -> list[_Effect]:
        if pub.get("dead"):
            return []
        sev = severity_rank(inc.severity)
        opened = inc.opened_at.timestamp()
        if not pub.get("ts"):
            return [_Effect((1, sev, opened), now, "header", "post", inc, pub)]
        out = []
        posted = int(pub.get("replies", 0))
        resolved = inc.state == "resolved"
        if posted < n_replies:  # findings first: the thread reads in order
            out.append(_Effect((3, sev, opened, 0), now, "reply", "post", inc, pub, posted))
        else:
            through = int(pub.get("through", 0))
            events = [e for e in inc.events if e.seq > through]
            if events:
                urgent = any(e.kind in ("resolved", "refired") for e in events)
                last = pub.get("line_at")  # leading edge: the first line after a quiet interval goes at once
                due = now if urgent or not last else float(last) + self.s.alert_coalesce_interval_s
                out.append(_Effect((2 if urgent else 3, sev, opened, 1), due, "lines", "post", inc, pub, events))
        if int(pub.get("rev", 0)) < inc.rev:
            due = now if resolved else float(pub.get("edit_at", 0)) + self.s.alert_header_debounce_s
            out.append(_Effect((2 if resolved else 4, sev, opened), due, "edit", "update", inc, pub))
        return out

    async def _storm_effects(
        self, ch: str, storm_key: str, storm: dict[str, str], recent: int, now: float
    ) -> list[_Effect]:
        due = float(storm.get("edit_at", 0)) + self.s.alert_storm_edit_interval_s
        if storm.get("ts") and due > now:  # not time to edit yet: skip rendering 100s of rows on every step
            return [_Effect((0,), due, "summary-wait", "update", None, storm)]
        ids = [str(i) for i in await self.r.zrangebyscore(self.store.k_opens(ch), float(storm["since"]), "+inf")]
        loaded = await self._load(ids)
        incs = [inc for inc, _, _ in loaded.values() if inc is not None]
        threads = {i for i, (_, pub, _) in loaded.items() if pub.get("ts")}
        since = datetime.fromisoformat(storm["since_wall"])
        reply = storm_reply(incs, threads, ch, since)
        digest = hashlib.sha256(reply.model_dump_json().encode()).hexdigest()[:16]
        if not storm.get("ts"):
            return [_Effect((0,), now, "summary", "post", None, storm, (storm_key, reply, digest))]
        if storm.get("digest") != digest:
            return [_Effect((0,), due, "summary-edit", "update", None, storm, (storm_key, reply, digest))]
        if recent == 0 and len(threads) == len(incs):  # quiet, every thread open, summary final: storm over
            await self.r.delete(storm_key)
            log.info("alert storm on %s is over (%d incidents)", ch, len(incs))
        return []

    # --- running an effect -----------------------------------------------------------------------------
    def _bucket_wait(self, ch: str, eff: _Effect, now: float) -> float:
        if eff.method == "update":
            return self.update_bucket.wait(now)
        b = self.post_buckets.setdefault(ch, _Bucket(self.s.slack_post_per_s, self.s.slack_post_burst))
        return b.wait(now)

    async def _run_best(self, ch: str, lease: Lease, effects: list[_Effect], now: float) -> tuple[bool, float | None]:
        next_due: float | None = None
        for eff in effects:
            if eff.kind == "summary-wait":  # only says when the summary may be edited next
                wait = eff.due - now
                next_due = wait if next_due is None else min(next_due, wait)
                continue
            ready = max(eff.due, self.retry_at.get(eff.name, 0.0))
            wait = max(ready - now, self._bucket_wait(ch, eff, now))
            if wait > 0:
                next_due = wait if next_due is None else min(next_due, wait)
                continue
            if eff.method == "update":
                self.update_bucket.take(now)
            else:
                self.post_buckets[ch].take(now)
            await self._do(ch, lease, eff)
            return True, None
        return False, next_due

    async def _do(self, ch: str, lease: Lease, eff: _Effect) -> None:
        try:
            if eff.kind == "header":
                await self._header(ch, lease, eff)
            elif eff.kind == "reply":
                await self._reply(lease, eff)
            elif eff.kind == "lines":
                await self._lines(lease, eff)
            elif eff.kind == "edit":
                await self._edit(lease, eff)
            else:
                await self._summary(ch, lease, eff)
            self.retry_at.pop(eff.name, None)
        except _REDIS_DOWN:
            raise
        except Exception as exc:
            await self._failed(lease, eff, exc)

    async def _once(
        self, lease: Lease, key: str, state: dict[str, str], fx: str, call: Callable[[], Awaitable[str]]
    ) -> str | None:
        """Post once: record the intent, make the call, record the result (with `after(ts)` state)."""
        prior = state.get(f"fx:{fx}", "")
        if prior.startswith("done:"):
            return prior[5:]
        if prior.startswith("intent:") and prior != f"intent:{lease.value}":
            # Another holder meant to post this and died or was fenced before recording Slack's answer.
            self.stats["ambiguous"] += 1
            await self.r.incr(self.s.key("alerts", "ambiguous"))
            log.warning("re-posting %s after an unfinished attempt by another holder (possible duplicate)", fx)
        if not await lease.guarded_hset(key, {f"fx:{fx}": f"intent:{lease.value}"}):
            return None
        try:
            ts = await call()
        except SlackApiError:
            await lease.guarded_hset(key, {f"fx:{fx}": "failed"})  # Slack answered: it was not posted
            raise
        self.stats["posts"] += 1
        return ts

    async def _save(self, lease: Lease, key: str, state: dict[str, str]) -> bool:
        """Record what Slack answered. If Redis is away right now, keep it in memory and write it first thing
        when Redis is back (`_flush`): an outage between the post and this write must not cause a re-post."""
        try:
            return await lease.guarded_hset(key, state)
        except _REDIS_DOWN:
            self._unsaved.append((lease, key, state))
            raise

    async def _flush(self) -> None:
        while self._unsaved:
            lease, key, state = self._unsaved[0]
            if not lease.held:
                await lease.acquire()  # ours again after the outage (or another holder's: then it counts)
            await lease.guarded_hset(key, state)
            self._unsaved.pop(0)

    async def _header(self, ch: str, lease: Lease, eff: _Effect) -> None:
        inc = eff.inc
        assert inc is not None
        slack = self.responder_for(ch)
        key = self.store.k_pub(inc.id)

        async def post() -> str:
            return await slack.post(header_reply(inc, self.s.vllm_service_name))

        ts = await self._once(lease, key, eff.pub, "header", post)
        if ts is None:
            return
        now = repr(self.clock.now())
        done = {
            "fx:header": f"done:{ts}",
            "ts": ts,
            "channel": eff.pub.get("channel") or slack.channel,
            "rev": str(inc.rev),
            "through": str(inc.event_seq),  # what happened before the header is in the header
            "line_at": "",
            "edit_at": now,
        }
        if await self._save(lease, key, done):
            # the by-thread index: a button clicked in the thread finds its incident
            await self.r.set(self.s.key("incident", "by-thread", done["channel"], ts), inc.id, ex=30 * 86400)
            log.info("incident %s opened for %s (thread %s)", inc.id, inc.service, ts)

    async def _reply(self, lease: Lease, eff: _Effect) -> None:
        inc = eff.inc
        assert inc is not None
        i = int(eff.arg)
        raw = await self.r.hget(self.store.k_replies(inc.id), str(i))
        reply = Reply.model_validate_json(raw) if raw else Reply(title="(missing reply)")
        slack = self.responder_for(eff.pub["channel"])
        key = self.store.k_pub(inc.id)

        async def post() -> str:
            return await slack.post(reply, thread_ts=eff.pub["ts"])

        ts = await self._once(lease, key, eff.pub, f"reply:{i}", post)
        if ts is not None:
            await self._save(lease, key, {f"fx:reply:{i}": f"done:{ts}", "replies": str(i + 1)})

    async def _lines(self, lease: Lease, eff: _Effect) -> None:
        inc = eff.inc
        assert inc is not None
        events = eff.arg
        last = events[-1].seq
        slack = self.responder_for(eff.pub["channel"])
        key = self.store.k_pub(inc.id)

        async def post() -> str:
            return await slack.post(lines_reply(events, inc.service), thread_ts=eff.pub["ts"])

        ts = await self._once(lease, key, eff.pub, f"lines:{last}", post)
        if ts is not None:
            state = {f"fx:lines:{last}": f"done:{ts}", "through": str(last), "line_at": repr(self.clock.now())}
            await self._save(lease, key, state)

    async def _edit(self, lease: Lease, eff: _Effect) -> None:
        inc = eff.inc
        assert inc is not None
        slack = self.responder_for(eff.pub["channel"])
        await slack.update(eff.pub["ts"], header_reply(inc, self.s.vllm_service_name))  # idempotent: no intent
        self.stats["updates"] += 1
        await lease.guarded_hset(self.store.k_pub(inc.id), {"rev": str(inc.rev), "edit_at": repr(self.clock.now())})

    async def _summary(self, ch: str, lease: Lease, eff: _Effect) -> None:
        storm_key, reply, digest = eff.arg
        now = repr(self.clock.now())
        if eff.kind == "summary-edit":
            slack = self.responder_for(eff.pub["channel"])
            await slack.update(eff.pub["ts"], reply)
            self.stats["updates"] += 1
            await lease.guarded_hset(storm_key, {"digest": digest, "edit_at": now})
            return
        slack = self.responder_for(ch)

        async def post() -> str:
            return await slack.post(reply)

        ts = await self._once(lease, storm_key, eff.pub, "summary", post)
        if ts is not None:
            state = {"fx:summary": f"done:{ts}", "ts": ts, "channel": slack.channel, "digest": digest, "edit_at": now}
            await self._save(lease, storm_key, state)

    async def _failed(self, lease: Lease, eff: _Effect, exc: Exception) -> None:
        err = redact(f"{type(exc).__name__}: {exc}")[:500]
        key = eff.arg[0] if eff.inc is None else self.store.k_pub(eff.inc.id)
        attempts = int(await self.r.hincrby(key, f"fail:{eff.kind}", 1))
        self.stats["failures"] += 1
        if attempts < self.s.alert_max_attempts:
            # Back off well under the queue's reclaim idle time: the next step retries, other work goes first.
            delay = min(0.5 * 2 ** (attempts - 1), 10.0, self.s.alert_reclaim_idle_ms / 4000)
            self.retry_at[eff.name] = self.clock.now() + delay
            log.warning("Slack effect %s failed (attempt %d): %s; retrying in %.1fs", eff.name, attempts, err, delay)
            return
        self.retry_at.pop(eff.name, None)
        await self.r.hdel(key, f"fail:{eff.kind}")
        log.error("Slack effect %s given up after %d attempts: %s", eff.name, attempts, err)
        inc = eff.inc
        if inc is None:
            await lease.guarded_hset(key, {"digest": "given-up", "edit_at": repr(self.clock.now() + 60)})
            return
        if eff.kind == "header":
            await lease.guarded_hset(key, {"dead": "1"})
            await self._dead_letter(inc, err, attempts)
        elif eff.kind == "lines":
            await lease.guarded_hset(key, {"through": str(eff.arg[-1].seq)})
        elif eff.kind == "reply":
            await lease.guarded_hset(key, {"replies": str(int(eff.arg) + 1)})
        else:
            await lease.guarded_hset(key, {"rev": str(inc.rev)})

    async def _dead_letter(self, inc: Incident, error: str, attempts: int) -> None:
        lead = inc.lead
        alert = Alert(
            source=lead.source,  # type: ignore[arg-type]
            fingerprint=lead.fingerprint,
            state=lead.state,
            name=lead.name,
            service=inc.service if inc.service != "unknown" else "",
            severity=lead.severity,
            summary=lead.summary,
            started_at=lead.started_at,
            url=lead.url,
        )
        entry = inc.id.removeprefix("inc-")
        fields = {"entry": entry, "alert": alert.model_dump_json(), "error": error, "attempts": str(attempts)}
        await self.r.xadd(self.s.key("alerts", "dead"), fields)  # type: ignore[arg-type]
        if self.on_dead is not None:
            try:
                await self.on_dead(entry, alert, error, attempts)
            except Exception as exc:
                log.error("could not announce the dead-lettered incident %s: %s", inc.id, redact(str(exc))[:300])

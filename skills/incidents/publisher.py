"""The publisher: turns recorded incident state into Slack messages, within Slack's rate limits.

Workers only record (skills/incidents/store.py); this loop, one per process, makes every Slack call. What it
reads and records in Redis goes through skills/incidents/outbox.py; this module decides and calls Slack. For each
channel with work it holds a fenced lease (skills/leases.py), so one instance at a time posts into a channel:
a storm split across instances still yields one thread per incident and no duplicate line, and a killed
instance's channel is taken over when its lease lapses (`alert_channel_lease_ms`).

Each step picks the most urgent effect that Slack's budget allows, one call at a time, so new work jumps the
queue: storm summary > new headers (most severe first) > resolves > investigation replies and thread lines >
header edits. Repeats coalesce into one line per `alert_coalesce_interval_s`; header edits wait
`alert_header_debounce_s` and show the latest state. Beyond `alert_storm_threshold_per_min` new incidents a
minute on one channel, one storm summary lists them all (edited in place every `alert_storm_edit_interval_s`)
while their own threads open as the rate allows.

Each effect is made at most once, its intent recorded first: skills/incidents/effects.py.
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
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from skills.clock import Clock
from skills.incidents.chat import IncidentChat
from skills.incidents.effects import STORE_DOWN, DeadAnnounce, Effect, SlackEffects
from skills.incidents.lifecycle_store import IncidentLifecycle
from skills.incidents.model import Incident, severity_rank, utcnow
from skills.incidents.outbox import IncidentOutbox, Loaded, Record
from skills.incidents.settings import IncidentSettings
from skills.incidents.store import IncidentStore
from skills.leases import Lease
from skills.ports import Store
from skills.retrying import RetryPolicy, describe_error, retry_call

log = logging.getLogger(__name__)


STORM_WINDOW_S = 60.0
SNOOZE_SWEEP_S = 1.0


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


def _fix_key(inc: Incident) -> str:
    """Which fix of the incident (a later fix is checked anew)."""
    return inc.fix.at.isoformat() if inc.fix else ""


class IncidentPublisher(SlackEffects):
    def __init__(
        self,
        store: Store,
        settings: IncidentSettings,
        chat: IncidentChat,
        clock: Clock,
        on_dead: DeadAnnounce | None = None,
        store_down: tuple[type[BaseException], ...] = STORE_DOWN,
    ) -> None:
        self.s = settings
        self.clock = clock
        self.outbox = IncidentOutbox(IncidentStore(store, self.s.key_prefix, clock))
        self.lifecycle = IncidentLifecycle(IncidentStore(store, self.s.key_prefix, clock))
        self._next_sweep = 0.0
        self.chat = chat
        self.on_dead = on_dead
        self.store_down = store_down
        self.owner = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.leases: dict[str, Lease] = {}
        self.post_buckets: dict[str, _Bucket] = {}
        self.update_bucket = _Bucket(self.s.slack_update_per_min / 60, 5)
        self.retry_at: dict[str, float] = {}
        self._unsaved: list[tuple[Lease, Record, dict[str, str]]] = []
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
            with contextlib.suppress(*self.store_down):
                await lease.release()

    def wake(self) -> None:
        self._wake.set()

    async def pending(self) -> int:
        """Incidents with Slack work not yet done (tests and the bench wait for 0)."""
        return await self.outbox.pending()

    async def _run(self) -> None:
        async def once() -> None:
            if self._stopping.is_set():
                return
            did, due_in = await self.step()
            if not did:
                await self._idle(due_in)

        async def backoff(s: float) -> None:
            await self._idle(None, real_s=s)

        # Never gives up (budget None): the publisher outlives a Redis outage; the wait restarts after a good step.
        policy = RetryPolicy(
            what="publisher",
            transient=lambda _exc: True,
            initial_s=0.2,
            max_s=5.0,
            jitter_s=0.1,
            sleep=backoff,
            log=log,
            describe=self._describe_error,
            traceback=lambda exc: not isinstance(exc, self.store_down),
        )
        while not self._stopping.is_set():
            await retry_call(policy, once)

    def _describe_error(self, exc: BaseException) -> str:
        if isinstance(exc, self.store_down):
            return f"Redis unavailable ({type(exc).__name__})"
        return f"unexpected error ({describe_error(exc)})"

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
        await self.outbox.due_fix_checks(self.clock.now())
        if self.clock.now() >= self._next_sweep:  # snoozes end on the minute: a sweep a second is plenty
            self._next_sweep = self.clock.now() + SNOOZE_SWEEP_S
            await self.lifecycle.wake_due(utcnow())
        did = False
        due: float | None = None
        for ch in await self.outbox.channels():
            d, n = await self._channel_step(ch)
            did = did or d
            if n is not None:
                due = n if due is None else min(due, n)
        return did, due

    def _lease(self, channel: str) -> Lease:
        if channel not in self.leases:
            self.leases[channel] = self.outbox.lease(channel, self.s.alert_channel_lease_ms, self.owner)
        return self.leases[channel]

    async def _channel_step(self, ch: str) -> tuple[bool, float | None]:
        outbox = self.outbox
        entries = await outbox.entries(ch)
        now = self.clock.now()
        recent = await outbox.opened_count(ch, now - STORM_WINDOW_S)
        storm = await outbox.storm_state(ch)
        if not entries and not storm:
            return False, None
        lease = self._lease(ch)
        if not lease.held and not await lease.acquire():
            return False, None  # another live instance posts here
        if not storm and recent >= self.s.alert_storm_threshold_per_min:
            since = now - STORM_WINDOW_S
            wall = datetime.now(UTC) - timedelta(seconds=STORM_WINDOW_S)
            storm = {"since": repr(since), "since_wall": wall.isoformat(), "edit_at": "0"}
            if not await outbox.write(lease, outbox.storm(ch), storm):
                return False, None
            log.warning("alert storm on %s: %d new incidents in the last minute", ch, recent)
        effects: list[Effect] = []
        loaded = await outbox.load([m for m, _ in entries])
        scores = dict(entries)
        clean: list[str] = []
        for inc_id, (inc, pub, n_replies) in loaded.items():
            if inc is not None and inc.fix is not None and pub.get("fix") != _fix_key(inc):
                # A fix confirmed from its thread: checked after alert_fix_check_s on this clock.
                if not await outbox.arm_fix_check(lease, inc, _fix_key(inc), now + self.s.alert_fix_check_s):
                    return False, None
                pub = {**pub, "fix": _fix_key(inc), "fixcheck_due": repr(now + self.s.alert_fix_check_s)}
            fx = self._effects(inc, pub, n_replies, now) if inc else []
            if fx:
                effects += fx
            else:
                clean.append(inc_id)
        if storm:
            effects += await self._storm_effects(ch, storm, recent, now)
        for inc_id in clean:
            await outbox.clean(ch, inc_id, scores[inc_id])
        if not effects:
            return False, None
        return await self._run_best(ch, lease, sorted(effects), now)

    def _effects(self, inc: Incident, pub: dict[str, str], n_replies: int, now: float) -> list[Effect]:
        if pub.get("dead"):
            return []
        sev = severity_rank(inc.severity)
        opened = inc.opened_at.timestamp()
        if not pub.get("ts"):
            return [Effect((1, sev, opened), now, "header", "post", inc, pub)]
        out = []
        posted = int(pub.get("replies", 0))
        resolved = inc.state == "resolved"
        if posted < n_replies:  # findings first: the thread reads in order
            out.append(Effect((3, sev, opened, 0), now, "reply", "post", inc, pub, posted))
        else:
            through = int(pub.get("through", 0))
            events = [e for e in inc.events if e.seq > through]
            urgent = any(e.kind in ("resolved", "refired", "fixed", "fix_landed", "life") for e in events)
            if events and not urgent and inc.life.held(not resolved):
                events = []  # snoozed (or resolved by hand while firing): repeats coalesce silently until it wakes
            if events:
                last = pub.get("line_at")  # leading edge: the first line after a quiet interval goes at once
                due = now if urgent or not last else float(last) + self.s.alert_coalesce_interval_s
                out.append(Effect((2 if urgent else 3, sev, opened, 1), due, "lines", "post", inc, pub, events))
        fix_due = pub.get("fixcheck_due")
        # A fix whose revision serves no traffic said so when it landed: "still firing after N min" would blame it.
        serving_fix = inc.fix is not None and bool(inc.fix.serving)
        if serving_fix and not resolved and fix_due and pub.get("fixcheck_done") != pub.get("fix"):
            if now >= float(fix_due):  # not yet due: not kept dirty (outbox:fixchecks marks it again then)
                out.append(Effect((3, sev, opened, 2), now, "fixcheck", "post", inc, pub))
        if int(pub.get("rev", 0)) < inc.rev:
            due = now if resolved else float(pub.get("edit_at", 0)) + self.s.alert_header_debounce_s
            out.append(Effect((2 if resolved else 4, sev, opened), due, "edit", "update", inc, pub))
        return out

    async def _storm_effects(self, ch: str, storm: dict[str, str], recent: int, now: float) -> list[Effect]:
        due = float(storm.get("edit_at", 0)) + self.s.alert_storm_edit_interval_s
        if storm.get("ts") and due > now:  # not time to edit yet: skip rendering 100s of rows on every step
            return [Effect((0,), due, "summary-wait", "update", None, storm)]
        loaded: dict[str, Loaded] = await self.outbox.load(await self.outbox.opened_since(ch, float(storm["since"])))
        incs = [x.inc for x in loaded.values() if x.inc is not None]
        threads = {i for i, x in loaded.items() if x.pub.get("ts")}
        since = datetime.fromisoformat(storm["since_wall"])
        # What the summary shows, as data (the surface renders it): it is edited only when this changes.
        shown = sorted((i.id, i.state, i.severity, i.id in threads) for i in incs)
        digest = hashlib.sha256(repr(shown).encode()).hexdigest()[:16]
        view = (incs, threads, since)
        if not storm.get("ts"):
            return [Effect((0,), now, "summary", "post", None, storm, (self.outbox.storm(ch), view, digest))]
        if storm.get("digest") != digest:
            return [Effect((0,), due, "summary-edit", "update", None, storm, (self.outbox.storm(ch), view, digest))]
        if recent == 0 and len(threads) == len(incs):  # quiet, every thread open, summary final: storm over
            await self.outbox.end_storm(ch)
            log.info("alert storm on %s is over (%d incidents)", ch, len(incs))
        return []

    # --- running an effect -----------------------------------------------------------------------------
    def _bucket_wait(self, ch: str, eff: Effect, now: float) -> float:
        if eff.method == "update":
            return self.update_bucket.wait(now)
        b = self.post_buckets.setdefault(ch, _Bucket(self.s.slack_post_per_s, self.s.slack_post_burst))
        return b.wait(now)

    async def _run_best(self, ch: str, lease: Lease, effects: list[Effect], now: float) -> tuple[bool, float | None]:
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

"""The Slack effects of the incident publisher (skills/incidents/publisher.py), each made at most once, through
the IncidentChat port (skills/incidents/chat.py: the surface renders).

Before a post its intent is recorded under the channel's fenced lease (fx:<effect> = intent:<lease>), after
it the result (done:<ts>), with the state it moves on (the thread's ts, the last event posted). A holder that
finds another holder's intent without a result cannot know whether Slack got the message (Slack has no
idempotency key, and searching the channel is rate-limited), so it posts again and counts it in
`alerts:ambiguous`: the instant between Slack's answer and the Redis write is the one place a duplicate remains
possible. A Redis outage in that instant does not cause one: the answer is kept in memory and written first
thing when Redis is back. Failures back off (well under the queue's reclaim idle time); after
`alert_max_attempts` an effect is given up, a header into the dead-letter stream with a notice.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from skills.clock import Clock
from skills.incidents.chat import ChatRefused, IncidentChat
from skills.incidents.model import Alert, Event, Incident
from skills.incidents.outbox import IncidentOutbox, Record
from skills.leases import Lease
from skills.logs.redact import redact

if TYPE_CHECKING:
    from skills.incidents.settings import IncidentSettings

log = logging.getLogger(__name__)

DeadAnnounce = Callable[[str, Alert | None, str, int], Awaitable[None]]
# What a store outage raises when the wiring says nothing more precise (bot/ passes the Redis client's own
# connection and timeout errors too): an outage is never an effect's failure, the publisher rides it out.
STORE_DOWN: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError, OSError)


@dataclass(order=True)
class Effect:
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


class SlackEffects:
    """Mixin: the effects themselves. The publisher provides the attributes below."""

    s: IncidentSettings
    clock: Clock
    outbox: IncidentOutbox
    chat: IncidentChat
    store_down: tuple[type[BaseException], ...]
    on_dead: DeadAnnounce | None
    stats: Counter[str]
    retry_at: dict[str, float]
    _unsaved: list[tuple[Lease, Record, dict[str, str]]]

    async def _do(self, ch: str, lease: Lease, eff: Effect) -> None:
        try:
            if eff.kind == "header":
                await self._header(ch, lease, eff)
            elif eff.kind == "reply":
                await self._reply(lease, eff)
            elif eff.kind == "lines":
                await self._lines(lease, eff)
            elif eff.kind == "edit":
                await self._edit(lease, eff)
            elif eff.kind == "fixcheck":
                await self._fixcheck(lease, eff)
            else:
                await self._summary(ch, lease, eff)
            self.retry_at.pop(eff.name, None)
        except self.store_down:
            raise
        except Exception as exc:  # noqa: BLE001 - every effect failure is retried or dead-lettered by _failed
            await self._failed(lease, eff, exc)

    async def _once(
        self, lease: Lease, rec: Record, state: dict[str, str], fx: str, call: Callable[[], Awaitable[str]]
    ) -> str | None:
        """Post once: record the intent, make the call, record the result (with `after(ts)` state)."""
        prior = state.get(f"fx:{fx}", "")
        if prior.startswith("done:"):
            return prior[5:]
        if prior.startswith("intent:") and prior != f"intent:{lease.value}":
            # Another holder meant to post this and died or was fenced before recording Slack's answer.
            self.stats["ambiguous"] += 1
            await self.outbox.count_ambiguous()
            log.warning("re-posting %s after an unfinished attempt by another holder (possible duplicate)", fx)
        if not await self.outbox.write(lease, rec, {f"fx:{fx}": f"intent:{lease.value}"}):
            return None
        try:
            ts = await call()
        except ChatRefused:
            await self.outbox.write(lease, rec, {f"fx:{fx}": "failed"})  # Slack answered: it was not posted
            raise
        self.stats["posts"] += 1
        return ts

    async def _save(self, lease: Lease, rec: Record, state: dict[str, str]) -> bool:
        """Record what Slack answered. If Redis is away right now, keep it in memory and write it first thing
        when Redis is back (`_flush`): an outage between the post and this write must not cause a re-post."""
        try:
            return await self.outbox.write(lease, rec, state)
        except self.store_down:
            self._unsaved.append((lease, rec, state))
            raise

    async def _flush(self) -> None:
        while self._unsaved:
            lease, rec, state = self._unsaved[0]
            if not lease.held:
                await lease.acquire()  # ours again after the outage (or another holder's: then it counts)
            await self.outbox.write(lease, rec, state)
            self._unsaved.pop(0)

    async def _header(self, ch: str, lease: Lease, eff: Effect) -> None:
        inc = eff.inc
        assert inc is not None
        rec = self.outbox.incident(inc.id)
        channel = eff.pub.get("channel") or ch

        async def post() -> str:
            nonlocal channel
            posted = await self.chat.post_header(ch, inc)
            channel = posted.channel
            return posted.ts

        ts = await self._once(lease, rec, eff.pub, "header", post)
        if ts is None:
            return
        now = repr(self.clock.now())
        done = {
            "fx:header": f"done:{ts}",
            "ts": ts,
            "channel": channel,
            "rev": str(inc.rev),
            "through": str(inc.event_seq),  # what happened before the header is in the header
            "line_at": "",
            "edit_at": now,
        }
        if await self._save(lease, rec, done):
            await self.outbox.bind_thread(done["channel"], ts, inc.id)  # a button clicked there finds it
            log.info("incident %s opened for %s (thread %s)", inc.id, inc.service, ts)

    async def _reply(self, lease: Lease, eff: Effect) -> None:
        inc = eff.inc
        assert inc is not None
        i = int(eff.arg)
        raw = await self.outbox.reply(inc.id, i)
        rec = self.outbox.incident(inc.id)
        if raw is None:  # expired between the count and the read: nothing left to post
            log.warning("investigation reply %d of %s is gone; skipping it", i, inc.id)
            await self._save(lease, rec, {"replies": str(i + 1)})
            return

        async def post() -> str:
            return await self.chat.post_rendered(eff.pub["channel"], eff.pub["ts"], raw)

        ts = await self._once(lease, rec, eff.pub, f"reply:{i}", post)
        if ts is not None:
            await self._save(lease, rec, {f"fx:reply:{i}": f"done:{ts}", "replies": str(i + 1)})

    async def _lines(self, lease: Lease, eff: Effect) -> None:
        inc = eff.inc
        assert inc is not None
        events = eff.arg
        last = events[-1].seq
        rec = self.outbox.incident(inc.id)

        async def post() -> str:
            return await self.chat.post_lines(eff.pub["channel"], eff.pub["ts"], events, inc.service)

        ts = await self._once(lease, rec, eff.pub, f"lines:{last}", post)
        if ts is not None:
            state = {f"fx:lines:{last}": f"done:{ts}", "through": str(last), "line_at": repr(self.clock.now())}
            await self._save(lease, rec, state)

    async def _fixcheck(self, lease: Lease, eff: Effect) -> None:
        """The fix confirmed from the thread did not clear the condition in time: say so, once per fix."""
        inc = eff.inc
        assert inc is not None and inc.fix is not None
        fix_key = eff.pub.get("fix", "")
        now = self.clock.now()
        armed_at = float(eff.pub.get("fixcheck_due", now)) - self.s.alert_fix_check_s
        at = datetime.now(UTC)
        ev = Event(seq=0, kind="fix_pending", name=inc.lead.name, first_at=at, last_at=at, fix=inc.fix,
                   waited_s=max(now - armed_at, 0.0))  # fmt: skip
        rec = self.outbox.incident(inc.id)

        async def post() -> str:
            return await self.chat.post_lines(eff.pub["channel"], eff.pub["ts"], [ev], inc.service)

        ts = await self._once(lease, rec, eff.pub, f"fixcheck:{fix_key}", post)
        if ts is not None:
            await self._save(lease, rec, {f"fx:fixcheck:{fix_key}": f"done:{ts}", "fixcheck_done": fix_key})

    async def _edit(self, lease: Lease, eff: Effect) -> None:
        inc = eff.inc
        assert inc is not None
        await self.chat.edit_header(eff.pub["channel"], eff.pub["ts"], inc)  # idempotent: no intent
        self.stats["updates"] += 1
        state = {"rev": str(inc.rev), "edit_at": repr(self.clock.now())}
        await self.outbox.write(lease, self.outbox.incident(inc.id), state)

    async def _summary(self, ch: str, lease: Lease, eff: Effect) -> None:
        storm, view, digest = eff.arg
        incs, threads, since = view
        now = repr(self.clock.now())
        if eff.kind == "summary-edit":
            await self.chat.edit_storm(eff.pub["channel"], eff.pub["ts"], incs, threads, since)
            self.stats["updates"] += 1
            await self.outbox.write(lease, storm, {"digest": digest, "edit_at": now})
            return
        channel = ch

        async def post() -> str:
            nonlocal channel
            posted = await self.chat.post_storm(ch, incs, threads, since)
            channel = posted.channel
            return posted.ts

        ts = await self._once(lease, storm, eff.pub, "summary", post)
        if ts is not None:
            state = {"fx:summary": f"done:{ts}", "ts": ts, "channel": channel, "digest": digest, "edit_at": now}
            await self._save(lease, storm, state)

    async def _failed(self, lease: Lease, eff: Effect, exc: Exception) -> None:
        err = redact(f"{type(exc).__name__}: {exc}")[:500]
        rec: Record = eff.arg[0] if eff.inc is None else self.outbox.incident(eff.inc.id)
        attempts = await self.outbox.record_failure(rec, eff.kind)
        self.stats["failures"] += 1
        if attempts < self.s.alert_max_attempts:
            # Back off well under the queue's reclaim idle time: the next step retries, other work goes first.
            delay = min(0.5 * 2 ** (attempts - 1), 10.0, self.s.alert_reclaim_idle_ms / 4000)
            self.retry_at[eff.name] = self.clock.now() + delay
            log.warning("Slack effect %s failed (attempt %d): %s; retrying in %.1fs", eff.name, attempts, err, delay)
            return
        self.retry_at.pop(eff.name, None)
        await self.outbox.clear_failures(rec, eff.kind)
        log.error("Slack effect %s given up after %d attempts: %s", eff.name, attempts, err)
        inc = eff.inc
        if inc is None:
            await self.outbox.write(lease, rec, {"digest": "given-up", "edit_at": repr(self.clock.now() + 60)})
            return
        if eff.kind == "header":
            await self.outbox.write(lease, rec, {"dead": "1"})
            await self._dead_letter(inc, err, attempts)
        elif eff.kind == "lines":
            await self.outbox.write(lease, rec, {"through": str(eff.arg[-1].seq)})
        elif eff.kind == "reply":
            await self.outbox.write(lease, rec, {"replies": str(int(eff.arg) + 1)})
        elif eff.kind == "fixcheck":
            await self.outbox.write(lease, rec, {"fixcheck_done": eff.pub.get("fix", "")})
        else:
            await self.outbox.write(lease, rec, {"rev": str(inc.rev)})

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
        await self.outbox.dead_letter(entry, alert.model_dump_json(), error, attempts)
        if self.on_dead is not None:
            try:
                await self.on_dead(entry, alert, error, attempts)
            except Exception as exc:  # noqa: BLE001 - the entry is dead-lettered either way; logged
                log.error("could not announce the dead-lettered incident %s: %s", inc.id, redact(str(exc))[:300])

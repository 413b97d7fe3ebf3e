"""Incident records in Redis, and the outbox that tells the publisher which incidents have Slack work.

Recording is an optimistic transaction (WATCH the alert's and the service's index keys and the incident): two
workers, on one instance or several, folding alerts of one service at once never lose one of them, and
nothing needs a lock, so a worker killed mid-record stalls nobody. The same transaction marks the incident
dirty in its channel's outbox; the publisher (skills/incidents/publisher.py) posts what it asks for.

Per incident:
  incident:<id>          the Incident (JSON)
  incident:<id>:pub      what the publisher has done: ts, rev (header revision shown), through (last event
                         posted), line_at / edit_at (clock seconds), fx:<effect> intent records
  incident:<id>:replies  investigation replies (index -> JSON), posted in order under the thread
  incident:<id>:investigation  the entry id that runs the incident's one investigation
  incident:by-thread:<channel>:<ts>  the incident whose Slack thread that is
  incident:index         every incident id scored by when it opened (skills/incidents/lifecycle.py reads it)
The publisher's keys (outbox, storm, dead letters) are in skills/incidents/outbox.py.
"""

from __future__ import annotations

import json
from datetime import datetime

from skills.clock import REAL_CLOCK, Clock
from skills.incidents.model import Alert, Change, Fix, Incident, group_key, is_known_service, new_incident, utcnow
from skills.ports import Store, StorePipeline

RECORD_TTL_S = 30 * 86400

# KEYS[1] outbox zset, KEYS[2] counter, KEYS[3] channels set; ARGV[1] incident id, ARGV[2] channel.
_MARK = """
local n = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[1], n, ARGV[1])
redis.call('SADD', KEYS[3], ARGV[2])
return n
"""
# Remove from the outbox only if nobody marked it again since the publisher looked (score unchanged).
_CLEAN = """
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0
"""


class IncidentStore:
    def __init__(self, r: Store, prefix: str, clock: Clock = REAL_CLOCK) -> None:
        self.r = r
        self.prefix = prefix
        self.clock = clock
        self._mark = r.register_script(_MARK)
        self._clean = r.register_script(_CLEAN)

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    # --- keys ------------------------------------------------------------------------------------------
    def k_incident(self, inc_id: str) -> str:
        return self.key("incident", inc_id)

    def k_pub(self, inc_id: str) -> str:
        return self.key("incident", inc_id, "pub")

    def k_replies(self, inc_id: str) -> str:
        return self.key("incident", inc_id, "replies")

    def k_by_alert(self, alert: Alert) -> str:
        return self.key("incident", "by-alert", alert.key)

    def k_by_group(self, alert: Alert) -> str:
        return self.key("incident", "by-group", group_key(alert))

    def k_outbox(self, channel: str) -> str:
        return self.key("outbox", channel)

    def k_opens(self, channel: str) -> str:
        return self.key("outbox", channel, "opens")

    @property
    def k_index(self) -> str:
        """Every incident by when it opened (epoch seconds): the list, the hand-off and the healthy rule read it."""
        return self.key("incident", "index")

    @property
    def k_channels(self) -> str:
        return self.key("outbox", "channels")

    def k_thread(self, channel: str, ts: str) -> str:
        return self.key("incident", "by-thread", channel, ts)

    # --- reads -----------------------------------------------------------------------------------------
    async def load(self, inc_id: str) -> Incident | None:
        raw = await self.r.get(self.k_incident(inc_id))
        return Incident.model_validate_json(raw) if raw else None

    async def pub(self, inc_id: str) -> dict[str, str]:
        return {str(k): str(v) for k, v in (await self.r.hgetall(self.k_pub(inc_id))).items()}

    async def find_id(self, alert: Alert) -> str:
        return str(await self.r.get(self.k_by_alert(alert)) or "")

    async def thread_incident(self, channel: str, ts: str) -> str:
        """The id of the incident whose Slack thread this is ('' for any other thread)."""
        if not channel or not ts:
            return ""
        return str(await self.r.get(self.k_thread(channel, ts)) or "")

    async def posted_channel(self, channel: str, scan: int = 20) -> str:
        """The id Slack gave `channel` (a '#name' or an id) when it took an incident header there, read from the
        newest incidents recorded for it ('' when none was posted yet): a slash command names its channel by id."""
        for raw_id in reversed(await self.r.zrange(self.k_index, -scan, -1)):
            inc = await self.load(raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id))
            if inc is not None and inc.channel == channel:
                posted = (await self.pub(inc.id)).get("channel", "")
                if posted:
                    return posted
        return ""

    async def bind_thread(self, channel: str, ts: str, inc_id: str) -> None:
        await self.r.set(self.k_thread(channel, ts), inc_id, ex=RECORD_TTL_S)

    # --- the worker's write ----------------------------------------------------------------------------
    async def record(
        self,
        entry_id: str,
        alert: Alert,
        now: datetime,
        *,
        channel: str,
        known: frozenset[str],
        window_s: int,
    ) -> tuple[Incident, Change]:
        """Fold one queued alert into its incident (opening one if needed) and mark it for the publisher."""
        by_alert, by_group = self.k_by_alert(alert), self.k_by_group(alert)

        async def fold(p: StorePipeline) -> tuple[Incident, Change]:
            inc = await self._find(p, entry_id, alert, now, window_s)
            if inc is None:
                inc = new_incident(entry_id, alert, channel, is_known_service(alert.service, known), now)
            await p.watch(self.k_incident(inc.id))
            fresh = await p.get(self.k_incident(inc.id))  # re-read under WATCH
            if fresh:
                inc = Incident.model_validate_json(fresh)
            opened = not fresh
            through = int(await p.hget(self.k_pub(inc.id), "through") or 0)
            change = inc.apply(entry_id, alert, now, posted_through=through)
            p.multi()
            p.set(self.k_incident(inc.id), inc.model_dump_json(), ex=RECORD_TTL_S)
            if change is not Change.STALE:  # a stale notice re-points nothing (the group may have a newer thread)
                p.set(by_alert, inc.id, ex=RECORD_TTL_S)
                p.set(by_group, inc.id, ex=RECORD_TTL_S)
            if opened:  # the storm detector counts these (an hour is kept)
                p.zadd(self.k_index, {inc.id: inc.opened_at.timestamp()})  # /gemma incidents, what changed
                now_s = self.clock.now()
                p.zadd(self.k_opens(inc.channel), {inc.id: now_s})
                p.zremrangebyscore(self.k_opens(inc.channel), "-inf", now_s - 3600)
            return inc, change

        # WATCH the alert's and group's pointers (fold watches the incident too); EXEC fails if any changed
        # meanwhile, and the transaction reruns fold from a fresh read.
        inc, change = await self.r.transaction(fold, by_alert, by_group, value_from_callable=True)
        if change is not Change.STALE:
            await self.mark(inc.id, inc.channel)
        return inc, change

    async def fix_landed(
        self,
        inc_id: str,
        action: str,
        revision: str,
        by: str,
        *,
        serving: int | None = None,
        serving_since: datetime | None = None,
    ) -> bool:
        """The write flow's word that a fix confirmed from this incident's thread completed
        (skills/deploy/flow.py IncidentLink), with what the service showed of its revision: the share of traffic it
        takes and since when it serves. Recorded as a Fix, now; whether it fixed the incident is
        skills/incidents/model.py `Incident.fixed_by`."""
        fix = Fix(action=action, revision=revision, by=by, at=utcnow(), serving=serving, serving_since=serving_since)
        return await self.record_fix(inc_id, fix, fix.at)

    async def record_fix(self, inc_id: str, fix: Fix, now: datetime) -> bool:
        """A fix confirmed from the incident's thread completed: kept on the incident (its follow-up line comes
        with the resolve, or from the publisher's check if the condition still fires). False: no such incident."""
        key = self.k_incident(inc_id)

        async def put(p: StorePipeline) -> Incident | None:
            raw = await p.get(key)
            if not raw:
                return None
            inc = Incident.model_validate_json(raw)
            inc.record_fix(fix, now)
            p.multi()
            p.set(key, inc.model_dump_json(), ex=RECORD_TTL_S)
            return inc

        inc = await self.r.transaction(put, key, value_from_callable=True)
        if inc is None:
            return False
        await self.mark(inc.id, inc.channel)
        return True

    async def _find(self, p: StorePipeline, entry_id: str, alert: Alert, now: datetime, window: int) -> Incident | None:
        """Its own incident (a resolve, a job's retry or a late redelivery of a run it holds always finds it; a
        re-fire while active), else the service's active incident when grouping is on, else none."""
        inc_id = await p.get(self.k_by_alert(alert))
        if inc_id and (raw := await p.get(self.k_incident(str(inc_id)))):
            inc = Incident.model_validate_json(raw)
            known = entry_id in inc.applied or alert.state == "resolved" or _a_known_run(inc, alert)
            if known or inc.active(now, window):
                return inc
        if window > 0:
            inc_id = await p.get(self.k_by_group(alert))
            if inc_id and (raw := await p.get(self.k_incident(str(inc_id)))):
                inc = Incident.model_validate_json(raw)
                if inc.active(now, window):
                    return inc
        return None

    async def mark(self, inc_id: str, channel: str) -> None:
        await self._mark(
            keys=[self.k_outbox(channel), self.key("outbox", "seq"), self.k_channels], args=[inc_id, channel]
        )

    async def clean(self, channel: str, inc_id: str, score: float) -> bool:
        return bool(await self._clean(keys=[self.k_outbox(channel)], args=[inc_id, _score(score)]))

    # --- investigation ---------------------------------------------------------------------------------
    async def claim_investigation(self, inc_id: str, entry_id: str) -> bool:
        """One investigation per incident: the first entry to claim it (and a retry of that entry)."""
        key = self.key("incident", inc_id, "investigation")
        if await self.r.set(key, entry_id, nx=True, ex=RECORD_TTL_S):
            return True
        return str(await self.r.get(key) or "") == entry_id

    async def add_reply(self, inc: Incident, index: int, reply_json: str) -> None:
        """Store an investigation reply once (a re-run keeps the first); the publisher posts it."""
        key = self.k_replies(inc.id)
        await self.r.hsetnx(key, str(index), reply_json)
        await self.r.expire(key, RECORD_TTL_S)
        await self.mark(inc.id, inc.channel)

    async def replies(self, inc_id: str) -> list[str]:
        raw = await self.r.hgetall(self.k_replies(inc_id))
        return [str(raw[k]) for k in sorted(raw, key=lambda x: int(x))]


def _a_known_run(inc: Incident, alert: Alert) -> bool:
    """A notice for a run of this alert that the incident already holds (no later start): a late redelivery, which
    its incident judges (stale) however long ago it went quiet, rather than news opening a thread of its own."""
    m = inc.members.get(alert.key)
    return bool(m and m.started_at and alert.started_at and alert.started_at <= m.started_at)


def _score(score: float) -> str:
    # Redis answers ZSCORE with the shortest repr of the double; our scores are integers from INCR.
    return str(int(score)) if float(score).is_integer() else json.dumps(score)

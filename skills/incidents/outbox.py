"""The publisher's side of incident storage: which channels have Slack work, what each incident's Slack state
is, the storm summary, and the records of effects that went wrong.

The publisher (skills/incidents/publisher.py) decides and calls Slack; everything it reads or writes in Redis
goes through here. Writes that record what Slack was asked or answered go through the channel's fenced lease
(skills/leases.py `guarded_hset`), so a holder that lost its lease cannot overwrite its successor's record.

Per channel:
  outbox:<channel>          incidents with Slack work (zset, score = the mark's sequence number)
  outbox:<channel>:opens    incidents opened in the last hour (zset, score = clock seconds): the storm detector
  outbox:<channel>:storm    the storm summary's state: since, since_wall, ts, digest, edit_at, fx:summary
  outbox:<channel>:lease    the fenced lease of the one instance posting into the channel
Fix follow-ups:
  outbox:fixchecks          incidents whose confirmed fix is checked later (zset "<channel> <id>", score = when,
                            on the publisher's clock): due ones are marked for the publisher again
Shared with the alert queue (bot/alert_queue.py):
  alerts:dead               the dead-letter stream (a header given up after `alert_max_attempts`)
  alerts:ambiguous          re-posts after another holder's unfinished attempt (possible duplicates)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from skills.incidents.model import Incident
from skills.incidents.store import IncidentStore
from skills.leases import Lease

_PARSE_CACHE_MAX = 5000


@dataclass(frozen=True)
class Record:
    """Where one Slack effect's state is kept: an incident's publish state, or a channel's storm summary."""

    kind: Literal["incident", "storm"]
    id: str  # the incident id, or the channel


class Loaded(NamedTuple):
    inc: Incident | None
    pub: dict[str, str]  # the incident's publish state (skills/incidents/store.py)
    replies: int  # investigation replies stored


class IncidentOutbox:
    def __init__(self, store: IncidentStore) -> None:
        self.store = store
        self.r = store.r
        self._parsed: dict[str, tuple[str, Incident]] = {}

    # --- records -----------------------------------------------------------------------------------------
    @staticmethod
    def incident(inc_id: str) -> Record:
        return Record("incident", inc_id)

    @staticmethod
    def storm(channel: str) -> Record:
        return Record("storm", channel)

    def _key(self, rec: Record) -> str:
        if rec.kind == "incident":
            return self.store.k_pub(rec.id)
        return self.store.key("outbox", rec.id, "storm")

    def lease(self, channel: str, ttl_ms: int, owner: str) -> Lease:
        """The fenced lease of the one instance that posts into `channel`."""
        return Lease(self.r, self.store.key("outbox", channel, "lease"), ttl_ms, owner=owner)

    async def write(self, lease: Lease, rec: Record, fields: dict[str, str]) -> bool:
        """Record fields while `lease` is still ours; False (the lease forgotten) when it is not."""
        return await lease.guarded_hset(self._key(rec), fields)

    # --- the work to do ----------------------------------------------------------------------------------
    async def channels(self) -> list[str]:
        """Channels that have had Slack work, sorted."""
        return sorted(str(c) for c in await self.r.smembers(self.store.k_channels))

    async def pending(self) -> int:
        """Incidents with Slack work not yet done, over every channel."""
        total = 0
        for ch in await self.channels():
            total += int(await self.r.zcard(self.store.k_outbox(ch)))
        return total

    async def entries(self, channel: str) -> list[tuple[str, float]]:
        """The channel's outbox: (incident id, mark) pairs; the mark is what `clean` compares."""
        raw: Any = await self.r.zrange(self.store.k_outbox(channel), 0, -1, withscores=True)
        return [(str(m), float(sc)) for m, sc in raw]

    async def clean(self, channel: str, inc_id: str, mark: float) -> bool:
        """Take an incident out of the outbox unless it was marked again since `entries` was read."""
        return await self.store.clean(channel, inc_id, mark)

    async def opened_count(self, channel: str, since: float) -> int:
        return int(await self.r.zcount(self.store.k_opens(channel), since, "+inf"))

    async def opened_since(self, channel: str, since: float) -> list[str]:
        return [str(i) for i in await self.r.zrangebyscore(self.store.k_opens(channel), since, "+inf")]

    async def load(self, ids: list[str]) -> dict[str, Loaded]:
        """Each incident with its publish state and its count of stored replies, in one round trip."""
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
            out[i] = Loaded(self._parse(i, raw), {str(k): str(v) for k, v in pub.items()}, int(replies))
        return out

    def _parse(self, inc_id: str, raw: str | None) -> Incident | None:
        """Parse an incident record, reusing the last parse while the record is unchanged (a storm's step
        looks at every incident in the outbox, a few times a second)."""
        if not raw:
            return None
        hit = self._parsed.get(inc_id)
        if hit is not None and hit[0] == raw:
            return hit[1]
        if len(self._parsed) > _PARSE_CACHE_MAX:
            self._parsed.clear()
        inc = Incident.model_validate_json(raw)
        self._parsed[inc_id] = (raw, inc)
        return inc

    async def reply(self, inc_id: str, index: int) -> str | None:
        """The stored investigation reply `index` (JSON), if any."""
        raw = await self.r.hget(self.store.k_replies(inc_id), str(index))
        return str(raw) if raw is not None else None

    # --- fix follow-ups ----------------------------------------------------------------------------------
    async def arm_fix_check(self, lease: Lease, inc: Incident, fix_key: str, due: float) -> bool:
        """From now on the incident's fix `fix_key` is checked at `due` (publisher clock): recorded once."""
        if not await self.write(lease, self.incident(inc.id), {"fix": fix_key, "fixcheck_due": repr(due)}):
            return False
        await self.r.zadd(self.store.key("outbox", "fixchecks"), {f"{inc.channel}\x1f{inc.id}": due})
        return True

    async def due_fix_checks(self, now: float) -> list[tuple[str, str]]:
        """(channel, incident id) of the fix checks due by `now`, taken off the schedule and marked for work."""
        key = self.store.key("outbox", "fixchecks")
        due = [str(m) for m in await self.r.zrangebyscore(key, "-inf", now)]
        out = []
        for member in due:
            channel, _, inc_id = member.partition("\x1f")
            await self.store.mark(inc_id, channel)
            await self.r.zrem(key, member)
            out.append((channel, inc_id))
        return out

    # --- the storm summary -------------------------------------------------------------------------------
    async def storm_state(self, channel: str) -> dict[str, str]:
        return {str(k): str(v) for k, v in (await self.r.hgetall(self._key(self.storm(channel)))).items()}

    async def end_storm(self, channel: str) -> None:
        await self.r.delete(self._key(self.storm(channel)))

    # --- what Slack effects leave behind -----------------------------------------------------------------
    async def bind_thread(self, channel: str, ts: str, inc_id: str) -> None:
        """The thread's index: a button clicked in the thread finds its incident."""
        await self.store.bind_thread(channel, ts, inc_id)

    async def count_ambiguous(self) -> int:
        """One more re-post after another holder's unfinished attempt (it may have reached Slack)."""
        return int(await self.r.incr(self.store.key("alerts", "ambiguous")))

    async def ambiguous(self) -> int:
        return int(await self.r.get(self.store.key("alerts", "ambiguous")) or 0)

    async def record_failure(self, rec: Record, effect: str) -> int:
        """Count a failed attempt at `effect`; the attempts so far."""
        return int(await self.r.hincrby(self._key(rec), f"fail:{effect}", 1))

    async def clear_failures(self, rec: Record, effect: str) -> None:
        await self.r.hdel(self._key(rec), f"fail:{effect}")

    @property
    def dead_letter_stream(self) -> str:
        return self.store.key("alerts", "dead")

    async def dead_letter(self, entry: str, alert_json: str, error: str, attempts: int) -> None:
        """Keep a given-up incident in the dead-letter stream the alert queue also writes to."""
        fields = {"entry": entry, "alert": alert_json, "error": error, "attempts": str(attempts)}
        await self.r.xadd(self.dead_letter_stream, fields)  # type: ignore[arg-type]

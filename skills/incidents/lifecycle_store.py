"""Lifecycle actions on recorded incidents (rules: skills/incidents/lifecycle.py), and the incident list.

An action is an optimistic transaction on the incident record (like the worker's record, no lock): it bumps the
header revision and queues a thread line, and the publisher shows both. Snoozes with an end are also kept in a
sorted set (`incident:snoozes`, scored by their end in epoch seconds) that `wake_due` sweeps: the publisher
calls it every step with the wall time, a test with the time it wants.
"""

from __future__ import annotations

import re
from datetime import datetime

from pydantic import BaseModel

from skills.incidents.lifecycle import LifeRecord, Refused, Status
from skills.incidents.model import Incident
from skills.incidents.store import RECORD_TTL_S, IncidentStore
from skills.ports import StorePipeline


class ActionRefused(ValueError):
    """The action cannot apply (nothing changed): the message says why, naming people as <@ID> (`mentions`)."""

    def __init__(self, message: str, mentions: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.mentions = mentions


def _shown_id(inc_id: str) -> str:
    """An incident id from a button or form, fit to quote back (it is the presser's input, not our record)."""
    return re.sub(r"[^A-Za-z0-9._-]", "", inc_id)[:40] or "(none)"


_LOAD_BATCH = 500


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


class Listed(BaseModel):
    incident: Incident
    status: Status


class IncidentLifecycle:
    def __init__(self, store: IncidentStore) -> None:
        self.store = store
        self.r = store.r

    @property
    def k_snoozes(self) -> str:
        return self.store.key("incident", "snoozes")

    async def check_thread(self, inc_id: str, channel: str, thread_ts: str) -> None:
        """A button or form acts only on the incident of the message it came from: `inc_id` (from the button's
        value or the form's private_metadata) must be the incident bound to that channel and thread (the header
        posted there, incident:by-thread). ActionRefused otherwise."""
        bound = await self.store.thread_incident(channel, thread_ts)
        if bound == inc_id:
            return
        named = _shown_id(inc_id)
        if bound:
            raise ActionRefused(
                f"This button names incident {named}, but its message is incident {bound}'s: a button acts only on "
                "the incident of its message; nothing changed."
            )
        raise ActionRefused(
            f"This message is not the header of incident {named} (or its record expired): a button acts only on "
            "the incident of its message; nothing changed."
        )

    async def check(self, inc_id: str, action: str, by: str, thread: tuple[str, str] | None = None) -> Incident:
        """The incident, if `by` may do `action` on it from `thread` now (nothing is written); ActionRefused why not."""
        if thread is not None:
            await self.check_thread(inc_id, *thread)
        inc = await self.store.load(inc_id)
        if inc is None:
            raise ActionRefused(f"No incident {_shown_id(inc_id)} is recorded (it may have expired).")
        refused = inc.life.refusal(action, by, firing=inc.state == "firing", closed_at=inc.ended_at)
        if refused is not None:
            raise ActionRefused(str(refused), refused.mentions)
        return inc

    async def act(
        self,
        inc_id: str,
        action: str,
        by: str,
        now: datetime,
        *,
        snooze: str = "",
        note: str = "",
        thread: tuple[str, str] | None = None,
    ) -> tuple[Incident, LifeRecord]:
        """Apply one user's action; ActionRefused (nothing changed) for an unknown incident, a bad action, one the
        rules of who may press what refuse (skills/incidents/lifecycle.py), or, with the (channel, thread ts) of
        the message pressed, an incident that is not that thread's."""
        if thread is not None:
            await self.check_thread(inc_id, *thread)
        key = self.store.k_incident(inc_id)

        async def put(p: StorePipeline) -> tuple[Incident, LifeRecord]:
            raw = await p.get(key)
            if not raw:
                raise ActionRefused(f"No incident {_shown_id(inc_id)} is recorded (it may have expired).")
            inc = Incident.model_validate_json(raw)
            try:
                rec = inc.act(action, by, now, snooze=snooze, note=note)
            except Refused as exc:
                raise ActionRefused(str(exc), exc.mentions) from None
            except ValueError as exc:
                raise ActionRefused(str(exc)) from None
            p.multi()
            p.set(key, inc.model_dump_json(), ex=RECORD_TTL_S)
            if inc.life.snooze_until is not None:
                p.zadd(self.k_snoozes, {inc.id: inc.life.snooze_until.timestamp()})
            return inc, rec

        inc, rec = await self.r.transaction(put, key, value_from_callable=True)
        await self.store.mark(inc.id, inc.channel)
        return inc, rec

    async def wake_due(self, now: datetime) -> list[str]:
        """Wake every snooze that ended by `now`; the ids woken."""
        due = await self.r.zrangebyscore(self.k_snoozes, "-inf", now.timestamp())
        woken = []
        for raw_id in due:
            inc_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
            key = self.store.k_incident(inc_id)

            async def put(p: StorePipeline, key: str = key) -> Incident | None:
                raw = await p.get(key)
                if not raw:
                    return None
                inc = Incident.model_validate_json(raw)
                if not inc.wake_if_due(now):
                    return None
                p.multi()
                p.set(key, inc.model_dump_json(), ex=RECORD_TTL_S)
                return inc

            inc = await self.r.transaction(put, key, value_from_callable=True)
            await self.r.zrem(self.k_snoozes, inc_id)
            if inc is not None:
                await self.store.mark(inc.id, inc.channel)
                woken.append(inc.id)
        return woken

    async def listed(self, since: datetime | None = None, limit: int | None = None) -> list[Listed]:
        """Incidents opened since `since` (all kept, when None), newest first, with their status: every one, or
        the newest `limit`. Lists count from this, so a count is the store's, not a page's."""
        low: float | str = since.timestamp() if since else "-inf"
        ids = [_text(i) for i in reversed(await self.r.zrangebyscore(self.store.k_index, low, "+inf"))][:limit]
        out = []
        for start in range(0, len(ids), _LOAD_BATCH):  # one round trip per batch, not one per incident
            async with self.r.pipeline(transaction=False) as p:
                for inc_id in ids[start : start + _LOAD_BATCH]:
                    p.get(self.store.k_incident(inc_id))
                raws = await p.execute()
            for raw in raws:
                if raw:  # an expired record leaves its id in the index for a while
                    inc = Incident.model_validate_json(raw)
                    out.append(Listed(incident=inc, status=inc.life.status(inc.state == "firing")))
        return out

    async def lead_findings(self, ids: list[str]) -> dict[str, str]:
        """Each incident's leading finding kind, from its stored investigation replies (the thread's first finding
        that is no consequence; '' when it has none yet): what tells incidents of one alert apart in a list."""
        from skills.incidents.postmortem import findings_of  # the one reader of the thread's findings

        async with self.r.pipeline(transaction=False) as p:
            for inc_id in ids:
                p.hgetall(self.store.k_replies(inc_id))
            raws = await p.execute()
        out = {}
        for inc_id, raw in zip(ids, raws, strict=True):
            replies = [_text(raw[k]) for k in sorted(raw or {}, key=lambda x: int(x))]
            roots = [f.kind for f in findings_of(replies) if not f.consequence]
            out[inc_id] = roots[0] if roots else ""
        return out

    async def find(self, ref: str) -> Incident | None:
        """An incident by id ('inc-…' or without the prefix)."""
        ref = ref.strip()
        if not ref:
            return None
        return await self.store.load(ref if ref.startswith("inc-") else f"inc-{ref}")

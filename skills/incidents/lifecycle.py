"""An incident's lifecycle from its thread: acknowledge, take ownership, snooze, resolve with a note.

Pure rules over the state kept on the Incident (skills/incidents/model.py `Incident.life`); the Redis side is
skills/incidents/lifecycle_store.py. Every action is recorded with who and when (`log`), shown in the header and
listed by `/gemma incidents`.

- Snooze (15 min, 1 h, or until the incident resolves): the thread's repeat and join lines are held and coalesce
  silently; it wakes when the snooze ends (the publisher's sweep, or `wake_due` with an injected time), when an
  alert of higher severity than when it was snoozed arrives, or when the condition fires again. The held lines
  post then, as one coalesced message, after a "woke" line saying why.
- Resolve by hand with a note: the incident is closed for the team. If its alert still fires the header and the
  line say so, and its repeat lines stay held like a snooze until the alert closes. The closure rule of
  README "Incidents" still holds: the condition firing again within ALERT_GROUP_WINDOW_S of the resolve
  reopens the incident (the manual resolve is cleared), later it is a new incident.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field

Action = Literal["ack", "own", "snooze", "resolve", "woke", "reopened"]
SNOOZES: dict[str, int | None] = {"15m": 15 * 60, "1h": 3600, "resolved": None}  # None: until it resolves
NOTE_MAX = 1000
LOG_MAX = 100
Status = Literal["open", "acknowledged", "snoozed", "resolved"]


class LifeRecord(BaseModel):
    """One lifecycle action: who, when, and what it carried."""

    action: Action
    by: str = ""  # Slack user id ('' for the bot's own wake-ups)
    at: datetime
    note: str = ""  # the resolve note; a wake-up's reason
    snooze: str = ""  # the snooze chosen (a key of SNOOZES)
    until: datetime | None = None
    firing: bool = False  # a resolve: the alert still fired


class Lifecycle(BaseModel):
    acked_by: str = ""
    acked_at: datetime | None = None
    owner: str = ""
    owned_at: datetime | None = None
    snooze: str = ""  # '' when not snoozed
    snoozed_by: str = ""
    snooze_until: datetime | None = None
    snooze_rank: int = 99  # the incident's severity rank when snoozed: a lower rank (more severe) wakes it
    resolved_by: str = ""
    resolved_at: datetime | None = None
    note: str = ""
    log: list[LifeRecord] = Field(default_factory=list)

    def held(self, firing: bool) -> bool:
        """Whether routine thread lines wait (snoozed, or resolved by hand while the alert still fires)."""
        return bool(self.snooze) or (bool(self.resolved_by) and firing)

    def status(self, firing: bool) -> Status:
        if self.resolved_by or not firing:
            return "resolved"
        if self.snooze:
            return "snoozed"
        if self.acked_by or self.owner:
            return "acknowledged"
        return "open"

    def _add(self, rec: LifeRecord) -> LifeRecord:
        self.log.append(rec)
        self.log = self.log[-LOG_MAX:]
        return rec

    def apply(
        self, action: str, by: str, now: datetime, *, firing: bool, rank: int, snooze: str = "", note: str = ""
    ) -> LifeRecord:
        """A user's action; raises ValueError (nothing changed) for a bad one."""
        if action == "ack":
            self.acked_by, self.acked_at = by, now
            return self._add(LifeRecord(action="ack", by=by, at=now))
        if action == "own":
            self.owner, self.owned_at = by, now
            if not self.acked_by:  # owning it acknowledges it
                self.acked_by, self.acked_at = by, now
            return self._add(LifeRecord(action="own", by=by, at=now))
        if action == "snooze":
            if snooze not in SNOOZES:
                raise ValueError(f"unknown snooze {snooze!r} (one of: {', '.join(SNOOZES)})")
            if not firing:
                raise ValueError("the incident is resolved: nothing to snooze")
            secs = SNOOZES[snooze]
            self.snooze, self.snoozed_by, self.snooze_rank = snooze, by, rank
            self.snooze_until = now + timedelta(seconds=secs) if secs is not None else None
            return self._add(LifeRecord(action="snooze", by=by, at=now, snooze=snooze, until=self.snooze_until))
        if action == "resolve":
            note = note.strip()
            if not note:
                raise ValueError("a resolve needs a note: what fixed it, or why it is closed")
            if len(note) > NOTE_MAX:
                raise ValueError(f"the note is {len(note)} characters; at most {NOTE_MAX}")
            self.resolved_by, self.resolved_at, self.note = by, now, note
            self._clear_snooze()
            return self._add(LifeRecord(action="resolve", by=by, at=now, note=note, firing=firing))
        raise ValueError(f"unknown action {action!r}")

    def _clear_snooze(self) -> None:
        self.snooze, self.snoozed_by, self.snooze_until, self.snooze_rank = "", "", None, 99

    def wake(self, now: datetime, why: str) -> LifeRecord | None:
        """End a snooze (None when not snoozed)."""
        if not self.snooze:
            return None
        self._clear_snooze()
        return self._add(LifeRecord(action="woke", at=now, note=why))

    def due(self, now: datetime) -> bool:
        return bool(self.snooze) and self.snooze_until is not None and self.snooze_until <= now

    def reopen(self, now: datetime) -> LifeRecord | None:
        """The condition fired again within the window: a manual resolve no longer stands."""
        if not self.resolved_by:
            return None
        self.resolved_by, self.resolved_at, self.note = "", None, ""
        return self._add(LifeRecord(action="reopened", at=now, note="the condition fired again"))

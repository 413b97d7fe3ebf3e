"""An incident's lifecycle from its thread: acknowledge, take ownership, snooze, resolve with a note.

Pure rules over the state kept on the Incident (skills/incidents/model.py `Incident.life`); the Redis side is
skills/incidents/lifecycle_store.py. Every action is recorded with who and when (`log`), shown in the header and
listed by `/gemma incidents`.

- Snooze (15 min, 1 h, or until the incident resolves): the thread's repeat and join lines are held and coalesce
  silently; it wakes when the snooze ends (the publisher's sweep, or `wake_due` with an injected time), when an
  alert of higher severity than when it was snoozed arrives, or when the condition fires again. The held lines
  post then, as one coalesced message, after a "woke" line saying why.
- Who may press what (README "Incidents"; `Lifecycle.refusal`): a resolved incident (by hand, or its alert closed)
  takes no acknowledge, ownership or snooze; a second resolve is refused with who resolved it and when (an
  incident its alert closed still takes the one resolve note); a second acknowledge says who acknowledged it and
  changes nothing; taking ownership from someone else is allowed and recorded as taken over from them; pressing
  what you already did (your own acknowledge, your own ownership) is refused as already done. A refusal is a
  `Refused` (a ValueError naming people as <@ID>, with those ids) and changes nothing.
- Resolve by hand with a note: the incident is closed for the team. If its alert still fires the header and the
  line say so, and its repeat lines stay held like a snooze until the alert closes. The closure rule of
  README "Incidents" still holds: the condition firing again within ALERT_GROUP_WINDOW_S of the resolve
  reopens the incident (the manual resolve is cleared), later it is a new incident.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal, get_args

from pydantic import BaseModel, Field

Action = Literal["ack", "own", "snooze", "resolve", "woke", "reopened"]
UserAction = Literal["ack", "own", "snooze", "resolve"]  # what the header's buttons do
USER_ACTIONS: tuple[str, ...] = get_args(UserAction)
SNOOZES: dict[str, int | None] = {"15m": 15 * 60, "1h": 3600, "resolved": None}  # None: until it resolves
NOTE_MAX = 1000
LOG_MAX = 100
Status = Literal["open", "acknowledged", "snoozed", "resolved"]


class Refused(ValueError):
    """A user's action that does not apply now; nothing changed. The message names people as <@ID>; `mentions`
    lists those ids (from our own records) so that a Slack reply keeps them as mentions."""

    def __init__(self, message: str, mentions: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.mentions = mentions


def _when(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC") if t else "an unknown time"


_BUTTON = {"ack": "Acknowledge", "own": "Take ownership", "snooze": "Snooze"}


class LifeRecord(BaseModel):
    """One lifecycle action: who, when, and what it carried."""

    action: Action
    by: str = ""  # Slack user id ('' for the bot's own wake-ups)
    at: datetime
    note: str = ""  # the resolve note; a wake-up's reason
    snooze: str = ""  # the snooze chosen (a key of SNOOZES)
    until: datetime | None = None
    firing: bool = False  # a resolve: the alert still fired
    took_from: str = ""  # an ownership taken over: whose it was


class Lifecycle(BaseModel):
    acked_by: str = ""
    acked_at: datetime | None = None
    owner: str = ""
    owned_at: datetime | None = None
    took_from: str = ""  # the owner before, when the current owner took it over from someone else
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

    def refusal(self, action: str, by: str, *, firing: bool, closed_at: datetime | None = None) -> Refused | None:
        """Why `by` may not do `action` now (None: they may). Who may press what, as README "Incidents" states it:
        a resolved incident takes no acknowledge, ownership or snooze; a resolve stands (a second is refused with
        who and when); a second acknowledge changes nothing and says whose it is; ownership may be taken over from
        someone else (`apply` records whose it was); what `by` already did is not done twice."""
        if action not in USER_ACTIONS:
            return None  # apply refuses it by name

        def who(user: str) -> str:
            return "you" if user == by else f"<@{user}>"

        def ids(*users: str) -> tuple[str, ...]:
            return tuple(u for u in dict.fromkeys(users) if u and u != by)

        if self.resolved_by:
            done = f"{who(self.resolved_by)} at {_when(self.resolved_at)}"
            if action == "resolve":
                return Refused(
                    f"Already resolved by {done}: that resolve and its note stand; nothing changed.",
                    ids(self.resolved_by),
                )
            return Refused(
                f"This incident was resolved by {done}: {_BUTTON[action]} no longer applies (it reopens if its "
                "condition fires again); nothing changed.",
                ids(self.resolved_by),
            )
        if not firing and action != "resolve":
            return Refused(
                f"This incident resolved when its alert closed at {_when(closed_at)}: {_BUTTON[action]} no longer "
                "applies (it reopens if its condition fires again); nothing changed."
            )
        if action == "ack" and self.acked_by:
            owns = f"; {who(self.owner)} {'own' if self.owner == by else 'owns'} it" if self.owner else ""
            hint = "" if self.owner == by else " Take ownership to take it over."
            return Refused(
                f"Already acknowledged by {who(self.acked_by)} at {_when(self.acked_at)}{owns}: nothing changed.{hint}",
                ids(self.acked_by, self.owner),
            )
        if action == "own" and self.owner == by:
            return Refused(f"You own it already (since {_when(self.owned_at)}): nothing changed.")
        return None

    def apply(
        self,
        action: str,
        by: str,
        now: datetime,
        *,
        firing: bool,
        rank: int,
        snooze: str = "",
        note: str = "",
        closed_at: datetime | None = None,
    ) -> LifeRecord:
        """A user's action; raises ValueError (a `Refused` when the rules above refuse it; nothing changed)."""
        refused = self.refusal(action, by, firing=firing, closed_at=closed_at)
        if refused is not None:
            raise refused
        if action == "ack":
            self.acked_by, self.acked_at = by, now
            return self._add(LifeRecord(action="ack", by=by, at=now))
        if action == "own":
            took_from = self.owner  # someone else's (refusal() refused taking one's own again)
            self.owner, self.owned_at, self.took_from = by, now, took_from
            if not self.acked_by:  # owning it acknowledges it
                self.acked_by, self.acked_at = by, now
            return self._add(LifeRecord(action="own", by=by, at=now, took_from=took_from))
        if action == "snooze":
            if snooze not in SNOOZES:
                raise ValueError(f"unknown snooze {snooze!r} (one of: {', '.join(SNOOZES)})")
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

"""Alerts and incidents: the domain behind alert threads.

An `Alert` is one notification from any source (GCP Monitoring, Alertmanager), already normalised. An
`Incident` is what one Slack thread shows: the alerts of ONE failing condition on one service (its
`condition_key`), grouped within a window. One failure, one investigation: an alert whose condition differs
from the open incident's opens an incident of its own (its own thread, diagnosis and fix buttons) rather than a
section in the service's thread, because a thread is what Slack users follow, resolve and act on as a unit:
the fix buttons of a thread act on its incident (incident:by-thread), a resolve turns one header green, and two
failures sharing a thread would share one header state and make "which failure did this button fix" a guess.
Repeats of one condition (re-notifications, or the same alertname on more instances) stay coalesced lines in
its thread.
The rules here are pure (no I/O) so that replays and retries give the same answer: applying the same alert
twice never changes an incident a second time.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from skills.incidents.lifecycle import Lifecycle, LifeRecord

AlertState = Literal["firing", "resolved"]

# Highest first; anything else counts as "unknown" (below info).
SEVERITIES = ("critical", "error", "warning", "info")


def normalise_severity(raw: str | None) -> str:
    s = (raw or "").strip().lower()
    aliases = {
        "crit": "critical",
        "page": "critical",
        "high": "error",
        "err": "error",
        "warn": "warning",
        "medium": "warning",
        "low": "info",
        "none": "info",
        "no severity": "unknown",
    }
    s = aliases.get(s, s)
    return s if s in SEVERITIES else "unknown"


def _rank(severity: str) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


def severity_rank(severity: str) -> int:
    """0 for critical, upwards for less severe (unknown last)."""
    return _rank(severity)


class Alert(BaseModel):
    """One alert notification, whatever sent it."""

    source: Literal["gcp", "alertmanager", "azure"]
    fingerprint: str = Field(min_length=1)  # GCP incident_id; Alertmanager per-alert fingerprint
    state: AlertState
    name: str  # GCP policy name; Alertmanager alertname
    service: str = ""  # "" when the payload names none
    severity: str = "unknown"
    summary: str = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None
    url: str = ""  # the console incident / the Alertmanager page
    revision: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    test: bool = False  # the GCP console's "send test notification"
    # Alertmanager's `truncatedAlerts`: how many alerts of this notification's group it left out (max_alerts).
    truncated_alerts: int = Field(default=0, ge=0)
    # What failed, as the sender names it: set by each source's parser (handlers/alerts/); "" means `name`.
    condition: str = ""

    @property
    def key(self) -> str:
        """Identity of the alert across deliveries: source + fingerprint."""
        return f"{self.source}:{self.fingerprint}"

    @property
    def condition_key(self) -> str:
        """The failing condition this alert reports: alerts with the same one on one service are one failure."""
        return f"{self.source}:{self.condition or self.name}"

    def dedup_key(self) -> str:
        """Same alert, same state, same start: a webhook retry or a repeat, not news."""
        start = self.started_at.isoformat() if self.started_at else ""
        raw = f"{self.source}\x1f{self.fingerprint}\x1f{self.state}\x1f{start}"
        return hashlib.sha256(raw.encode()).hexdigest()[:32]


class Member(BaseModel):
    """The latest known state of one alert inside an incident."""

    source: str
    fingerprint: str
    name: str
    severity: str
    state: AlertState
    summary: str = ""
    url: str = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None
    condition: str = ""  # Alert.condition_key
    revision: str = ""  # the revision the alert is about, when it names one (Cloud Run's revision_name)


class Fix(BaseModel):
    """A write confirmed from the incident's thread that completed (skills/deploy/flow.py records it), with what
    the service showed of its revision right after: whether it serves, and since when.

    "Serves" is what `/gemma status` reads: the revision is Ready (Cloud Run's Ready condition, which its startup
    probe on vLLM's /health gates) and takes a share of the traffic (the service's traffic statuses). A fix whose
    revision takes no traffic (traffic pinned elsewhere) fixes nothing yet, whatever the alert does."""

    action: str  # e.g. "redeploy `vllm-gemma4`"
    revision: str = ""  # the revision it made ready, when it made one
    by: str = ""  # who confirmed it
    at: datetime  # wall time it completed (the follow-up check counts on the publisher's clock from when it sees it)
    serving: int | None = None  # percent of traffic its revision took when it completed (None: not known)
    # When its revision began serving (its Ready condition's time; the write's start when the target does not say)
    serving_since: datetime | None = None


class Change(StrEnum):
    OPENED = "opened"  # first alert: a new thread
    JOINED = "joined"  # another alert for the same service inside the window
    REPEATED = "repeated"  # same alert still firing, notified again
    REFIRED = "refired"  # a resolved alert (or its condition, under a new alert id) fires again: reopened
    RESOLVED = "resolved"  # a firing alert resolved
    STALE = "stale"  # older than what we know (out-of-order delivery): nothing to show


EventKind = Literal[
    "joined", "repeated", "refired", "resolved", "truncated", "fixed", "fix_pending", "fix_landed", "life"
]


class Event(BaseModel):
    """Something the thread should say, waiting for its line. Repeats of one alert coalesce into one event
    (`count`, `first_at`..`last_at`) until a line has been posted for it."""

    seq: int
    kind: EventKind
    key: str = ""
    name: str = ""
    severity: str = ""
    summary: str = ""
    count: int = 1
    first_at: datetime
    last_at: datetime
    repeat_no: int = 0  # repeats of the incident so far (for "repeat notification #n")
    started_at: datetime | None = None
    took_s: float | None = None  # a resolved alert's own duration
    incident_duration_s: float | None = None  # set when this resolve resolved the whole incident
    condition: str = ""  # joined alerts of one condition coalesce into one line
    fix: Fix | None = None  # "fixed" / "fix_pending" / "fix_landed": the fix it follows up
    closed_at: datetime | None = None  # "fixed" / "fix_landed": when the incident's alerts closed, if they had
    waited_s: float | None = None  # "fix_pending": how long after the fix the condition still fired
    life: LifeRecord | None = None  # "life": an acknowledge, ownership, snooze, wake-up or resolve from the thread


class Incident(BaseModel):
    """One Slack thread: the header message `ts` in `channel`, and the alerts it groups."""

    id: str
    service: str
    known_service: bool = True
    channel: str
    ts: str | None = None
    opened_at: datetime
    last_event_at: datetime
    members: dict[str, Member] = Field(default_factory=dict)
    primary: str = ""  # key of the alert that opened the thread
    repeats: int = 0
    # entry id -> change it caused: a retried job reuses the recorded change instead of recomputing it
    # against already-updated state (which would lose the thread line the first attempt meant to post).
    applied: dict[str, Change] = Field(default_factory=dict)
    test: bool = False
    rev: int = 0  # bumped by every change the header shows
    event_seq: int = 0
    events: list[Event] = Field(default_factory=list)  # not yet posted as thread lines
    fix: Fix | None = None  # the latest fix confirmed from the thread
    truncated_alerts: int = 0
    life: Lifecycle = Field(default_factory=Lifecycle)  # acknowledge, owner, snooze, manual resolve

    @property
    def state(self) -> AlertState:
        return "firing" if any(m.state == "firing" for m in self.members.values()) else "resolved"

    @property
    def severity(self) -> str:
        sevs = [m.severity for m in self.members.values()] or ["unknown"]
        return min(sevs, key=_rank)

    @property
    def started_at(self) -> datetime:
        starts = [m.started_at for m in self.members.values() if m.started_at]
        return min(starts) if starts else self.opened_at

    @property
    def ended_at(self) -> datetime | None:
        if self.state == "firing":
            return None
        ends = [m.ended_at for m in self.members.values() if m.ended_at]
        return max(ends) if ends else self.last_event_at

    @property
    def duration(self) -> timedelta | None:
        end = self.ended_at
        return None if end is None else max(end - self.started_at, timedelta(0))

    @property
    def revision(self) -> str:
        """The revision the incident is about: its first alert's, else any of its alerts' ('' when none names one)."""
        named = [m.revision for m in self.members.values() if m.revision]
        return (self.lead.revision if self.members else "") or (named[0] if named else "")

    @property
    def lead(self) -> Member:
        return self.members.get(self.primary) or next(iter(self.members.values()))

    def active(self, now: datetime, window_s: int) -> bool:
        """Still the place for news about this service: firing, or quiet for less than the window."""
        return self.state == "firing" or (now - self.last_event_at) <= timedelta(seconds=max(window_s, 0))

    def apply(self, entry_id: str, alert: Alert, now: datetime, posted_through: int = 0) -> Change:
        """Fold one alert into the incident; idempotent per entry id. `posted_through`: the last event seq
        already posted as a line (those are dropped; a repeat only coalesces into an unposted event)."""
        if entry_id in self.applied:
            return self.applied[entry_id]
        self.events = [e for e in self.events if e.seq > posted_through]
        change = self._fold(alert)
        if change is Change.JOINED and self._refires_a_manual_resolve(alert):
            # Cloud Monitoring closes the old alert and opens a new one for the same condition; queue workers may
            # apply the open first. That is the condition firing again after the team closed it, as it is when
            # the close comes first: the same outcome in either order.
            change = Change.REFIRED
        if change is not Change.STALE:
            self.last_event_at = now
        if change is Change.REPEATED:
            self.repeats += 1
        if change is Change.REFIRED:
            self.fix = None  # it did not hold: a later resolve is not this fix's doing
        self._life_follows(change, alert, now)
        if change in (Change.OPENED, Change.JOINED, Change.REFIRED, Change.RESOLVED):
            self.rev += 1
        self._note(change, alert, now)
        if alert.truncated_alerts > self.truncated_alerts:
            self.truncated_alerts = alert.truncated_alerts
            self.rev += 1
            self._add_event("truncated", alert, now, count=alert.truncated_alerts)
        self.applied[entry_id] = change
        if len(self.applied) > 200:  # bounded: old entries are long acknowledged
            for k in list(self.applied)[:-200]:
                del self.applied[k]
        return change

    def _refires_a_manual_resolve(self, alert: Alert) -> bool:
        """A new alert of this condition, firing, after the team resolved the incident by hand: the same rule as
        a new alert after the close (Change.REFIRED in _fold), whatever the alert's own start time says."""
        return bool(self.life.resolved_by) and alert.state == "firing"

    def _life_follows(self, change: Change, alert: Alert, now: datetime) -> None:
        """What an alert does to the lifecycle: a re-fire reopens a manual resolve and wakes a snooze; a more
        severe alert wakes a snooze; the incident resolving ends a snooze "until resolved"."""
        recs: list[LifeRecord | None] = []
        if change is Change.REFIRED:
            recs += [self.life.reopen(now), self.life.wake(now, "the condition fired again")]
        elif alert.state == "firing" and change is not Change.STALE and _rank(alert.severity) < self.life.snooze_rank:
            recs.append(self.life.wake(now, f"severity rose to {alert.severity}"))
        elif change is Change.RESOLVED and self.state == "resolved" and self.life.snooze:
            self.life.wake(now, "the incident resolved")  # the resolved line says it; no line of its own
        for rec in recs:
            if rec is not None:
                self.rev += 1
                self.add_life_event(rec, now)

    def add_life_event(self, rec: LifeRecord, now: datetime) -> None:
        lead = self.lead if self.members else None
        self.event_seq += 1
        self.events.append(
            Event(seq=self.event_seq, kind="life", name=lead.name if lead else "", first_at=now, last_at=now, life=rec)
        )

    def act(self, action: str, by: str, now: datetime, *, snooze: str = "", note: str = "") -> LifeRecord:
        """A lifecycle action from the thread (raises ValueError, changing nothing, for a bad one; a `Refused` for
        one the rules of who may press what refuse: skills/incidents/lifecycle.py)."""
        firing = self.state == "firing"
        rec = self.life.apply(
            action, by, now, firing=firing, rank=_rank(self.severity), snooze=snooze, note=note, closed_at=self.ended_at
        )
        self.rev += 1
        self.add_life_event(rec, now)
        return rec

    def wake_if_due(self, now: datetime) -> bool:
        if not self.life.due(now):
            return False
        rec = self.life.wake(now, "the snooze ended")
        if rec is not None:
            self.rev += 1
            self.add_life_event(rec, now)
        return True

    def _add_event(self, kind: EventKind, alert: Alert, now: datetime, **extra: object) -> Event:
        self.event_seq += 1
        ev = Event(
            seq=self.event_seq,
            kind=kind,
            key=alert.key,
            name=alert.name,
            severity=alert.severity,
            summary=alert.summary,
            first_at=now,
            last_at=now,
            started_at=alert.started_at,
            **extra,  # type: ignore[arg-type]
        )
        self.events.append(ev)
        if len(self.events) > 200:  # bounded; repeats coalesce, so this is ~200 distinct alerts in one interval
            self.events = self.events[-200:]
        return ev

    def _note(self, change: Change, alert: Alert, now: datetime) -> None:
        """Queue the thread line this change asks for, coalescing repeats of one alert."""
        if change is Change.REPEATED:
            for ev in self.events:
                if ev.kind == "repeated" and ev.key == alert.key:
                    ev.count += 1
                    ev.last_at = now
                    ev.repeat_no = self.repeats
                    return
            self._add_event("repeated", alert, now, repeat_no=self.repeats)
        elif change is Change.JOINED:
            for ev in self.events:
                if ev.kind == "joined" and ev.condition == alert.condition_key:
                    ev.count += 1
                    ev.last_at = now
                    return
            self._add_event("joined", alert, now, condition=alert.condition_key)
        elif change is Change.REFIRED:
            self._add_event("refired", alert, now)
        elif change is Change.RESOLVED:
            m = self.members.get(alert.key)
            took = (m.ended_at - m.started_at).total_seconds() if m and m.started_at and m.ended_at else None
            d = self.duration
            whole = d.total_seconds() if self.state == "resolved" and d is not None else None
            self._add_event("resolved", alert, now, took_s=took, incident_duration_s=whole)
            if whole is not None and self.fixed_by() is not None:  # the fix confirmed from the thread did it
                self._add_event("fixed", alert, now, fix=self.fix, closed_at=self.ended_at)

    def fixed_by(self) -> Fix | None:
        """The fix that fixed this incident, if one did: a fix marks an incident fixed only when its revision serves
        and the condition cleared after it served.

        - Its revision serves: `Fix.serving` (> 0% of traffic, its revision Ready: what `/gemma status` reads).
        - The condition cleared: every alert of the incident closed (Cloud Monitoring's `closed`, Alertmanager's
          `resolved`). The bot keeps no record of the alert's condition but the alerting system's own judgement,
          so the close is that record; a manual Resolve is a human's word, not the condition clearing.
        - After it served: the close's time (the alert's `ended_at`) is no earlier than when the fix's revision began
          serving (`Fix.serving_since`, to the whole second: Cloud Monitoring's times are whole seconds). A close
          before that (another revision served first, or the service was destroyed) resolved the incident; the fix
          came after it.
        Otherwise resolution follows the alert's close or a human's Resolve (README "Incidents", the lifecycle)."""
        fix, closed = self.fix, self.ended_at
        if fix is None or self.state != "resolved" or closed is None or not fix.serving:
            return None
        # Whole seconds: a close in the second the revision became ready may be its doing.
        if fix.serving_since is not None and closed < fix.serving_since.replace(microsecond=0):
            return None
        return fix

    def record_fix(self, fix: Fix, now: datetime) -> None:
        """A fix confirmed from the thread completed. If the condition already cleared (the close can arrive
        before the write reports back) the follow-up line says at once whether this fix is what cleared it
        (`fixed_by`) or came after the close; a fix whose revision serves no traffic says so at once; otherwise
        the close will credit it, or the publisher's check says the condition still fires
        (skills/incidents/publisher.py)."""
        self.fix = fix
        self.rev += 1
        resolved = self.state == "resolved"
        if not resolved and fix.serving:
            return
        kind: EventKind = "fixed" if self.fixed_by() is not None else "fix_landed"
        lead = self.lead
        self.event_seq += 1
        self.events.append(
            Event(seq=self.event_seq, kind=kind, key=lead.source + ":" + lead.fingerprint, name=lead.name,
                  severity=lead.severity, first_at=now, last_at=now, fix=fix,
                  closed_at=self.ended_at if resolved else None)
        )  # fmt: skip

    def _fold(self, alert: Alert) -> Change:
        new = Member(
            source=alert.source,
            fingerprint=alert.fingerprint,
            name=alert.name,
            severity=alert.severity,
            state=alert.state,
            summary=alert.summary,
            url=alert.url,
            started_at=alert.started_at,
            ended_at=alert.ended_at if alert.state == "resolved" else None,
            condition=alert.condition_key,
            revision=alert.revision,
        )
        old = self.members.get(alert.key)
        if old is None:
            was_resolved = bool(self.members) and self.state == "resolved"
            self.members[alert.key] = new
            if not self.primary:
                self.primary = alert.key
                return Change.OPENED
            # Its condition fires again under a new alert id (Cloud Monitoring opens a new incident id once the
            # old one closed): the incident reopens rather than counting another alert.
            return Change.REFIRED if was_resolved and alert.state == "firing" else Change.JOINED
        newer_start = bool(alert.started_at and old.started_at and alert.started_at > old.started_at)
        if alert.state == "firing":
            if old.state == "resolved":
                # A firing notice for the run that already resolved is a late retry; a later start is news.
                if not newer_start:
                    return Change.STALE
                self.members[alert.key] = new
                return Change.REFIRED
            self.members[alert.key] = new.model_copy(update={"started_at": old.started_at or new.started_at})
            return Change.REPEATED
        if old.state == "firing":
            if old.started_at and alert.started_at and alert.started_at < old.started_at:
                return Change.STALE  # resolves an earlier run
            self.members[alert.key] = new
            return Change.RESOLVED
        return Change.STALE  # resolved again: nothing new


def new_incident(entry_id: str, alert: Alert, channel: str, known_service: bool, now: datetime) -> Incident:
    # The id derives from the stream entry that opened it, so a retried job finds the same incident.
    return Incident(
        id=f"inc-{entry_id}",
        service=alert.service or "unknown",
        known_service=known_service,
        channel=channel,
        opened_at=now,
        last_event_at=now,
        test=alert.test,
    )


def group_key(alert: Alert) -> str:
    """What groups alerts into a thread: the service and the failing condition (one failure, one thread; see
    the module's docstring); alerts naming no service are never grouped."""
    return f"svc:{alert.service}:{alert.condition_key}" if alert.service else f"alert:{alert.key}"


def is_known_service(service: str, known: frozenset[str]) -> bool:
    return bool(service) and service in known


def window_for(alert: Alert, now: datetime, before: timedelta = timedelta(minutes=15)) -> tuple[datetime, datetime]:
    """The log window diagnosis looks at: a while before the alert started, up to its end (or now)."""
    start = (alert.started_at or now) - before
    end = alert.ended_at or now
    # A sender whose clock is ahead of ours (the sandbox's Azure runs at SANDBOX_SPEED) says the alert fired
    # "later" than now: the window still reaches that moment, so the lines before it are read.
    if alert.started_at is not None:
        end = max(end, alert.started_at)
    return start, max(end, start + timedelta(minutes=1))


def utcnow() -> datetime:
    return datetime.now(UTC)

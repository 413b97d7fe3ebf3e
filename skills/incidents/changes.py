"""What changed before an incident: the service's revisions created in the window before it started, each diffed
against the last healthy revision, attributed from the audit, ranked by closeness in time.

Definitions (README "Incidents" says the same):
- A revision *served* from when it became the newest ready revision until the next ready revision was created
  (the bot renders traffic as "latest ready revision", so that is the one serving), or until now; a revision
  that carries traffic now (a rollback pins it) serves now.
- The *last healthy revision* is the newest ready revision, created before the incident started, that served for
  at least `healthy_s` (default 600 s) with no incident of the service open at any moment of that stretch.
  When no revision meets it (a service younger than that), the revision that served just before the incident
  stands in, and the thread says it is not proven healthy.
- A *change* is a revision created in the `window_s` (default 6 h) before the incident started (or after the
  last healthy revision, whichever is later), other than the healthy one. Who made it: the audit record whose
  `revision` is that revision (skills/audit.py records the revision a write produced); none means a change
  made *outside the bot* (a hand deploy, `gcloud run deploy`, the console). Ranked by closeness to the start
  (plus the grace below).
- The *likely cause*: the revision the alert names when it is one of the changes (a Cloud Monitoring alert is
  about one revision); otherwise the change closest before the start when created within `cause_s` (default
  1 h) of it. "Before" allows `START_GRACE_S` (60 s): Cloud Monitoring gives `started_at` in whole seconds and a
  revision that fails at once alerts as it is created. Then a rollback to the last healthy revision is proposed
  (the existing rollback plan).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, Field

from skills.audit import AuditEntry
from skills.audit import since as audit_since
from skills.ports import RevisionInfo, Store
from skills.serving.changes import FieldChange
from skills.targets.port import ServingTarget

WINDOW_S = 6 * 3600
HEALTHY_S = 600
CAUSE_S = 3600
START_GRACE_S = 60
REVISIONS_READ = 30  # newest revisions read from the runtime: more than a 6-hour window holds in practice


class RevisionChange(BaseModel):
    revision: str
    created_at: datetime | None = None
    ready: bool | None = None
    before_start_s: float = 0.0  # how long before the incident started it was created (negative: after)
    by: str = ""  # the user id of the audit record that produced it; "" when no record did
    action: str = ""  # that record's action (deploy, redeploy, scale, ...)
    outside_bot: bool = True
    diff: list[FieldChange] = Field(default_factory=list)  # against the last healthy revision


class WhatChanged(BaseModel):
    service: str
    started_at: datetime
    window_s: int
    healthy_s: int
    healthy: str = ""  # the last healthy revision ('' when the service shows none)
    healthy_proven: bool = False  # False: the stand-in (served just before; not for healthy_s without incident)
    healthy_by: str = ""  # who made the healthy revision through the bot ('' when no audit record produced it)
    healthy_action: str = ""
    changes: list[RevisionChange] = Field(default_factory=list)
    likely_cause: str = ""  # the revision that is the likely cause ('' when no change is)
    note: str = ""

    @property
    def rollback(self) -> dict[str, str]:
        """The rollback plan's params when a change is the likely cause (empty otherwise)."""
        if not self.likely_cause or not self.healthy:
            return {}
        return {"revision": self.healthy, "service": self.service}


Span = tuple[datetime, datetime]


def _served(revs: list[RevisionInfo], now: datetime) -> dict[str, Span]:
    """Each ready revision's serving stretch: from its creation to the next ready revision's creation (or now)."""
    ready = sorted((r for r in revs if r.ready and r.create_time), key=lambda r: r.create_time or now)
    out: dict[str, Span] = {}
    for i, r in enumerate(ready):
        assert r.create_time is not None
        end = ready[i + 1].create_time if i + 1 < len(ready) else now
        out[r.name] = (r.create_time, end or now)
    for r in revs:  # traffic pinned to it now: it serves now, whatever came after it
        if r.traffic_percent > 0 and r.name in out:
            out[r.name] = (out[r.name][0], now)
    return out


def _quiet_stretch(span: Span, incidents: list[Span], need: timedelta) -> bool:
    """Some stretch of `span` at least `need` long with no incident open in it."""
    start, end = span
    cursor = start
    for a, b in sorted(incidents):
        if b <= cursor or a >= end:
            continue
        if a - cursor >= need:
            return True
        cursor = max(cursor, b)
    return end - cursor >= need


def last_healthy(
    revs: list[RevisionInfo], started_at: datetime, incidents: list[Span], healthy_s: int, now: datetime
) -> tuple[str, bool]:
    """(revision, proven): the newest ready revision created before `started_at` that served `healthy_s` with no
    incident open (its stretch counted up to `started_at`); else the one serving just before, unproven."""
    served = _served(revs, now)
    need = timedelta(seconds=healthy_s)
    # Cloud Monitoring gives `started_at` in whole seconds: the incident began somewhere in that second, so a
    # revision created within it may be from before (Alertmanager's startsAt carries fractions: taken as is).
    until = started_at + timedelta(seconds=1) if started_at.microsecond == 0 else started_at
    before = sorted(
        ((name, (a, min(b, started_at))) for name, (a, b) in served.items() if a < until),
        key=lambda x: x[1][0],
        reverse=True,
    )
    for name, span in before:
        if _quiet_stretch(span, incidents, need):
            return name, True
    return (before[0][0], False) if before else ("", False)


def attribute(entries: list[AuditEntry]) -> dict[str, AuditEntry]:
    """revision -> the audit record of the write that produced it (its outcome record carries `revision`)."""
    return {e.revision: e for e in entries if e.revision and e.result in ("ok", "failed")}


async def what_changed(
    runtime: ServingTarget,
    store: Store,
    audit_key: str,
    service: str,
    started_at: datetime,
    *,
    incidents: list[Span] | None = None,
    now: datetime,
    window_s: int = WINDOW_S,
    healthy_s: int = HEALTHY_S,
    cause_s: int = CAUSE_S,
    alert_revision: str = "",
) -> WhatChanged:
    """The changes before an incident that started at `started_at` (see the module's definitions). `incidents`:
    the open stretches of the service's other incidents (the healthy rule excludes them)."""
    # A target without revisions keeps no history of configurations: only the bot's own writes are known.
    revs = await runtime.list_revisions(service, limit=REVISIONS_READ) if runtime.capabilities.revisions else []
    healthy, proven = last_healthy(revs, started_at, incidents or [], healthy_s, now)
    by_name = {r.name: r for r in revs}
    base = by_name[healthy].template if healthy in by_name else {}
    horizon = started_at - timedelta(seconds=window_s)
    if healthy in by_name and by_name[healthy].create_time:
        horizon = max(horizon, by_name[healthy].create_time or horizon)
    entries = await audit_since(store, audit_key, horizon.timestamp() - 60)
    made = attribute(entries)
    changes: list[RevisionChange] = []
    for r in revs:
        if r.name == healthy or r.create_time is None or r.create_time < horizon or r.create_time > now:
            continue
        rec = made.get(r.name)
        changes.append(
            RevisionChange(
                revision=r.name,
                created_at=r.create_time,
                ready=r.ready,
                before_start_s=(started_at - r.create_time).total_seconds(),
                by=rec.user_id if rec else "",
                action=rec.action if rec else "",
                outside_bot=rec is None,
                diff=runtime.diff(base, r.template) if base and r.template else [],
            )
        )
    # Closeness is measured from the start plus the grace: of two revisions created around a whole-second start,
    # the later one is the nearer change (created after the start beyond the grace: after the earlier ones).
    changes.sort(key=lambda c: abs(c.before_start_s + START_GRACE_S))
    before = [c for c in changes if c.before_start_s >= -START_GRACE_S]
    cause = before[0] if before else None
    likely = cause.revision if cause is not None and cause.before_start_s <= cause_s else ""
    if alert_revision and any(c.revision == alert_revision for c in changes):
        likely = alert_revision  # the alert is about this revision
    note = "" if healthy else "The service shows no ready revision from before the incident to compare with."
    maker = made.get(healthy)
    return WhatChanged(
        healthy_by=maker.user_id if maker else "",
        healthy_action=maker.action if maker else "",
        service=service,
        started_at=started_at,
        window_s=window_s,
        healthy_s=healthy_s,
        healthy=healthy,
        healthy_proven=proven,
        changes=changes,
        likely_cause=likely,
        note=note,
    )


def as_text(wc: WhatChanged) -> list[str]:
    """Plain lines (the agent's tool, the postmortem): every fact, no markup."""
    lines = [
        f"incident on {wc.service} started {wc.started_at:%Y-%m-%d %H:%M:%S} UTC; window {wc.window_s // 60} min",
        f"last healthy revision: {wc.healthy or 'none'}"
        + ("" if wc.healthy_proven or not wc.healthy else f" (served just before; not {wc.healthy_s // 60} min "
           "without an incident)"),
    ]  # fmt: skip
    for c in wc.changes:
        who = "outside the bot (no audit record produced it)" if c.outside_bot else f"{c.action} by {c.by} via the bot"
        when = _ago(c.before_start_s)
        state = {True: "ready", False: "failed", None: "pending"}[c.ready]
        diff = "; ".join(d.line() for d in c.diff[:12]) or "no configuration difference"
        lines.append(f"{c.revision} ({state}) created {when}, {who}: {diff}")
    if not wc.changes:
        lines.append("no revision was created in the window")
    if wc.likely_cause:
        lines.append(f"likely cause: {wc.likely_cause}; rollback to {wc.healthy} proposed")
    return lines


def _ago(s: float) -> str:
    minutes = abs(s) / 60
    amount = f"{minutes:.0f} min" if minutes >= 1 else f"{abs(s):.0f} s"
    return f"{amount} before the incident" if s >= 0 else f"{amount} after it started"

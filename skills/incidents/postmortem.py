"""A postmortem draft of one incident, every fact taken from records: the incident (its alerts, lifecycle and fix),
the thread's findings as stored, the audit of writes, the revisions (what changed) and Cloud Monitoring.

`gather` collects the facts; `render_markdown` writes the deterministic draft. A model, when one is configured,
only adds a prose summary in front of the same facts (handlers/commands/postmortem.py): it never supplies one.
Everything is redacted before it leaves (skills/logs/redact.py), the facts sent to the model included.

Outside text (alert names and services, resolve notes, user ids, audit details, revision names, the model's prose)
is data in every format written: in the Markdown file each piece is escaped for its position (skills/markdown.py:
one line, no leading block marker, `|` escaped in table cells, code spans fenced around its backticks), so it
cannot add a heading, a section or a timeline row; in the Slack reply it is one line per item (the renderer,
handlers/render_slack.py, escapes Slack's own markup). The lines below are built from pieces, ours and `_Out`
(outside), and each format quotes the outside pieces its own way (`Quote`).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import NamedTuple

from pydantic import BaseModel, Field

from skills.audit import AuditEntry
from skills.audit import since as audit_since
from skills.diagnosis.analyzers import KINDS
from skills.durations import format_duration
from skills.incidents.changes import WhatChanged
from skills.incidents.model import Fix, Incident
from skills.incidents.runbooks import runbook_ref
from skills.logs.redact import redact
from skills.markdown import block, code, inline, one_line, plain_code
from skills.observe.service_metrics import read_figure
from skills.ports import Metrics, Store

IMPACT_TIMEOUT_S = 10.0
AUDIT_BEFORE_S = 6 * 3600  # writes this long before the start are part of the story (the changes window)
_KIND = re.compile(r"`([a-z0-9_]+)`")


class _Out(str):
    """A piece of outside text inside a line we write: each format quotes it (`Quote`)."""


class Quote(NamedTuple):
    """How one format writes outside text: as text inside a line, and as a code span."""

    text: Callable[[str], str]
    code: Callable[[str], str]


def _md_text(s: str) -> str:
    return inline(redact(s))  # redacted first: a marker's brackets are then escaped like any others


def _md_code(s: str) -> str:
    return code(redact(s))


PLAIN = Quote(text=one_line, code=plain_code)  # Slack (its renderer escapes) and the model's facts
MARKDOWN = Quote(text=_md_text, code=_md_code)  # the file


def _join(q: Quote, pieces: tuple[str, ...]) -> str:
    return "".join(q.text(p) if isinstance(p, _Out) else p for p in pieces)


class TimelineItem(BaseModel):
    at: datetime
    what: str  # plain, one line (Slack, the model)
    source: str  # alert | thread | audit | Cloud Run | incident
    md: str = ""  # the same in Markdown, its outside text escaped for a table cell

    @classmethod
    def of(cls, at: datetime, source: str, *pieces: str) -> TimelineItem:
        return cls(at=at, source=source, what=_join(PLAIN, pieces), md=_join(MARKDOWN, pieces))


class Finding(BaseModel):
    kind: str
    title: str
    consequence: bool = False


class Impact(BaseModel):
    lines: list[str] = Field(default_factory=list)
    unavailable: str = ""  # why impact could not be read


class Facts(BaseModel):
    incident: Incident
    now: datetime
    timeline: list[TimelineItem] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    changes: WhatChanged | None = None
    audit: list[AuditEntry] = Field(default_factory=list)
    impact: Impact = Field(default_factory=Impact)

    @property
    def ended(self) -> datetime | None:
        inc = self.incident
        if inc.ended_at is not None:
            return inc.ended_at
        return inc.life.resolved_at


def findings_of(replies: list[str]) -> list[Finding]:
    """The findings the thread showed, from the stored investigation replies (their headings name the kind)."""
    out: list[Finding] = []
    for raw in replies:
        try:
            reply = json.loads(raw)
        except ValueError:
            continue
        for section in reply.get("sections") or []:
            heading = str(section.get("heading") or "")
            kinds = [k for k in _KIND.findall(heading) if k in KINDS]
            if kinds and not heading.startswith(":white_circle: past"):
                title = re.sub(r"^\s*:[a-z_]+:\s*", "", _KIND.sub("", heading)).strip(" ●")
                out.append(Finding(kind=kinds[-1], title=title, consequence="(because of" in title))
    return out


def _timeline(inc: Incident, audit: list[AuditEntry], changes: WhatChanged | None) -> list[TimelineItem]:
    item = TimelineItem.of
    items: list[TimelineItem] = []
    for m in inc.members.values():
        if m.started_at:
            items.append(item(m.started_at, "alert", "alert fired: ", _Out(m.name), f" ({m.severity})"))
        if m.ended_at:
            items.append(item(m.ended_at, "alert", "alert resolved: ", _Out(m.name)))
    items.append(item(inc.opened_at, "incident", "incident opened (thread posted)"))
    for rec in inc.life.log:
        who = _Out(rec.by) if rec.by else "the bot"
        note = _Out(rec.note)
        pieces: tuple[str, ...] = {
            "ack": ("acknowledged by ", who),
            "own": (who, " took ownership", *((", taken over from ", _Out(rec.took_from)) if rec.took_from else ())),
            "snooze": ("snoozed by ", who, " (", _Out(rec.snooze), ")"),
            "woke": ("snooze ended: ", note),
            "reopened": ("manual resolve withdrawn: the condition fired again",),
            "resolve": ("resolved by ", who, ": ", note, " (the alert still fired)" if rec.firing else ""),
        }[rec.action]
        items.append(item(rec.at, "thread", *pieces))
    fix = inc.fix
    late = " (after the alert closed)" if fix is not None and inc.state == "resolved" and inc.fixed_by() is None else ""
    audited = False  # the fix's write has its audit record: one row for one write
    for e in audit:
        at = datetime.fromtimestamp(e.at, inc.opened_at.tzinfo)
        if e.result == "pending":
            items.append(item(at, "audit", f"{e.action} confirmed by ", _Out(e.user_id)))
            continue
        made = (", revision ", _Out(e.revision)) if e.revision else ()
        detail = (": ", _Out(e.detail[:200])) if e.detail else ()
        mine = _is_the_fix(e, fix)
        audited = audited or mine
        ours = (f"; the incident's fix{late}",) if mine else ()
        items.append(item(at, "audit", f"{e.action} {e.result} (", _Out(e.user_id), *made, ")", *detail, *ours))
    written = {e.revision for e in audit if e.revision and e.result != "pending"}
    if changes is not None:
        for c in changes.changes:
            # A revision a write of the bot made has that write's audit row: one row for one write
            if c.created_at is not None and c.revision not in written:
                who_made = ("outside the bot",) if c.outside_bot else (f"{c.action} by ", _Out(c.by))
                items.append(
                    item(c.created_at, "Cloud Run", "revision ", _Out(c.revision), " created (", *who_made, ")")
                )
    if fix is not None and not audited:
        serves = (
            (": revision ", _Out(fix.revision), f" serving {fix.serving}% of traffic" if fix.serving else " ready")
            if fix.revision
            else ()
        )
        items.append(item(fix.at, "incident", f"fix landed: {fix.action}", *serves, late))
    return sorted(items, key=lambda i: i.at)


IMPACT_METRICS = ("request_count", "request_latencies")


async def impact_of(metrics: Metrics | None, inc: Incident, start: datetime, end: datetime, now: datetime) -> Impact:
    """Requests (by response class) and p95 latency during the incident: the figures `/gemma status` shows, read by
    the same function (skills/observe/service_metrics.py `read_figure`) over the incident's window."""
    if metrics is None:
        return Impact(unavailable="no Cloud Monitoring source is wired")
    minutes = max(5, min(7 * 24 * 60, int((now - start).total_seconds() // 60) + 10))
    figures = await asyncio.gather(
        *(read_figure(metrics, inc.service, m, minutes, IMPACT_TIMEOUT_S, start, end) for m in IMPACT_METRICS)
    )
    latest = "now" if inc.state == "firing" and not inc.life.resolved_by else "at its end"
    lines = [f"{f.label}: {f.text(latest)} during the incident" for f in figures if f.latest is not None]
    if lines:
        return Impact(lines=lines)
    errors = [f"{f.label}: {f.error}" for f in figures if f.error]
    if errors:
        return Impact(unavailable="; ".join(errors))
    return Impact(unavailable="Cloud Monitoring has no request data points for the incident's window")


async def gather(
    inc: Incident,
    replies: list[str],
    store: Store,
    audit_key: str,
    *,
    changes: WhatChanged | None,
    metrics: Metrics | None,
    now: datetime,
) -> Facts:
    start = inc.started_at
    end = inc.ended_at or inc.life.resolved_at or now
    entries = await audit_since(store, audit_key, (start - timedelta(seconds=AUDIT_BEFORE_S)).timestamp())
    audit = [e for e in entries if e.service == inc.service and e.at <= end.timestamp() + 3600]
    facts = Facts(
        incident=inc,
        now=now,
        findings=findings_of(replies),
        changes=changes,
        audit=audit,
        impact=await impact_of(metrics, inc, start, end, now),
    )
    facts.timeline = _timeline(inc, audit, changes)
    return facts


def _t(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S UTC")


def cause_lines(f: Facts, q: Quote = PLAIN) -> list[str]:
    """The cause, one line each, outside text quoted by `q` (PLAIN for Slack and the model, MARKDOWN for the file)."""
    roots = [x for x in f.findings if not x.consequence]
    out = [f"Finding `{x.kind}`: {q.text(x.title)}" for x in roots]  # the kind is one of KINDS: ours
    out += [f"Consequence `{x.kind}`: {q.text(x.title)}" for x in f.findings if x.consequence]
    if f.changes is not None and f.changes.likely_cause:
        c = next((c for c in f.changes.changes if c.revision == f.changes.likely_cause), None)
        who = "made outside the bot" if c is not None and c.outside_bot else f"made by {q.text(c.by) if c else '?'}"
        out.append(f"Likely triggering change: revision {q.code(f.changes.likely_cause)} ({who})")
    return out or ["No finding was recorded for this incident."]


def _serves(fix: Fix, q: Quote) -> str:
    if not fix.revision:
        return "no revision"
    rev = f"revision {q.code(fix.revision)}"
    if fix.serving is None:
        return f"{rev} ready (its share of traffic could not be read)"
    return f"{rev} serving {fix.serving}% of traffic" if fix.serving else f"{rev} ready but serving no traffic"


def _is_the_fix(e: AuditEntry, fix: Fix | None) -> bool:
    """The audit record of the write the incident recorded as its fix (the same write: listed once)."""
    if fix is None or e.result != "ok":
        return False
    if fix.revision:
        return e.revision == fix.revision
    return fix.action.split(" ", 1)[0] == e.action and abs(e.at - fix.at.timestamp()) < 120


def fix_lines(f: Facts, q: Quote = PLAIN) -> list[str]:
    """What fixed it, one line each, outside text quoted by `q`: the fix confirmed from the thread (credited only
    when its revision served before the alert closed: skills/incidents/model.py `Incident.fixed_by`), the other
    writes through the bot during the incident, each once, and how it resolved otherwise (the close, a Resolve)."""
    inc = f.incident
    out = []
    fix, fixed = inc.fix, inc.fixed_by()
    closed = inc.ended_at if inc.state == "resolved" else None
    if fix is not None:
        line = f"{fix.action} at {_t(fix.at)} by {q.text(fix.by) if fix.by else '?'}: {_serves(fix, q)}"
        if fixed is not None and closed is not None:
            line += f"; then the alert closed at {_t(closed)}: condition cleared"
        elif closed is not None:
            line += f", after the alert closed at {_t(closed)}: the close was not this fix's doing"
        else:
            line += "; the alert still fires"
        out.append(line)
    # Writes after the close fixed nothing of this incident (whole seconds: the close's own second counts).
    until = closed.timestamp() + 1 if closed is not None else float("inf")
    for e in f.audit:
        if e.result == "ok" and inc.started_at.timestamp() <= e.at < until and not _is_the_fix(e, fix):
            made = f", revision {q.code(e.revision)}" if e.revision else ""
            out.append(
                f"{e.action} by {q.text(e.user_id)} at "
                f"{datetime.fromtimestamp(e.at, inc.opened_at.tzinfo):%H:%M:%S} UTC: ok{made}"
            )
    if inc.life.resolved_by:
        out.append(f"Resolved by hand by {q.text(inc.life.resolved_by)}: {q.text(inc.life.note)}")
    if closed is not None and fixed is None:
        wrote = "" if out else " (no write recorded from the bot)"
        out.append(f"The incident resolved when its alert closed at {_t(closed)}{wrote}")
    return out or ["Not fixed yet: the alert still fires."]


def follow_ups(f: Facts) -> list[str]:
    out = [f"Review `{runbook_ref(x.kind)}` with what this incident taught" for x in f.findings if not x.consequence]
    if f.changes is not None and any(c.outside_bot for c in f.changes.changes if c.revision == f.changes.likely_cause):
        out.append(
            "The triggering change was made outside the bot: deploy through `/gemma deploy` (plan, preflight, audit)"
        )
    inc = f.incident
    if inc.life.resolved_by and inc.state == "firing":
        out.append("The incident was resolved by hand while the alert still fired: confirm the condition cleared")
    if not inc.life.owner:
        out.append("Nobody took ownership in the thread: agree who owns the next one")
    return out


def render_markdown(f: Facts, prose: str = "") -> str:
    """The draft: the model's prose (when given) in front of the facts; every fact from the records."""
    inc = f.incident
    end = f.ended
    dur = format_duration((end - inc.started_at).total_seconds()) if end else "ongoing"
    lead = inc.lead
    md = [
        f"# Postmortem: {_md_text(lead.name)} on {_md_text(inc.service)}",
        "",
        f"Incident `{inc.id}` · severity {inc.severity} · started {_t(inc.started_at)} · "
        + (f"ended {_t(end)} · duration {dur}" if end else "still open"),
        "",
    ]
    if prose:
        md += ["## Summary", "", block(redact(prose)), "", "_Summary drafted by the model from the facts below._", ""]
    md += ["## Impact", ""]
    md += [f"- {_md_text(line)}" for line in f.impact.lines] or [f"- Not measured: {_md_text(f.impact.unavailable)}"]
    md += ["", "## Timeline (UTC)", "", "| time | what | source |", "|---|---|---|"]
    md += [f"| {i.at:%H:%M:%S} | {i.md or _md_text(i.what)} | {i.source} |" for i in f.timeline]
    md += ["", "## Cause", ""] + [f"- {line}" for line in cause_lines(f, MARKDOWN)]
    md += ["", "## What fixed it", ""] + [f"- {line}" for line in fix_lines(f, MARKDOWN)]
    md += ["", "## Follow-ups", ""] + ([f"- [ ] {line}" for line in follow_ups(f)] or ["- none recorded"])
    md += [
        "",
        "---",
        f"Drafted by gemma-sre at {_t(f.now)} from the incident record, its thread's findings, the audit of writes, "
        "the service's revisions and Cloud Monitoring.",
    ]
    return redact("\n".join(md))


def facts_for_model(f: Facts) -> str:
    """The facts as compact JSON for the model's prose (redacted)."""
    view = {
        "incident": {"id": f.incident.id, "service": f.incident.service, "alert": f.incident.lead.name,
                     "severity": f.incident.severity, "started": _t(f.incident.started_at),
                     "ended": _t(f.ended) if f.ended else None},
        "impact": f.impact.lines or [f.impact.unavailable],
        "timeline": [f"{i.at:%H:%M:%S} {i.what} ({i.source})" for i in f.timeline],
        "cause": cause_lines(f),
        "fix": fix_lines(f),
    }  # fmt: skip
    return redact(json.dumps(view, ensure_ascii=False))

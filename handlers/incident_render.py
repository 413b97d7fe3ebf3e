"""How an incident reads in Slack: its header, its coalesced thread lines, and the storm summary.

Everything here is a pure function of recorded state (skills/incidents/model.py), so a retried or re-run effect
renders the same message. Untrusted alert text is redacted and clipped; the storm summary stays within Block
Kit's limits (at most 50 blocks, 3,000 characters per section text:
https://api.slack.com/reference/block-kit/blocks#section).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from handlers.incident_lifecycle_render import add_lifecycle, life_line
from handlers.render_slack import inert, inert_bold
from handlers.reply import Reply
from skills.durations import format_duration
from skills.incidents.model import SEVERITIES, Event, Fix, Incident
from skills.logs.redact import redact
from skills.markdown import plain_code
from skills.text import shorten

_ICON = {"firing": ":rotating_light:", "resolved": ":white_check_mark:"}
SEV_ICON = {"critical": ":red_circle:", "error": ":large_orange_circle:", "warning": ":large_yellow_circle:"}
SUMMARY_TEXT_MAX = 2900  # under the 3,000-character section limit
SUMMARY_MAX_SECTIONS = 45  # under the 50-block limit, leaving room for the title, counts and footer


def _when(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC") if t else "unknown"


def _hm(t: datetime) -> str:
    return t.strftime("%H:%M")


def _link(r: Reply, url: str, source: str) -> str:
    """The alert's console link (its URL comes from the alert: Reply.link refuses one that is not plain http)."""
    if not url:
        return "—"
    label = {"gcp": "Cloud Monitoring incident", "azure": "Azure Monitor alert"}.get(source, "Alertmanager")
    return r.link(url, label)


def header_reply(inc: Incident, known_service_name: str) -> Reply:
    """The header: what, where, how bad, since when; resolved turns it green and adds the duration."""
    lead = inc.lead
    state = inc.state
    prefix = "[TEST] " if inc.test else ""
    # Outside text (the alert's name, its service) on one line and inert: it cannot add a row or emphasis.
    what = f"{inert(lead.name, 150)} on {inert(inc.service, 80)}"
    title = f"{_ICON[state]} {prefix}{state.upper()}: {what}"
    if inc.life.resolved_by and state == "firing":  # resolved by hand: the header says the alert still fires
        title = f"{_ICON['resolved']} {prefix}RESOLVED (alert still firing): {what}"
    r = Reply(title=title)
    fields = [
        ("Service", plain_code(shorten(inc.service, 120))),
        ("Alert", inert(lead.name, 300)),
        ("Severity", f"{SEV_ICON.get(inc.severity, ':white_circle:')} {inc.severity}"),
        ("State", state),
        ("Started", _when(inc.started_at)),
        ("Link", _link(r, lead.url, lead.source)),
    ]
    if state == "resolved" and inc.duration is not None:
        fields.append(("Resolved", _when(inc.ended_at)))
        fields.append(("Duration", format_duration(inc.duration)))
    if len(inc.members) > 1:
        firing = sum(1 for m in inc.members.values() if m.state == "firing")
        fields.append(("Alerts", f"{len(inc.members)} grouped ({firing} firing)"))
    if inc.fix is not None:
        # Fixed only when its revision served before the condition cleared (Incident.fixed_by); else it says which.
        if not inc.fix.serving:
            note = " (its revision serves no traffic)" if inc.fix.serving == 0 else ""
        else:
            note = " (after the alert closed)" if state == "resolved" and inc.fixed_by() is None else ""
        fields.append(("Fix", f"{inc.fix.action} at {_when(inc.fix.at)}{note}"))
    r.add(fields=fields)
    add_lifecycle(r, inc)
    if lead.summary:  # the sender's text, lines and all: in a code block, where Slack formats nothing
        r.add(code=redact(lead.summary)[:600])
    if len(inc.members) > 1:
        names = [
            f"{SEV_ICON.get(m.severity, ':white_circle:')} {inert(redact(m.name), 120)} ({m.state})"
            for m in inc.members.values()
        ]
        more = f"\n… and {len(names) - 10} more" if len(names) > 10 else ""
        r.add(text="*Grouped alerts*\n" + "\n".join(names[:10]) + more)
    if inc.truncated_alerts:
        r.add(text=_truncated(inc.truncated_alerts))
    if inc.test:
        r.add(text=":information_source: This is Cloud Monitoring's test notification: the webhook works.")
    elif not inc.known_service:
        r.add(
            text=(
                f":information_source: `{inc.service}` is not a service this bot manages "
                f"(it manages `{known_service_name}`), so it is posted here without diagnosis."
            )
        )
    r.context = f"incident {inc.id} · updates in this thread"
    return r


def _truncated(n: int) -> str:
    return (
        f":warning: Alertmanager left {n} alert(s) of this group out of its notification (`truncatedAlerts`, "
        "the receiver's `max_alerts`): this thread shows only the alerts it sent."
    )


def _serves(fix: Fix) -> str:
    """What the service showed of the fix's revision when it landed (skills/incidents/model.py `Fix`)."""
    if not fix.revision:
        return "no revision"
    rev = f"revision {plain_code(shorten(redact(fix.revision), 80))}"
    if fix.serving is None:
        return f"{rev} ready (its share of traffic could not be read)"
    if not fix.serving:
        return f"{rev} is ready but serves no traffic"
    return f"{rev} serving {fix.serving}% of traffic"


def _fix_line(ev: Event) -> str:
    fix = ev.fix
    if fix is None:
        return ""
    if ev.kind == "fixed":
        closed = f" (alert closed at {_when(ev.closed_at)})" if ev.closed_at else ""
        return f":white_check_mark: fixed by {fix.action} at {_when(fix.at)}: {_serves(fix)}, condition cleared{closed}"
    if ev.kind == "fix_landed":
        landed = f":information_source: {fix.action} landed at {_when(fix.at)}: {_serves(fix)}"
        if ev.closed_at is not None:  # the close came first: the incident resolved then, not by this fix
            return f"{landed}, after the incident resolved: its alert closed at {_when(ev.closed_at)}, before it served"
        return f"{landed}: it fixes nothing yet; the incident stays open until its alert closes or someone resolves it"
    minutes = max(1, round((ev.waited_s or 0.0) / 60))
    return (
        f":hourglass: fix applied ({fix.action} at {_when(fix.at)}); condition still firing after {minutes} min: "
        "the cause may be elsewhere, see the findings above"
    )


def event_line(ev: Event, service: str) -> str:
    name = inert_bold(redact(ev.name), 200)
    if ev.kind in ("fixed", "fix_pending", "fix_landed"):
        return _fix_line(ev)
    if ev.kind == "life" and ev.life is not None:
        return life_line(ev.life)
    if ev.kind == "joined":
        if ev.count > 1:  # more alerts of one condition (other instances): one line
            return (
                f":heavy_plus_sign: {ev.count} more alerts of {name} on `{service}` since {_hm(ev.first_at)}, "
                f"last at {_hm(ev.last_at)} UTC"
            )
        text = f":heavy_plus_sign: Another alert of {name} on `{service}` ({ev.severity})"
        return text + (f" — {inert(redact(ev.summary), 300)}" if ev.summary else "")
    if ev.kind == "repeated":
        if ev.count == 1:
            return f":repeat: Still firing: {name} (repeat notification #{ev.repeat_no})"
        return f":repeat: +{ev.count} firings of {name} since {_hm(ev.first_at)}, last at {_hm(ev.last_at)} UTC"
    if ev.kind == "refired":
        return f":rotating_light: Fired again: {name} at {_when(ev.started_at)}"
    if ev.kind == "resolved":
        took = f" after {format_duration(ev.took_s)}" if ev.took_s is not None else ""
        text = f":white_check_mark: Resolved: {name}{took}"
        if ev.incident_duration_s is not None:
            text += f". Incident resolved; duration {format_duration(ev.incident_duration_s)}."
        return text
    return _truncated(ev.count)


def lines_reply(events: Sequence[Event], service: str) -> Reply:
    """One thread message for everything that happened since the last one (repeats already coalesced)."""
    lines = [event_line(e, service) for e in events]
    r = Reply(title=lines[0])
    for e in events:  # lifecycle lines name who acted (and whose ownership was taken over): those ids stay mentions
        for who in (e.life.by, e.life.took_from) if e.life is not None else ():
            if who:
                r.mention(who)
    rest, size, cut = [], 0, 0
    for line in lines[1:]:
        if size + len(line) + 1 > SUMMARY_TEXT_MAX - 40:
            cut += 1
            continue
        rest.append(line)
        size += len(line) + 1
    if cut:
        rest.append(f"… and {cut} more")
    if rest:
        r.add(text="\n".join(rest))
    return r


def storm_reply(incs: Sequence[Incident], threads: set[str], channel: str, since: datetime) -> Reply:
    """The storm summary: every incident of the storm by severity, most severe first, with whether its own
    thread is open yet. Rows that would break Block Kit's limits are counted, not dropped silently."""
    by_sev: dict[str, list[Incident]] = {}
    for inc in incs:
        sev = inc.severity if inc.severity in SEVERITIES else "unknown"
        by_sev.setdefault(sev, []).append(inc)
    order = [*SEVERITIES, "unknown"]
    counts = ", ".join(f"{len(by_sev[s])} {s}" for s in order if s in by_sev)
    firing = sum(1 for i in incs if i.state == "firing")
    r = Reply(title=f":cyclone: Alert storm in {channel}: {len(incs)} incidents since {_hm(since)} UTC ({counts})")
    sections = 0
    left = 0
    for sev in order:
        rows = sorted(by_sev.get(sev, []), key=lambda i: i.opened_at)
        if not rows:
            continue
        chunk: list[str] = []
        size = 0
        header = f"*{SEV_ICON.get(sev, ':white_circle:')} {sev} ({len(rows)})*"
        for inc in rows:
            mark = "thread open" if inc.id in threads else "thread opening…"
            state = ":white_check_mark: resolved" if inc.state == "resolved" else "firing"
            service = plain_code(shorten(redact(inc.service), 60))
            line = f"• {service} — {inert(redact(inc.lead.name), 80)} · {state} · {mark}"
            if sections >= SUMMARY_MAX_SECTIONS:
                left += 1
                continue
            if size + len(line) + len(header) + 2 > SUMMARY_TEXT_MAX:
                r.add(text="\n".join([header, *chunk]))
                sections += 1
                chunk, size = [], 0
                if sections >= SUMMARY_MAX_SECTIONS:
                    left += 1
                    continue
            chunk.append(line)
            size += len(line) + 1
        if chunk and sections < SUMMARY_MAX_SECTIONS:
            r.add(text="\n".join([header, *chunk]))
            sections += 1
    if left:
        r.add(text=f"… and {left} more incidents (not listed: Slack's block limit)")
    r.context = (
        f"{firing} firing · threads open one by one, most severe first, as Slack's posting rate allows "
        "(about one message a second per channel) · this summary is edited in place"
    )
    return r

""" "What changed" in an incident thread: skills/incidents/changes.py's answer (read for the incident by
skills/incidents/investigation.py) rendered with the existing rollback plan button when a change is the likely
cause."""

from __future__ import annotations

from handlers.reply import Reply, plan_button
from skills.incidents.changes import WhatChanged


def render_changes(wc: WhatChanged, r: Reply | None = None) -> Reply:
    r = r or Reply(title=f":mag: What changed on `{wc.service}` before this incident")
    if wc.healthy:
        proven = (
            f"served {wc.healthy_s // 60} min with no incident open"
            if wc.healthy_proven
            else f"served just before; no revision has served {wc.healthy_s // 60} min without an incident yet"
        )
        maker = f"; {wc.healthy_action} by {r.mention(wc.healthy_by)} through the bot" if wc.healthy_by else ""
        r.add(text=f"Last healthy revision: `{wc.healthy}` ({proven}{maker})")
    elif wc.note:
        r.add(text=wc.note)
    if not wc.changes:
        r.add(text=f"No revision was created in the {wc.window_s // 3600} h before the incident.")
    for i, c in enumerate(wc.changes[:8], 1):
        when = _rel(c.before_start_s)
        state = {True: "ready", False: ":red_circle: failed", None: "pending"}[c.ready]
        who = (
            "*outside the bot* (no audit record produced it: a hand deploy, gcloud or the console)"
            if c.outside_bot
            else f"{c.action} by {r.mention(c.by)} through the bot"
        )
        mark = " :point_left: *likely cause*" if c.revision == wc.likely_cause else ""
        head = f"{i}. `{c.revision}` ({state}), created {when}, {who}{mark}"
        diff = "\n".join(d.line() for d in c.diff[:15]) or "(no configuration difference from the healthy one)"
        more = f"\n… and {len(c.diff) - 15} more" if len(c.diff) > 15 else ""
        r.add(text=head, code=diff + more)
    if len(wc.changes) > 8:
        r.add(text=f"… and {len(wc.changes) - 8} older changes")
    if wc.rollback:
        r.add(
            text=f"Rollback plan: route 100% of traffic back to `{wc.healthy}` (plan, then Confirm: `/gemma rollback`)."
        )
        r.buttons.append(plan_button("rollback", wc.rollback, label=f"Plan rollback to {wc.healthy}"))
    r.context = (
        f"revisions created in the {wc.window_s // 3600} h before {wc.started_at:%H:%M} UTC, closest first, diffed "
        "against the last healthy revision; who made each from the audit"
    )
    return r


def _rel(s: float) -> str:
    if abs(s) < 1:
        return "as it started"
    m = abs(s) / 60
    amount = f"{m:.0f} min" if m >= 1 else f"{abs(s):.0f} s"
    return f"{amount} before it started" if s >= 0 else f"{amount} after it started"

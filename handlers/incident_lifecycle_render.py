"""How an incident's lifecycle reads in Slack: the header's who/when fields and buttons, and its thread lines.
Pure functions of recorded state (skills/incidents/lifecycle.py), like the rest of handlers/incident_render.py."""

from __future__ import annotations

import json
from datetime import datetime

from handlers.render_slack import inert
from handlers.reply import Button, Reply
from skills.incidents.lifecycle import LifeRecord
from skills.incidents.model import Incident
from skills.logs.redact import redact

ACK_ACTION = "gemma_inc_ack"
OWN_ACTION = "gemma_inc_own"
SNOOZE_ACTION = "gemma_inc_snooze_"  # + a key of SNOOZES
RESOLVE_ACTION = "gemma_inc_resolve"
RESOLVE_SUBMIT = "gemma_inc_resolve_submit"
NOTE_BLOCK = "note"
_SNOOZE_LABELS = {"15m": "Snooze 15 min", "1h": "Snooze 1 h", "resolved": "Snooze until resolved"}


def _at(t: datetime | None) -> str:
    return t.strftime("%H:%M UTC") if t else "?"


def lifecycle_fields(r: Reply, inc: Incident) -> list[tuple[str, str]]:
    life = inc.life
    fields: list[tuple[str, str]] = []
    if life.acked_by:
        fields.append(("Acknowledged", f"{r.mention(life.acked_by)} at {_at(life.acked_at)}"))
    if life.owner:
        took = f" (taken over from {r.mention(life.took_from)})" if life.took_from else ""
        fields.append(("Owner", f"{r.mention(life.owner)} since {_at(life.owned_at)}{took}"))
    if life.snooze:
        until = "until resolved" if life.snooze_until is None else f"until {_at(life.snooze_until)}"
        fields.append(("Snoozed", f"{until} by {r.mention(life.snoozed_by)}"))
    if life.resolved_by:
        still = " (the alert still fires)" if inc.state == "firing" else ""
        fields.append(("Resolved by", f"{r.mention(life.resolved_by)} at {_at(life.resolved_at)}{still}"))
    return fields


def lifecycle_buttons(inc: Incident) -> list[Button]:
    """Acknowledge, Take ownership, Snooze ×3, Resolve…: while the incident is open (not on a test notification)."""
    if inc.test or inc.life.resolved_by or inc.state == "resolved":
        return []
    out = []
    if not inc.life.acked_by:
        out.append(Button(label="Acknowledge", action_id=ACK_ACTION, value=inc.id))
    out.append(Button(label="Take ownership", action_id=OWN_ACTION, value=inc.id))
    for key, label in _SNOOZE_LABELS.items():
        if inc.life.snooze != key:
            out.append(Button(label=label, action_id=SNOOZE_ACTION + key, value=inc.id))
    out.append(Button(label="Resolve…", action_id=RESOLVE_ACTION, value=inc.id, style="primary"))
    return out


def add_lifecycle(r: Reply, inc: Incident) -> None:
    """The header's lifecycle part: a line of who/when and the buttons."""
    fields = lifecycle_fields(r, inc)
    if fields:
        r.add(fields=fields)
    if inc.life.resolved_by and inc.life.note:
        r.add(text="*Resolve note:* " + inert(redact(inc.life.note), 600))  # one line, no forged emphasis
    r.buttons += lifecycle_buttons(inc)


def life_line(rec: LifeRecord) -> str:
    who = f"<@{rec.by}>" if rec.by else "the bot"
    if rec.action == "ack":
        return f":eyes: Acknowledged by {who} at {_at(rec.at)}"
    if rec.action == "own":
        took = f", taken over from <@{rec.took_from}>" if rec.took_from else ""
        return f":bust_in_silhouette: {who} took ownership at {_at(rec.at)}{took}"
    if rec.action == "snooze":
        until = "until the incident resolves" if rec.until is None else f"until {_at(rec.until)}"
        return (
            f":zzz: Snoozed by {who} {until}: repeats are held here and coalesced; it wakes at the end, "
            "on higher severity or when the condition fires again"
        )
    if rec.action == "woke":
        return f":alarm_clock: Awake again: {inert(redact(rec.note), 200)}"
    if rec.action == "reopened":
        return ":rotating_light: The manual resolve no longer stands: the condition fired again"
    still = (
        " The alert is *still firing*: the thread stays quiet about its repeats; it reopens if the condition "
        "fires again after it closes."
        if rec.firing
        else ""
    )
    return f":white_check_mark: Resolved by {who} at {_at(rec.at)}: {inert(redact(rec.note), 500)}.{still}"


def resolve_modal(inc: Incident, channel_id: str, thread_ts: str) -> dict[str, object]:
    meta = {"incident": inc.id, "channel_id": channel_id, "thread_ts": thread_ts}
    return {
        "type": "modal",
        "callback_id": RESOLVE_SUBMIT,
        "private_metadata": json.dumps(meta),
        "title": {"type": "plain_text", "text": "Resolve incident"},
        "submit": {"type": "plain_text", "text": "Resolve"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "input",
                "block_id": NOTE_BLOCK,
                "label": {"type": "plain_text", "text": "Note (what fixed it, or why it is closed)"},
                "element": {"type": "plain_text_input", "action_id": "value", "multiline": True, "max_length": 1000},
            }
        ],
    }

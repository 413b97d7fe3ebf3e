"""/gemma incidents, and the lifecycle buttons of an incident's header (acknowledge, own, snooze, resolve…)."""

from __future__ import annotations

import json

from handlers.args import CommandParser, count
from handlers.context import ActionContext, CommandContext
from handlers.incident_lifecycle_render import (
    ACK_ACTION,
    NOTE_BLOCK,
    OWN_ACTION,
    RESOLVE_ACTION,
    RESOLVE_SUBMIT,
    SNOOZE_ACTION,
    resolve_modal,
)
from handlers.incident_lists import PAGE_ROWS, Audience, add_rows, pages
from handlers.registry import action, command, view_check
from handlers.render_slack import inert_bold
from handlers.reply import FileOut, Reply, error_reply
from skills.durations import format_duration
from skills.errors import InvalidInput
from skills.incidents.lifecycle import NOTE_MAX, SNOOZES
from skills.incidents.lifecycle_store import ActionRefused, IncidentLifecycle, Listed
from skills.incidents.model import Incident, utcnow
from skills.incidents.runbooks import read_runbook
from skills.incidents.store import IncidentStore
from skills.logs.redact import redact
from skills.markdown import plain_code
from skills.ports import Store
from skills.text import shorten

STATUSES = ("open", "acknowledged", "snoozed", "resolved")
_ICON = {"open": ":rotating_light:", "acknowledged": ":eyes:", "snoozed": ":zzz:", "resolved": ":white_check_mark:"}


PUBLIC = Audience(public=True)


def lifecycle(redis: Store, prefix: str) -> IncidentLifecycle:
    return IncidentLifecycle(IncidentStore(redis, prefix))


async def audience(ctx: CommandContext) -> Audience:
    """Public only when a Slack command was asked in the alerts channel: the setting names it by id, or by
    '#name' (the command carries the channel's name, and the id Slack gave it when a header was posted there)."""
    if not ctx.in_slack:
        return Audience(public=True)
    alerts = ctx.deps.settings.slack_alerts_channel
    if ctx.channel_id == alerts or (ctx.channel_name and f"#{ctx.channel_name}" == alerts):
        return Audience(public=True)
    posted = await IncidentStore(ctx.deps.redis, ctx.deps.settings.key_prefix).posted_channel(alerts)
    return Audience(public=bool(ctx.channel_id) and ctx.channel_id == posted)


def _incidents_args(p: CommandParser) -> None:
    p.add_argument("status", metavar="STATUS", nargs="?", choices=STATUSES, help="only this status")
    p.add_argument("--page", metavar="N", type=count(1), default=1, help=f"page N ({PAGE_ROWS} incidents a page)")


def incident_row(r: Reply, item: Listed, who: Audience = PUBLIC, finding: str = "") -> str:
    """One line per incident: its outside text (alert name, service, revision) cannot add a line or markup. What
    tells incidents of one alert apart follows the severity: the revision it is about, its leading finding
    (`finding`, a kind of ours) and when it started."""
    inc, life = item.incident, item.incident.life
    age = format_duration(max((utcnow() - inc.started_at).total_seconds(), 0.0))
    name = inert_bold(redact(inc.lead.name), 80)
    row = f"{_ICON[item.status]} `{inc.id}` {name} on {plain_code(shorten(redact(inc.service), 60))}"
    row += f" · {inc.severity}"
    if inc.revision:
        row += f" · revision {plain_code(shorten(redact(inc.revision), 80))}"
    if finding:
        row += f" · `{finding}`"
    started = f"{inc.started_at:%H:%M:%S} UTC" if age_s(inc) < 86400 else f"{inc.started_at:%Y-%m-%d %H:%M} UTC"
    row += f" · started {started} ({age} ago)"
    if life.owner:
        row += f" · owner {who.name(r, life.owner)}"
    elif life.acked_by:
        row += f" · ack {who.name(r, life.acked_by)}"
    if life.snooze:
        row += " · snoozed " + (
            "until resolved" if life.snooze_until is None else f"until {life.snooze_until:%H:%M} UTC"
        )
    if life.resolved_by:
        row += f" · resolved by {who.name(r, life.resolved_by)}" + (
            " (alert still firing)" if inc.state == "firing" else ""
        )
    return row


@command("incidents", "Incidents by status: open, acknowledged, snoozed, resolved", _incidents_args, ack="Listing…")
async def incidents(ctx: CommandContext) -> Reply:
    who = await audience(ctx)
    items = [i for i in await lifecycle(ctx.deps.redis, ctx.deps.settings.key_prefix).listed() if not i.incident.test]
    want, page = ctx.opts.status, ctx.opts.page
    counts = {s: sum(1 for i in items if i.status == s) for s in STATUSES}
    chosen = [i for s in STATUSES if want in (None, s) for i in items if i.status == s]  # status order, newest first
    cmd = "/gemma incidents" + (f" {want}" if want else "")
    last = pages(len(chosen))
    if page > last:
        raise InvalidInput(f"There is no page {page}: {len(chosen)} incident(s) fill {last}.", f"`{cmd} --page {last}`")
    shown = chosen[(page - 1) * PAGE_ROWS : page * PAGE_ROWS]
    r = Reply(title=":rotating_light: Incidents" + (f" ({want})" if want else ""))
    findings = await lifecycle(ctx.deps.redis, ctx.deps.settings.key_prefix).lead_findings(
        [i.incident.id for i in shown]
    )
    for status in STATUSES:
        rows = [incident_row(r, i, who, findings.get(i.incident.id, "")) for i in shown if i.status == status]
        if (rows or page == 1) and want in (None, status):
            add_rows(r, f"{status.capitalize()} ({counts[status]})", rows)
    r.context = _page_note(cmd, page, last, len(shown), len(chosen)) + (
        "buttons in each incident's thread acknowledge, own, snooze or resolve it; `/gemma postmortem INCIDENT`"
    )
    return who.address(r)


def age_s(inc: Incident) -> float:
    return max((utcnow() - inc.started_at).total_seconds(), 0.0)


def _page_note(cmd: str, page: int, last: int, shown: int, total: int) -> str:
    """What this page shows of how many, and the command for the next page (nothing when one page holds all)."""
    if last == 1:
        return ""
    first = (page - 1) * PAGE_ROWS + 1
    note = f"showing {first}-{first + shown - 1} of {total} incidents (page {page} of {last})"
    return note + (f"; `{cmd} --page {page + 1}` for more · " if page < last else " · ")


def _refusal(exc: ActionRefused) -> Reply:
    """To the presser alone (the response URL; chat.postEphemeral after a form): the header does not change."""
    return error_reply(str(exc), mentions=exc.mentions)


def _thread(ctx: ActionContext) -> tuple[str, str]:
    """The channel and thread of the message pressed: its incident is the only one its buttons act on."""
    return ctx.channel_id, ctx.thread_ts or ctx.message_ts


async def _act(
    ctx: ActionContext, what: str, thread: tuple[str, str], snooze: str = "", note: str = ""
) -> Reply | None:
    try:
        await lifecycle(ctx.deps.redis, ctx.deps.settings.key_prefix).act(
            ctx.value, what, ctx.user_id, utcnow(), snooze=snooze, note=note, thread=thread
        )
    except ActionRefused as exc:
        return _refusal(exc)
    return None  # the header and a thread line show it (the publisher edits and posts)


@action(ACK_ACTION)
async def on_ack(ctx: ActionContext) -> Reply | None:
    return await _act(ctx, "ack", _thread(ctx))


@action(OWN_ACTION)
async def on_own(ctx: ActionContext) -> Reply | None:
    return await _act(ctx, "own", _thread(ctx))


@action(SNOOZE_ACTION + "*")
async def on_snooze(ctx: ActionContext) -> Reply | None:
    choice = ctx.action_id.removeprefix(SNOOZE_ACTION)
    if choice not in SNOOZES:
        return Reply(title=f":warning: Unknown snooze {choice!r}.", ephemeral=True)
    return await _act(ctx, "snooze", _thread(ctx), snooze=choice)


@action(RESOLVE_ACTION)
async def on_resolve_open(ctx: ActionContext) -> Reply | None:
    """The Resolve… form, unless the resolve would be refused (then the refusal, before anyone types a note)."""
    thread = _thread(ctx)
    try:
        inc = await lifecycle(ctx.deps.redis, ctx.deps.settings.key_prefix).check(
            ctx.value, "resolve", ctx.user_id, thread
        )
    except ActionRefused as exc:
        return _refusal(exc)
    await ctx.responder.open_modal(resolve_modal(inc, *thread))
    return None


def _meta(value: str) -> dict[str, str]:
    """The Resolve… form's private_metadata: the incident, and the channel and thread its button was pressed in."""
    try:
        meta = json.loads(value)
    except ValueError:
        return {}
    if not isinstance(meta, dict):
        return {}
    return {k: str(meta.get(k) or "") for k in ("incident", "channel_id", "thread_ts")}


@view_check(RESOLVE_SUBMIT)
async def check_resolve(ctx: ActionContext) -> dict[str, str]:
    note = ctx.form.get(NOTE_BLOCK, "").strip()
    if not note:
        return {NOTE_BLOCK: "Say what fixed it, or why it is closed."}
    if len(note) > NOTE_MAX:
        return {NOTE_BLOCK: f"At most {NOTE_MAX} characters."}
    return {}


@action(RESOLVE_SUBMIT)
async def on_resolve_submit(ctx: ActionContext) -> Reply | None:
    meta = _meta(ctx.value)
    if not meta.get("incident"):
        raise InvalidInput("This form names no incident.", "Press Resolve… in the incident's thread again.")
    ctx.value = meta["incident"]
    # the form acts only on the incident of the message its Resolve… was pressed on
    return await _act(ctx, "resolve", (meta["channel_id"], meta["thread_ts"]), note=ctx.form.get(NOTE_BLOCK, ""))


def _runbook_args(p: CommandParser) -> None:
    p.add_argument("kind", metavar="KIND", help="a finding kind, e.g. kv_cache_insufficient")


@command("runbook", "The runbook of a finding kind (runbooks/KIND.md)", _runbook_args, ack="Reading…")
async def runbook(ctx: CommandContext) -> Reply:
    text = read_runbook(ctx.opts.kind, ctx.deps.settings.runbooks_dir)
    r = Reply(title=f":book: Runbook: `{ctx.opts.kind}`")
    r.add(text=text[:2900])
    if len(text) > 2900:
        r.files.append(FileOut(filename=f"{ctx.opts.kind}.md", title=f"Runbook {ctx.opts.kind}", content=text.encode()))
        r.context = "the whole runbook is attached"
    return r

"""/gemma postmortem [INCIDENT] and /gemma handoff [--since 12h]: write-ups from the records
(skills/incidents/postmortem.py).

The postmortem is posted in the incident's thread (or answers the command when the thread is elsewhere) and
attached as a Markdown file. With a model configured and reachable, the model writes a summary paragraph from
the redacted facts; without one the draft is the same facts with no prose."""

from __future__ import annotations

import logging

from handlers.args import CommandParser
from handlers.commands.incidents import STATUSES, audience, incident_row, lifecycle
from handlers.context import CommandContext
from handlers.deps import HandlerDeps
from handlers.incident_lists import PAGE_ROWS, add_rows
from handlers.registry import command
from handlers.render_slack import inert
from handlers.reply import FileOut, Reply
from prompts import load as load_prompt
from skills.audit import since as audit_since
from skills.durations import parse_duration
from skills.errors import InvalidInput, UserFacingError
from skills.incidents.investigation import changes_for, model_problem
from skills.incidents.model import Incident, utcnow
from skills.incidents.postmortem import (
    Facts,
    Quote,
    cause_lines,
    facts_for_model,
    fix_lines,
    follow_ups,
    gather,
    render_markdown,
)
from skills.incidents.store import IncidentStore
from skills.logs.redact import redact
from skills.markdown import one_line, plain_code
from skills.ports import ModelAPIError
from skills.text import shorten

log = logging.getLogger(__name__)

PROSE_MAX_TOKENS = 600
SECTION_MAX = 2900  # under Block Kit's 3,000-character section text


def _postmortem_args(p: CommandParser) -> None:
    p.add_argument("incident", metavar="INCIDENT", nargs="?", help="an incident id (default: the latest)")


async def _pick(deps: HandlerDeps, ref: str | None) -> tuple[Incident, int]:
    """The incident asked for, or the latest of every kept one (test notifications are not incidents), and how
    many there are to choose from (0 when one was named)."""
    life = lifecycle(deps.redis, deps.settings.key_prefix)
    if ref:
        inc = await life.find(ref)
        if inc is None:
            raise InvalidInput(f"No incident `{shorten(ref, 60)}` is recorded.", "`/gemma incidents` lists them.")
        return inc, 0
    listed = [i for i in await life.listed() if not i.incident.test]
    if not listed:
        raise InvalidInput("No incident is recorded yet.", "Incidents open from alerts: see README 'Incidents'.")
    return listed[0].incident, len(listed)


async def model_prose(deps: HandlerDeps, facts: Facts) -> str:
    """The model's summary paragraph ('' when no model is configured or it cannot answer now: logged)."""
    if deps.agent is None or await model_problem(deps):
        return ""
    endpoint = deps.agent.endpoint
    try:
        client = await endpoint.client()
        model = await endpoint.model_id()
        messages = [
            {"role": "system", "content": load_prompt("postmortem")},
            {"role": "user", "content": facts_for_model(facts)},
        ]
        answer = await client.chat(model, messages, max_tokens=PROSE_MAX_TOKENS)
    except (ModelAPIError, UserFacingError) as exc:
        log.warning("postmortem: the model did not write the summary: %s", redact(str(exc))[:200])
        return ""
    return redact(answer.content.strip())[:3000]


# Outside text in the reply's lines: one line, and in a code span when it holds Slack's emphasis marks.
_SLACK = Quote(text=lambda s: inert(s, 600), code=plain_code)


def postmortem_reply(facts: Facts, markdown: str, prose: str) -> Reply:
    """The draft in the thread, from the facts (never parsed back out of the Markdown, where outside text sits):
    each item one line (outside text cannot add a line, a heading or a bullet), the renderer escapes the rest."""
    inc = facts.incident
    name, service = inert(redact(inc.lead.name), 120), inert(redact(inc.service), 80)
    r = Reply(title=f":memo: Postmortem draft: {name} on {service} (`{inc.id}`)")
    if prose:
        r.add(heading="Summary (the model's words, from the facts below)", text=prose[:SECTION_MAX])
    impact = [one_line(line) for line in facts.impact.lines] or [f"Not measured: {one_line(facts.impact.unavailable)}"]
    r.add(heading="Impact", text="\n".join(impact))
    rows = [f"{i.at:%H:%M:%S}  {i.what}  [{i.source}]" for i in facts.timeline]
    timeline = redact("\n".join(rows))
    r.add(
        heading="Timeline (UTC)",
        code=timeline[:SECTION_MAX] + ("\n… (the file has all of it)" if len(timeline) > SECTION_MAX else ""),
    )
    for heading, items in (
        ("Cause", cause_lines(facts, _SLACK)),
        ("What fixed it", fix_lines(facts, _SLACK)),
        ("Follow-ups", follow_ups(facts) or ["none recorded"]),
    ):
        r.add(heading=heading, text=redact("\n".join(f"• {item}" for item in items))[:SECTION_MAX])
    r.files.append(FileOut(filename=f"postmortem-{inc.id}.md", title=f"Postmortem {inc.id}", content=markdown.encode()))
    r.context = "every fact from the records (incident, thread, audit, revisions, Cloud Monitoring); redacted"
    return r


@command("postmortem", "Draft a postmortem of an incident from its records", _postmortem_args, ack="Drafting…")
async def postmortem(ctx: CommandContext) -> Reply | None:
    deps = ctx.deps
    inc, choices = await _pick(deps, ctx.opts.incident)
    store = IncidentStore(deps.redis, deps.settings.key_prefix)
    now = utcnow()
    try:
        changes = await changes_for(deps, inc, now, alert_revision=inc.revision)  # the cause its alert names
    except UserFacingError as exc:  # the runtime is away: the draft says less, and says so
        log.warning("postmortem: what changed could not be read: %s", exc.message)
        changes = None
    facts = await gather(
        inc, await store.replies(inc.id), deps.redis, deps.settings.key("audit"),
        changes=changes, metrics=deps.metrics, now=now,
    )  # fmt: skip
    prose = await model_prose(deps, facts)
    reply = postmortem_reply(facts, render_markdown(facts, prose), prose)
    if choices > 1:  # a bare `/gemma postmortem` says which it drafted, and that there are others
        reply.context = (
            f"the latest of {choices} incidents; `/gemma postmortem INCIDENT` drafts another "
            f"(`/gemma incidents` lists them) · {reply.context}"
        )
    if not (who := await audience(ctx)).public:
        return who.address(reply)  # the alerts channel's incident, asked elsewhere: the asker alone
    pub = await store.pub(inc.id)
    if pub.get("ts") and pub.get("channel") in (ctx.responder.channel, ctx.channel_id):
        try:
            await ctx.responder.post(reply, thread_ts=pub["ts"])
            return Reply(title=f":memo: Postmortem of `{inc.id}` posted in its thread.", ephemeral=True)
        except Exception as exc:  # noqa: BLE001 - the command's answer carries it instead
            log.warning("postmortem: could not post in thread %s: %s", pub["ts"], type(exc).__name__)
    return reply


def _handoff_args(p: CommandParser) -> None:
    p.add_argument("--since", metavar="DURATION", default="12h", help="how far back: 30m, 12h, 1d (default 12h)")


@command(
    "handoff",
    "Open and resolved incidents, changes and capacity for the next on-call",
    _handoff_args,
    ack="Summarising…",
)
async def handoff(ctx: CommandContext) -> Reply:
    deps = ctx.deps
    who = await audience(ctx)
    span = parse_duration(ctx.opts.since)  # at most 30 days: as long as incident records are kept
    now = utcnow()
    start = now - span
    items = [i for i in await lifecycle(deps.redis, deps.settings.key_prefix).listed() if not i.incident.test]
    # Opened in the span, or still open whenever it opened.
    items = [i for i in items if i.incident.opened_at >= start or i.status != "resolved"]
    r = Reply(title=f":handshake: Hand-off: the last {ctx.opts.since}")
    life = lifecycle(deps.redis, deps.settings.key_prefix)
    shown = [i for status in STATUSES for i in [j for j in items if j.status == status][:PAGE_ROWS]]
    findings = await life.lead_findings([i.incident.id for i in shown])
    for status in STATUSES:
        of_status = [i for i in items if i.status == status]
        rows = [incident_row(r, i, who, findings.get(i.incident.id, "")) for i in of_status[:PAGE_ROWS]]
        if len(of_status) > PAGE_ROWS:  # the rest is `/gemma incidents STATUS`'s next pages (same order and size)
            rows.append(_more(status, len(of_status) - PAGE_ROWS))
        if rows:
            add_rows(r, f"{status.capitalize()} ({len(of_status)})", rows)
    if not items:
        r.add(text="No incidents in this span.")
    audit = [
        e for e in await audit_since(deps.redis, deps.settings.key("audit"), start.timestamp()) if e.result != "pending"
    ]
    if audit:
        lines = [f"{e.when()} {e.action} `{e.service}` by {who.name(r, e.user_id)}: {e.result}" for e in audit[-15:]]
        if len(audit) > 15:
            lines.insert(0, f"… {len(audit) - 15} earlier ones not shown; the last 15:")
        r.add(heading=f"Changes through the bot ({len(audit)})", text="\n".join(lines))
    try:
        name = deps.settings.vllm_service_name
        target = deps.targets.for_service(name)
        revs = await target.list_revisions(name, limit=20) if target.capabilities.revisions else []
        info = await target.get_service(name)
    except UserFacingError as exc:
        r.add(heading="Capacity", text=f"Could not read the service: {redact(exc.message)[:200]}")
    else:
        made = {e.revision for e in audit if e.revision}
        recent = [v for v in revs if v.create_time and v.create_time >= start]
        outside = [v.name for v in recent if v.name not in made]
        text = f"{len(recent)} revision(s) created"
        if outside:
            text += f", {len(outside)} outside the bot: " + ", ".join(f"`{n}`" for n in outside[:5])
        r.add(heading="Revisions", text=text)
        gpu = f"{info.gpu_count} x {info.gpu_type}" if info.gpu_type else "no GPU"
        r.add(heading="Capacity", text=(
            f"`{info.name}`: ready {info.ready}, serving `{info.latest_ready_revision or '—'}`; instances "
            f"{info.min_instances}-{info.max_instances}, concurrency {info.concurrency}, {gpu}"
        ))  # fmt: skip
    open_items = [i for i in items if i.status != "resolved"]
    if open_items:
        firsts = follow_ups(Facts(incident=open_items[0].incident, now=now))
        if firsts:
            r.add(heading="For the next on-call", text="\n".join(f"• {f}" for f in firsts[:5]))
    r.context = "from the incident records, the audit and Cloud Run"
    return who.address(r)


def _more(status: str, left: int) -> str:
    more = f"… and {left} more {status}: `/gemma incidents {status} --page 2` lists the next {PAGE_ROWS}"
    return more + (" (past this span too)" if status == "resolved" else "")

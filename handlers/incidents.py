"""The incident thread in Slack: one per incident, header edited in place, updates as thread lines.

A queue worker calls `IncidentThreads.handle(entry_id, alert)` for each queued alert. Every Slack effect is
idempotent so a retried or reclaimed job edits rather than re-posts:
- the incident record (its header `ts`, members, and the change each entry caused) lives in Redis and is
  saved before and after each post;
- each thread line is recorded under "<entry id>:<effect>" with its ts once posted, and skipped if present;
- the header is re-rendered from the record, so updating it twice is harmless.
Work on one service's incidents is serialised by a Redis lock (several workers, several instances).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING

from handlers.commands.logs import render_diagnosis
from handlers.context import Responder
from handlers.reply import Reply, plan_button
from skills.diagnose import diagnose_service
from skills.errors import UserFacingError
from skills.incidents import (
    Alert,
    Change,
    Incident,
    format_duration,
    group_key,
    is_known_service,
    new_incident,
    utcnow,
    window_for,
)
from skills.ports import LogQuery
from skills.redact import redact
from skills.remediation import RemediationPlan

if TYPE_CHECKING:
    from bot.deps import Deps
    from bot.settings import Settings

log = logging.getLogger(__name__)

ResponderFor = Callable[[str], Responder]  # channel -> responder (bot.slack_app.ChannelResponder)
# (incident, alert) -> replies for the thread as each becomes ready (findings first, then the plan).
Investigator = Callable[[Incident, Alert], AsyncIterator[Reply]]

_ICON = {"firing": ":rotating_light:", "resolved": ":white_check_mark:"}
_SEV_ICON = {"critical": ":red_circle:", "error": ":large_orange_circle:", "warning": ":large_yellow_circle:"}
_RECORD_TTL_S = 30 * 86400


def _when(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC") if t else "unknown"


def _link(url: str, source: str) -> str:
    if not url:
        return "—"
    label = "Cloud Monitoring incident" if source == "gcp" else "Alertmanager"
    return f"<{url}|{label}>"


def header_reply(inc: Incident, known_service_name: str) -> Reply:
    """The header: what, where, how bad, since when; resolved turns it green and adds the duration."""
    lead = inc.lead
    state = inc.state
    prefix = "[TEST] " if inc.test else ""
    title = f"{_ICON[state]} {prefix}{state.upper()}: {lead.name} on {inc.service}"
    fields = [
        ("Service", f"`{inc.service}`"),
        ("Alert", lead.name),
        ("Severity", f"{_SEV_ICON.get(inc.severity, ':white_circle:')} {inc.severity}"),
        ("State", state),
        ("Started", _when(inc.started_at)),
        ("Link", _link(lead.url, lead.source)),
    ]
    if state == "resolved" and inc.duration is not None:
        fields.append(("Resolved", _when(inc.ended_at)))
        fields.append(("Duration", format_duration(inc.duration)))
    if len(inc.members) > 1:
        firing = sum(1 for m in inc.members.values() if m.state == "firing")
        fields.append(("Alerts", f"{len(inc.members)} grouped ({firing} firing)"))
    r = Reply(title=title)
    r.add(fields=fields)
    if lead.summary:
        r.add(text=redact(lead.summary)[:600])
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


def line_reply(change: Change, inc: Incident, alert: Alert) -> Reply | None:
    """The short thread line an alert adds (None: nothing worth a line)."""
    name = f"*{alert.name}*"
    if change is Change.JOINED:
        text = f":heavy_plus_sign: Another alert on `{inc.service}`: {name} ({alert.severity})"
        if alert.summary:
            text += f" — {redact(alert.summary)[:300]}"
    elif change is Change.REPEATED:
        text = f":repeat: Still firing: {name} (repeat notification #{inc.repeats})"
    elif change is Change.REFIRED:
        text = f":rotating_light: Fired again: {name} at {_when(alert.started_at)}"
    elif change is Change.RESOLVED:
        m = inc.members.get(alert.key)
        took = ""
        if m and m.started_at and m.ended_at:
            took = f" after {format_duration(m.ended_at - m.started_at)}"
        text = f":white_check_mark: Resolved: {name}{took}"
        if inc.state == "resolved" and inc.duration is not None:
            text += f". Incident resolved; duration {format_duration(inc.duration)}."
    else:
        return None
    return Reply(title=text)


def thread_key(settings: Settings, channel: str, ts: str) -> str:
    return settings.key("incident", "by-thread", channel, ts)


async def incident_for_thread(deps: Deps, channel: str, thread_ts: str) -> str:
    """The id of the incident whose thread this is ('' for any other thread)."""
    if not channel or not thread_ts:
        return ""
    found = await deps.redis.get(thread_key(deps.settings, channel, thread_ts))
    return str(found) if found else ""


class IncidentThreads:
    def __init__(self, deps: Deps, responder_for: ResponderFor, investigate: Investigator | None = None) -> None:
        self.deps = deps
        self.s = deps.settings
        self.responder_for = responder_for
        self.investigate = investigate
        self.known = frozenset({self.s.vllm_service_name})

    # --- keys ------------------------------------------------------------------------------------------
    def _k_incident(self, inc_id: str) -> str:
        return self.s.key("incident", inc_id)

    def _k_effects(self, inc_id: str) -> str:
        return self.s.key("incident", inc_id, "effects")

    def _k_by_alert(self, alert: Alert) -> str:
        return self.s.key("incident", "by-alert", alert.key)

    def _k_by_group(self, alert: Alert) -> str:
        return self.s.key("incident", "by-group", group_key(alert))

    # --- records ---------------------------------------------------------------------------------------
    async def load(self, inc_id: str | bytes) -> Incident | None:
        raw = await self.deps.redis.get(self._k_incident(str(inc_id)))
        return Incident.model_validate_json(raw) if raw else None

    async def _save(self, inc: Incident, alert: Alert) -> None:
        async with self.deps.redis.pipeline(transaction=True) as p:
            p.set(self._k_incident(inc.id), inc.model_dump_json(), ex=_RECORD_TTL_S)
            p.set(self._k_by_alert(alert), inc.id, ex=_RECORD_TTL_S)
            p.set(self._k_by_group(alert), inc.id, ex=_RECORD_TTL_S)
            if inc.ts:  # a button clicked in the thread finds its incident (actions report back there)
                p.set(thread_key(self.s, inc.channel, inc.ts), inc.id, ex=_RECORD_TTL_S)
            await p.execute()

    async def _find(self, entry_id: str, alert: Alert, now: datetime) -> Incident | None:
        """The thread for this alert: its own (a resolve, or a retry of this entry, always finds it; a re-fire
        while the thread is active), else the service's active thread when grouping is on, else none."""
        r = self.deps.redis
        window = self.s.alert_group_window_s
        inc_id = await r.get(self._k_by_alert(alert))
        if inc_id and (inc := await self.load(inc_id)):
            if entry_id in inc.applied or alert.state == "resolved" or inc.active(now, window):
                return inc
        if window > 0:
            inc_id = await r.get(self._k_by_group(alert))
            if inc_id and (inc := await self.load(inc_id)) and inc.active(now, window):
                return inc
        return None

    async def _once(self, inc_id: str, effect: str, fn: Callable[[], Awaitable[str]]) -> str:
        """Run a Slack effect once per incident: its ts is recorded before the job is acknowledged."""
        key = self._k_effects(inc_id)
        done = await self.deps.redis.hget(key, effect)
        if done is not None:
            return str(done)
        ts = await fn()
        await self.deps.redis.hset(key, effect, ts or "-")
        await self.deps.redis.expire(key, _RECORD_TTL_S)
        return ts

    # --- the job ---------------------------------------------------------------------------------------
    async def handle(self, entry_id: str, alert: Alert) -> None:
        lock = self.deps.redis.lock(
            self.s.key("incident", "lock", group_key(alert)), timeout=60, blocking_timeout=30, sleep=0.02
        )
        async with lock:
            inc, change = await self._record(entry_id, alert)
            await self._post_effects(entry_id, inc, alert, change)
        if change is Change.OPENED and inc.known_service and not inc.test and self.investigate is not None:
            await self._investigate(inc, alert)

    async def _record(self, entry_id: str, alert: Alert) -> tuple[Incident, Change]:
        now = utcnow()
        inc = await self._find(entry_id, alert, now)
        if inc is None:
            known = is_known_service(alert.service, self.known)
            inc = new_incident(entry_id, alert, self.s.slack_alerts_channel, known, now)
        change = inc.apply(entry_id, alert, now)
        await self._save(inc, alert)  # before any post: a retry finds this incident and this change
        return inc, change

    async def _post_effects(self, entry_id: str, inc: Incident, alert: Alert, change: Change) -> None:
        slack = self.responder_for(inc.channel)
        header = header_reply(inc, self.s.vllm_service_name)
        if inc.ts is None:
            inc.ts = await slack.post(header)
            inc.channel = slack.channel  # the id Slack answered with: chat.update refuses '#names'
            await self._save(inc, alert)
            log.info("incident %s opened for %s (thread %s)", inc.id, inc.service, inc.ts)
        elif change in (Change.JOINED, Change.REFIRED, Change.RESOLVED):
            await slack.update(inc.ts, header)
        line = line_reply(change, inc, alert)
        if line is not None:
            ts = inc.ts

            async def post_line() -> str:
                return await slack.post(line, thread_ts=ts)

            await self._once(inc.id, f"{entry_id}:line", post_line)

    async def _investigate(self, inc: Incident, alert: Alert) -> None:
        """Findings, then the plan, each posted in the thread once (a retried job skips what was posted)."""
        assert self.investigate is not None and inc.ts is not None
        slack = self.responder_for(inc.channel)
        thread = inc.ts
        i = 0
        try:
            async for reply in self.investigate(inc, alert):

                async def post(reply: Reply = reply) -> str:
                    return await slack.post(reply, thread_ts=thread)

                await self._once(inc.id, f"investigation:{i}", post)
                i += 1
        except UserFacingError as exc:
            # Not worth a retry loop: say what is missing in the thread and finish the job.
            note = Reply(title=f":warning: Could not finish the investigation: {redact(exc.message)[:300]}")
            if exc.hint:
                note.add(text=exc.hint)

            async def post_note() -> str:
                return await slack.post(note, thread_ts=thread)

            await self._once(inc.id, f"investigation:{i}", post_note)

    async def on_dead(self, entry_id: str, alert: Alert | None, error: str, attempts: int) -> None:
        """A job that failed `attempts` times: say so in the alerts channel (its thread, if it has one)."""
        what = f"*{alert.name}* on `{alert.service or 'unknown'}`" if alert else f"queue entry {entry_id}"
        reply = Reply(title=f":skull: An alert could not be processed after {attempts} attempts: {what}")
        reply.add(text=f"Last error: `{redact(error)[:400]}`")
        reply.context = f"kept in the dead-letter stream {self.s.key('alerts', 'dead')} (entry {entry_id})"
        slack = self.responder_for(self.s.slack_alerts_channel)
        inc_id = await self.deps.redis.get(self._k_by_alert(alert)) if alert else None
        inc = await self.load(inc_id) if inc_id else None
        await slack.post(reply, thread_ts=inc.ts if inc and inc.ts else None)


# --- the investigation: deterministic findings for the alert window, then the agent's plan ---------------


def render_plan(plan: RemediationPlan) -> Reply:
    """The agent's plan; every proposed action is a plan button (plan -> confirm), never the write."""
    reply = Reply(title=f":brain: Plan ({plan.confidence} confidence): {redact(plan.summary)[:250]}")
    if plan.likely_root_cause:
        reply.add(heading="Likely root cause", text=redact(plan.likely_root_cause)[:1500])
    if plan.evidence:
        reply.add(heading="Evidence", code="\n".join(redact(e.text)[:300] for e in plan.evidence[:8]))
    if plan.steps:
        reply.add(heading="Steps", text="\n".join(f"{n}. {redact(st)[:300]}" for n, st in enumerate(plan.steps, 1)))
    for a in plan.proposed_actions:
        label = f"Plan {a.action}: " + ", ".join(f"{k}={v}" for k, v in a.params.items())
        reply.buttons.append(plan_button(a.action, a.params, label[:75]))
    if plan.fallback_note:
        reply.context = redact(plan.fallback_note)[:300]
    return reply


async def _model_reachable(deps: Deps) -> bool:
    """A quick /health probe: an alert thread should not sit behind a 10-minute cold start."""
    return not await _model_problem(deps)


async def _model_problem(deps: Deps) -> str:
    """Why the model cannot be asked now ('' when it can). Configuration problems (no credentials, no URL)
    are said as such: calling those 'scaled to zero' would send people to the wrong fix."""
    if deps.agent is None or deps.endpoint is None:
        return "no model agent is configured"
    try:
        base = await deps.endpoint.base_url()
    except UserFacingError as exc:
        return f"the model's address could not be found: {exc.message}" + (f" {exc.hint}" if exc.hint else "")
    except Exception as exc:
        return f"the model's address could not be found ({type(exc).__name__})"
    try:
        probe = await deps.model_server.health(base)
    except Exception:
        return _ZZZ
    return "" if probe.ok else _ZZZ


_ZZZ = "scaled to zero or down"


def make_investigator(deps: Deps) -> Investigator:
    s = deps.settings

    async def investigate(inc: Incident, alert: Alert) -> AsyncIterator[Reply]:
        now = utcnow()
        since, until = window_for(alert, now)
        span = f"{since:%H:%M}–{until:%H:%M} UTC"
        if deps.logs is None:
            yield Reply(title=":warning: No log source is wired, so there are no findings for this alert.")
        else:
            # Service-wide (not just the alert's revision): rollouts between revisions are often the story.
            query = LogQuery(
                service=inc.service,
                since=since,
                until=until,
                max_entries=s.log_max_entries,
                max_bytes=s.log_max_bytes,
            )
            try:
                d = await diagnose_service(deps.logs, query, token_budget=s.log_token_budget)
            except UserFacingError as exc:
                yield Reply(title=f":warning: Could not read the logs for {span}: {redact(exc.message)[:300]}")
            else:
                reply = render_diagnosis(inc.service, d)
                reply.context = f"deterministic findings for the alert window {span}"
                yield reply
        problem = await _model_problem(deps) if deps.agent is not None else ""
        if deps.agent is not None and not problem:
            minutes = max(5, min(24 * 60, int((now - since).total_seconds() // 60) + 1))
            context = f"Alert {alert.name} ({alert.severity}) on {inc.service}: {alert.summary}"
            analysis = await deps.agent.analyze(since_minutes=minutes, context=redact(context), service=inc.service)
            yield render_plan(analysis.plan)
        elif problem == _ZZZ:
            yield Reply(
                title=":zzz: The model is not reachable right now (scaled to zero or down), so there is no "
                "plan from it yet; the findings above are deterministic."
            )
        elif problem:
            yield Reply(title=f":warning: The model was not asked for a plan: {redact(problem)[:400]}")

    return investigate

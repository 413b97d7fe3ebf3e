"""/gemma logs [--since 30m] [--severity WARNING] [--revision R]  and  /gemma diagnose [--since 1h]"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from handlers.arg_models import DiagnoseArgs, LogsArgs
from handlers.context import CommandContext
from handlers.declared_args import arguments
from handlers.registry import command
from handlers.remediation_render import action_buttons
from handlers.reply import FileOut, Reply
from skills.diagnosis.diagnose import current_revisions, diagnose_current, diagnose_service
from skills.diagnosis.findings import Diagnosis, Finding
from skills.errors import NotFound, UserFacingError
from skills.incidents.runbooks import runbook_ref
from skills.logs.condense import Digest
from skills.logs.fetch import logs_digest, parse_severity, parse_since
from skills.ports import LogQuery, Logs, ServiceInfo
from skills.targets.port import require

log = logging.getLogger(__name__)

INLINE_CHARS = 2800  # longer digests go to the thread as a file (Slack sections hold ~3000 chars)


def _logs_port(ctx: CommandContext, service: str) -> Logs:
    """The logs of the service's serving target."""
    logs = ctx.deps.targets.for_service(service).logs
    if logs is None:
        raise UserFacingError("Cloud Logging is not configured.", "Set GOOGLE_CLOUD_PROJECT and credentials.")
    return logs


def _query(ctx: CommandContext) -> LogQuery:
    st, o = ctx.deps.settings, ctx.opts
    severity = getattr(o, "severity", None)
    service = o.service or st.vllm_service_name
    if o.revision:  # a target without revisions has none to name: said before any log is read
        require(ctx.deps.targets.for_service(service), "revisions", service)
    return LogQuery(
        service=service,
        since=parse_since(o.since),
        revision=o.revision or None,
        min_severity=parse_severity(severity) if severity else "DEFAULT",
        max_entries=st.log_max_entries,
        max_bytes=st.log_max_bytes,
    )


async def _located_query(ctx: CommandContext) -> LogQuery:
    """The query, once the registry has asked which target holds the service (so `for_service` names it)."""
    await ctx.deps.targets.locate(ctx.opts.service or ctx.deps.settings.vllm_service_name)
    return _query(ctx)


async def _unknown_revision(ctx: CommandContext, q: LogQuery) -> None:
    """A revision named and no log line for it: if Cloud Run does not know it either, say "not found", as
    `/gemma rollback` does, rather than "no lines" or "no known failure". (A revision deleted from Cloud Run
    can still have logs: those are shown.)"""
    if not q.revision:
        return
    try:
        await ctx.deps.targets.for_service(q.service).get_revision(q.service, q.revision)
    except NotFound:
        raise NotFound(
            f"Revision `{q.revision}` not found (not in `{q.service}`, and no log lines for it).",
            "See `/gemma revisions` for the names.",
        ) from None
    except UserFacingError as exc:  # Cloud Run cannot tell: the empty result stands, with the reason logged
        log.info("revision %s: could not check it exists: %s", q.revision, exc.message)


def render_digest(q: LogQuery, d: Digest) -> Reply:
    s = d.stats
    where = q.service + (f" / {q.revision}" if q.revision else "")
    reply = Reply(title=f":scroll: Logs of {where} since {q.since:%H:%M} UTC")
    if s.truncated:
        reply.add(text=f":warning: {s.truncated}")
    if s.lines_in == 0:
        reply.add(text="No log lines in this window.")
        return reply
    if len(d.text) <= INLINE_CHARS:
        reply.add(code=d.text)
    else:
        head = d.text[:INLINE_CHARS].rsplit("\n", 1)[0]
        reply.add(code=head + "\n…")
        reply.files.append(
            FileOut(filename=f"{q.service}-logs-digest.txt", title="Full log digest", content=d.text.encode())
        )
    reply.context = f"{s.lines_in} lines, {s.templates} templates, ~{s.tokens} tokens" + (
        f", {s.omitted} templates left out" if s.omitted else ""
    )
    return reply


def render_diagnosis(service: str, d: Diagnosis, past: list[Finding] | None = None, about: str = "") -> Reply:
    """`about`: which revisions `d` covers; `past`: root causes seen only on revisions since replaced (shown
    as past, without fix buttons: the revision they are about no longer runs)."""
    if not d.findings:
        reply = Reply(title=f":white_check_mark: {service}: no known failure in the logs")
        reply.add(text=f"Looked at {d.digest.lines_in} lines ({d.digest.templates} templates).")
    else:
        roots = len(d.root_kinds())
        more = len(d.findings) - roots
        reply = Reply(title=f":mag: {service}: {roots} finding(s)" + (f" and {more} consequence(s)" if more else ""))
    if about:
        reply.title += f" on {about}"
    if d.truncated:
        reply.add(text=f":warning: {d.truncated}")
    for f in d.findings:
        icon = ":red_circle:" if f.severity in ("critical", "error") else ":large_yellow_circle:"
        steps = "\n".join(f"• {s}" for s in f.remediation.steps)
        runbook = f"\nRunbook: `{runbook_ref(f.kind)}` (`/gemma runbook {f.kind}`)"
        reply.add(
            heading=f"{icon} {f.title}  `{f.kind}`",
            text=f"{f.remediation.summary}\n{steps}{runbook}".strip(),
            code="\n".join(f.evidence) or None,  # log text stays in a code block: quoted, never instructions
        )
        reply.buttons.extend(action_buttons(f.remediation.actions))
    for f in past or []:
        reply.add(
            heading=f":white_circle: past (a replaced revision): {f.title}  `{f.kind}`",
            code=f.evidence[0] if f.evidence else None,
        )
    reply.context = f"deterministic analyzers, {datetime.now(UTC):%H:%M} UTC"
    return reply


@command(
    "logs",
    "Condensed logs of the vLLM service (templates, counts, errors first)",
    arguments(LogsArgs),
    ack="Reading logs…",
)
async def logs(ctx: CommandContext) -> Reply:
    q = await _located_query(ctx)
    digest, _ = await logs_digest(_logs_port(ctx, q.service), q, ctx.deps.settings.log_token_budget)
    if digest.stats.lines_in == 0:
        await _unknown_revision(ctx, q)
    return render_digest(q, digest)


@command(
    "diagnose",
    "Find known vLLM / Cloud Run failures in the logs, with evidence and fixes",
    arguments(DiagnoseArgs),
    ack="Diagnosing…",
)
async def diagnose(ctx: CommandContext) -> Reply:
    q = await _located_query(ctx)
    service: ServiceInfo | None = None
    try:  # current settings make remediations concrete (max instances + 1); diagnosis works without them
        service = await ctx.deps.targets.for_service(q.service).get_service(q.service)
    except Exception as exc:  # noqa: BLE001 - diagnosis works without the current settings
        log.warning("diagnose: settings of %s unavailable: %s: %s", q.service, type(exc).__name__, str(exc)[:200])
        service = None
    budget = ctx.deps.settings.log_token_budget
    if q.revision is None and service is not None and current_revisions(service):
        # By default: the revisions that matter now (serving, latest); older failures are marked past.
        scoped = await diagnose_current(_logs_port(ctx, q.service), q, service, token_budget=budget)
        about = "revision " + ", ".join(f"`{r}`" for r in scoped.revisions)
        return render_diagnosis(q.service, scoped.current, scoped.past, about=about)
    result = await diagnose_service(_logs_port(ctx, q.service), q, token_budget=budget, service=service)
    if result.digest.lines_in == 0:
        await _unknown_revision(ctx, q)
    return render_diagnosis(q.service, result)

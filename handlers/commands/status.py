"""/gemma status [service] [--fresh]"""

from __future__ import annotations

from typing import Any

from handlers.arg_models import StatusArgs
from handlers.context import CommandContext
from handlers.declared_args import arguments
from handlers.deps import HandlerDeps
from handlers.registry import command
from handlers.reply import Reply
from skills.durations import format_duration
from skills.observe.service_metrics import ServiceMetrics
from skills.observe.status import StatusReport, service_status


def _probe(ok: bool, ms: float, err: str) -> str:
    return f":white_check_mark: {ms:.0f} ms" if ok else f":x: {err or 'failed'} ({ms:.0f} ms)"


def cloud_metrics_section(m: ServiceMetrics) -> dict[str, Any]:
    """Cloud Monitoring figures as one section; one line when every metric failed the same way."""
    errors = {f.error for f in m.figures}
    heading = f"{m.source} (last {m.minutes} min)"
    if len(errors) == 1 and "" not in errors:
        return {"heading": heading, "text": f"unavailable: {errors.pop()}"}
    return {"heading": heading, "fields": [(f.label, f.text()) for f in m.figures]}


def render_status(r: StatusReport) -> Reply:
    s = r.service
    icon = ":large_green_circle:" if s.ready else (":hourglass:" if s.ready is None else ":red_circle:")
    # not ready yet: a revision rolling out (Cloud Run), or a target without revisions starting (a TPU slice)
    state = "ready" if s.ready else (("rolling out" if r.revisions else "starting") if s.ready is None else "NOT ready")
    if r.cold:
        icon, state = ":zzz:", "scaled to zero / cold"
    elif s.ready and r.model is not None and not r.model.health.ok:
        # Ready means vLLM answers: the platform's condition alone (a revision it counts as started) is not that.
        icon, state = ":red_circle:", f"NOT serving: {r.where} counts it ready, vLLM's /health does not answer"
    reply = Reply(title=f"{icon} {s.name}: {state}")
    if r.notes:
        reply.add(text="\n".join(f"• {n}" for n in r.notes))
    gpu = f"{s.gpu_count} x {s.gpu_type}" if s.gpu_type else "none"
    revisions = f"latest created `{s.latest_created_revision or '—'}`\nlatest ready `{s.latest_ready_revision or '—'}`"
    # Where requests go when more than one revision takes them (a canary): each share, its tag, one instance each.
    shares = [t for t in s.traffic if t.percent]
    split = " · ".join(f"{t.percent}% `{t.revision or 'latest'}`" + (f" ({t.tag})" if t.tag else "") for t in shares)
    # In the target's unit: Cloud Run's instances (and their concurrency), ACA's replicas; nothing scales a TPU slice.
    scaling = f"min {s.min_instances} / max {s.max_instances}" + (
        f", concurrency {s.concurrency or '—'}" if s.scaling_unit == "instance" else f" {s.scaling_unit}s"
    )
    if not s.scaling_unit:
        scaling = "one node, always on (no scale to zero)"
    resources = [("CPU / memory", f"{s.cpu or '—'} / {s.memory or '—'}")]
    if s.accelerator:  # a target's own accelerator (a TPU slice): its CPUs come with its type
        resources = [] if not (s.cpu or s.memory) else resources
    reply.add(
        fields=[
            ("URL", s.uri or "—"),
            *([("Revisions", revisions)] if r.revisions else []),  # a target without revisions has none to show
            *([("Traffic", f"split: {split}")] if len(shares) > 1 else []),
            # All of it on a revision that is not the latest ready (a rollback or a promote pinned it): say which.
            *(
                [("Traffic", f"100% `{shares[0].revision}` (pinned)")]
                if len(shares) == 1 and shares[0].revision and shares[0].revision != s.latest_ready_revision
                else []
            ),
            ("Scaling", scaling),
            *([("Accelerator", s.accelerator)] if s.accelerator else [("GPU", gpu)]),
            *resources,
            ("Image", f"`{s.image or '—'}`"),
        ]
    )
    if r.model is not None:
        m = r.model
        reply.add(
            heading="Model server",
            fields=[
                ("/health", _probe(m.health.ok, m.health.latency_ms, m.health.error)),
                ("/v1/models", _probe(m.models_probe.ok, m.models_probe.latency_ms, m.models_probe.error)),
                ("Served models", ", ".join(f"`{i}`" for i in m.models) or "—"),
            ],
        )
    if r.cloud_metrics is not None:
        reply.add(**cloud_metrics_section(r.cloud_metrics))
    age = r.age_s()
    reply.context = f"data {format_duration(age, 'approx')} old (cached)" if r.from_cache else "fresh data"
    return reply


@command(
    "status",
    "Cloud Run and model-server health of the vLLM service",
    arguments(StatusArgs),
    ack="Checking…",
)
async def status(ctx: CommandContext) -> Reply:
    return render_status(await read_status(ctx.deps, ctx.opts.service, fresh=ctx.opts.fresh))


async def read_status(deps: HandlerDeps, service: str | None, *, fresh: bool) -> StatusReport:
    """The service's status as /gemma status and the MCP status tool read it: its target's view, cached under
    `<key_prefix>:status:<service>` (a confirmed write drops that key: skills/deploy/flow.py)."""
    st = deps.settings
    service = service or st.vllm_service_name
    target = await deps.targets.locate(service)  # the target holding that name, asked (skills/targets/registry.py)
    return await service_status(
        target,
        deps.model_server,
        deps.redis,
        st.key("status", service),
        st.status_cache_ttl_s,
        service,
        base_url_override=st.vllm_base_url,
        fresh=fresh,
        metrics=target.metrics,
        revisions=target.capabilities.revisions,
        where=target.display,
    )

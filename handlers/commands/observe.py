"""/gemma metrics | health | query PROMPT | cost — the model server seen from the outside and the inside."""

from __future__ import annotations

from handlers.arg_models import QueryArgs, ServiceArgs
from handlers.authz import require_deployer
from handlers.context import CommandContext
from handlers.declared_args import arguments
from handlers.registry import COMMANDS, command
from handlers.reply import Reply
from skills.bench.report import measured, recent_sweeps
from skills.capacity.cost import CostReport, cost_report
from skills.capacity.prices import format_usd
from skills.errors import InvalidInput, UserFacingError
from skills.logs.redact import redact
from skills.observe.health import DeepHealth, deep_health
from skills.observe.model_metrics import ModelMetrics, Percentiles, collect_model_metrics
from skills.observe.query import QueryResult, stream_query
from skills.serving.vllm_flags import VllmFlags, planner_kv
from skills.text import shorten


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v * 1000:.0f} ms"


def _pcts(p: Percentiles | None) -> str:
    if p is None:
        return "no requests in the window"
    return f"p50 {_ms(p.p50)} · p90 {_ms(p.p90)} · p99 {_ms(p.p99)} (n={p.count:.0f})"


def _num(v: float | None, fmt: str = "{:.0f}") -> str:
    return "—" if v is None else fmt.format(v)


def render_metrics(m: ModelMetrics, base_url: str) -> Reply:
    icon = ":warning:" if m.flags else ":bar_chart:"
    reply = Reply(title=f"{icon} Model server metrics ({base_url})")
    if m.flags:
        reply.add(text="\n".join(f"• {f}" for f in m.flags))
    kv = _num(m.kv_usage, "{:.0%}")
    if m.kv_metric.startswith("vllm:gpu_cache"):
        kv += " (older vLLM metric name)"
    cap = f"{m.kv_capacity_tokens:,} tokens" if m.kv_capacity_tokens else "—"
    dtype = f", {m.cache_dtype}" if m.cache_dtype else ""
    if m.kv_capacity_source == "kv_cache_size_tokens":
        cap += f" (vLLM's count; {m.num_gpu_blocks or 0:,} blocks shared by its KV-cache groups{dtype})"
    elif m.kv_capacity_tokens:
        cap += f" ({m.num_gpu_blocks:,} blocks x {m.block_size}{dtype}: an upper bound for sliding-window models)"
    hit = _num(m.prefix_cache_hit_rate, "{:.0%}")
    reply.add(
        fields=[
            ("Running / waiting", f"{_num(m.running)} / {_num(m.waiting)}"),
            ("KV cache used", kv),
            ("KV cache capacity", cap),
            ("Preemptions", _num(m.preemptions)),
            ("Prefix-cache hit rate", hit),
            (
                "Tokens/s (prompt / generated)",
                f"{_num(m.prompt_tokens_per_s, '{:.1f}')} / {_num(m.generation_tokens_per_s, '{:.1f}')}",
            ),
        ]
    )
    reply.add(
        heading="Latency",
        fields=[
            ("Time to first token", _pcts(m.ttft)),
            ("Inter-token", _pcts(m.itl)),
            ("End to end", _pcts(m.e2e)),
            ("Queue time", _pcts(m.queue)),
        ],
    )
    reply.context = f"Rates, counts and percentiles {m.window}. Percentiles are interpolated from histogram buckets."
    return reply


@command("metrics", "The model server's /metrics: load, KV cache, latency percentiles, token rates",
         ack="Reading /metrics…")  # fmt: skip
async def metrics(ctx: CommandContext) -> Reply:
    d = ctx.deps
    base = await d.endpoint.base_url()
    fp8: bool | None = None
    try:  # one reading of the running configuration: the flags the service runs with, as /gemma config shows
        name = d.settings.vllm_service_name
        running = VllmFlags.parse_or_none((await d.targets.for_service(name).get_service(name)).args)
        fp8 = None if running is None else planner_kv(running) == "fp8"
    except UserFacingError:
        pass  # e.g. VLLM_BASE_URL only: advice without knowing the flags
    key = d.settings.key("metrics", "last_scrape")
    m = await collect_model_metrics(d.model_server, base, d.redis, key, kv_cache_fp8=fp8)
    return render_metrics(m, base)


def render_health(h: DeepHealth) -> Reply:
    icon = ":large_green_circle:" if h.ok else (":large_yellow_circle:" if h.chat_ok else ":red_circle:")
    reply = Reply(title=f"{icon} Deep health of `{h.model or '?'}`")
    fields = []
    if h.http_health is not None:
        p = h.http_health
        fields.append(("/health", f"{'ok' if p.ok else 'FAILED ' + p.error} ({p.latency_ms:.0f} ms)"))
    chat = f"ok in {h.chat_latency_ms:.0f} ms" if h.chat_ok else f"FAILED: {h.chat_error}"
    if h.chat_ok and h.chat_reply:
        chat += f" — replied “{shorten(redact(h.chat_reply), 60)}”"
    fields.append(("Chat completion", chat))
    fields.append(("Tool calling", f"{h.tools}: {h.tools_detail}"))
    reply.add(fields=fields)
    if h.hints:
        reply.add(heading="What to do", text="\n".join(f"• {x}" for x in h.hints))
    reply.context = f"endpoint {h.base_url}"
    return reply


@command("health", "Deep check: a real chat completion, its latency, and whether tool calling works",
         ack="Checking the model…")  # fmt: skip
async def health(ctx: CommandContext) -> Reply:
    d = ctx.deps
    # A real completion wakes a scaled-to-zero GPU: the one rule for what costs money (`/gemma status` probes).
    await require_deployer(d, ctx.user_id, "run the deep health check (its completion wakes the model)")
    base = await d.endpoint.base_url()
    client = await d.endpoint.client()
    model = await d.endpoint.model_id()
    return _simulated_note(ctx, render_health(await deep_health(client, model, base, d.model_server)))


# The sandbox serves a simulated vLLM: real timings and metrics of its path, canned text for answers. The
# commands that measure it say so; the ones that need a model to reason (ask, analyze, eval) refuse it.
SIMULATED = "the sandbox's simulated vLLM: real timings and metrics, canned answers (it is not a model to reason with)"


def _simulated_note(ctx: CommandContext, reply: Reply) -> Reply:
    if ctx.deps.sandbox is not None:
        reply.context = f"{reply.context} · {SIMULATED}" if reply.context else SIMULATED
    return reply


def render_query(prompt: str, r: QueryResult) -> Reply:
    reply = Reply(title=f"Answer from `{r.model}`")
    reply.add(text=redact(r.text.strip()) or "_(empty answer)_")
    toks = "—" if r.output_tokens is None else f"{r.output_tokens}"
    if r.output_tokens is None:
        toks += " (server sent no usage)"
    stats = (
        f"TTFT {_ms(r.ttft_s)} · {toks} output tokens · {_num(r.tokens_per_s, '{:.1f}')} tok/s overall"
        f" ({_num(r.decode_tokens_per_s, '{:.1f}')} tok/s decoding) · total {r.total_s:.2f} s"
    )
    if r.finish_reason == "length":
        stats += " · stopped at the token limit"
    reply.context = stats
    return reply


@command(
    "query",
    "Ask the model directly and see TTFT, tokens and tokens/s",
    arguments(QueryArgs),
    ack="Asking the model…",
    free_text=True,
)
async def query(ctx: CommandContext) -> Reply:
    prompt = " ".join(ctx.opts.prompt).strip()
    if not prompt:
        raise InvalidInput("Nothing to ask.", COMMANDS["query"].parser.usage_hint())
    prompt = redact(prompt)  # never send a pasted secret to the model
    d = ctx.deps
    await require_deployer(d, ctx.user_id, "run a timed query (its completion wakes the model)")
    client = await d.endpoint.client()
    model = await d.endpoint.model_id()
    return _simulated_note(ctx, render_query(prompt, await stream_query(client, model, prompt)))


def _usd(v: float) -> str:
    return f"${v:,.2f}" if v >= 0.1 else f"${v:,.3f}"


def _per(v: float | None, per: str) -> str:
    """`$1.42/h`, three places under $0.10; no sourced price: "price unknown" (format_usd's words), never $0."""
    return f"{_usd(v)}/{per}" if v is not None else format_usd(None)


def render_cost(c: CostReport) -> Reply:
    # What scales, as the target names it (CostReport.scaling_unit); nothing (a TPU slice): it bills while it
    # exists, idle or busy.
    unit = f"per running {c.scaling_unit}" if c.scaling_unit else "while the slice exists"
    reply = Reply(title=f":moneybag: {c.service}: {_per(c.usd_per_hour, 'hour')} {unit}")
    gpu = f"{c.gpu_count} x {c.gpu_type}" if c.gpu_type else "none"
    parts = " + ".join(f"{k} {_usd(v)}" for k, v in sorted(c.breakdown.items()))
    fields = [("Configuration", c.accelerator or f"GPU {gpu}, {c.vcpu:g} vCPU, {c.memory_gib:g} GiB")]
    if parts:
        fields.append(("Per hour", parts))
    if not c.scaling_unit:
        fields.append(("Idle or busy", f"{_per(c.usd_per_hour, 'h')}: no scale to zero"))
    else:
        u = c.scaling_unit
        kept = f" + {c.kept_instances} kept by other active revisions" if c.kept_instances else ""
        fields += [
            (f"Idle (min-{u}s)", f"{_per(c.idle_usd_per_hour, 'h')} with min-{u}s {c.min_instances}{kept}"),
            (f"All {u}s busy", f"{_per(c.max_usd_per_hour, 'h')} at max-{u}s {c.max_instances}{kept}"),
        ]
    reply.add(fields=fields)
    tp = []
    for label, t in (("Single stream", c.single_stream), ("Best batched", c.batched)):
        if t is not None:
            tp.append(
                (
                    label,
                    f"{_usd(t.usd_per_m_output_tokens)} per M output tokens "
                    f"at {t.output_tok_per_s:.1f} tok/s "
                    f"(concurrency {t.concurrency}, context {t.context})",
                )
            )
    if tp:
        reply.add(heading="Per million output tokens (measured)", fields=tp)
    if c.notes:
        reply.context = " ".join(c.notes)
    return reply


@command("cost", "$/hour of the running configuration and $/M tokens at measured throughput",
         arguments(ServiceArgs),
         ack="Pricing…")  # fmt: skip
async def cost(ctx: CommandContext) -> Reply:
    d = ctx.deps
    service = ctx.opts.service or d.settings.vllm_service_name
    target = d.targets.for_service(service)
    info = await target.get_service(service)
    sweeps = await recent_sweeps(d.redis, d.settings.key("bench", "history"), 1)
    region = d.settings.google_cloud_location  # where a Cloud Run service runs: its tier's rates
    hourly = await target.hourly_cost(info, region)  # the price its plans showed
    return render_cost(cost_report(hourly, measured(sweeps[0]) if sweeps else None))

"""/gemma bench [--concurrency 1,8,32] [--context 128,2048,8192] [--output 128] [--requests N] | bench compare

Plan first (cells, requests, rough duration and cost) with Confirm; on confirm a Redis lock keeps sweeps one
at a time, progress is edited in place with a Stop button, and results land in the thread as a table, a CSV
and PNG charts, and in Redis for `bench compare`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import secrets

from pydantic import ValidationError

from handlers.arg_models import BenchArgs
from handlers.authz import require_author_or_deployer, require_deployer
from handlers.context import ActionContext, CommandContext, Responder
from handlers.declared_args import arguments
from handlers.registry import COMMANDS, action, command
from handlers.reply import Button, FileOut, Reply
from skills.bench import report
from skills.bench.loadgen import BenchSpec, Progress, SweepResult, run_sweep
from skills.bench.store import BenchStore
from skills.bench.sweep_preview import SweepPreview, make_preview, max_model_len_from_args, server_max_model_len
from skills.durations import format_duration
from skills.errors import InvalidInput, UserFacingError, explain_validation
from skills.locks import LockHeld, ServiceLock

log = logging.getLogger(__name__)

CONFIRM = "gemma_bench_confirm"
DISMISS = "gemma_bench_cancel"
STOP = "gemma_bench_stop"


def spec_from(opts: argparse.Namespace) -> BenchSpec:
    values = {k: getattr(opts, k) for k in ("concurrency", "contexts", "output_tokens", "requests_per_cell")}
    try:
        return BenchSpec.model_validate({k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        msgs = explain_validation(exc, flag_style=False).rstrip(".")
        usage = COMMANDS["bench"].parser.usage_hint()
        raise InvalidInput(f"Invalid benchmark options ({msgs}).", usage) from None


def render_preview(plan: SweepPreview) -> Reply:
    cost = f", about ${plan.est_cost_usd:.2f} of instance time" if plan.est_cost_usd is not None else ""
    about = format_duration(plan.est_duration_s, "approx")
    reply = Reply(title=f":stopwatch: Benchmark plan for `{plan.model}`: {len(plan.cells)} cells, "
                        f"{plan.total_requests} requests, ~{about}{cost}")  # fmt: skip
    s = plan.spec
    reply.add(
        fields=[
            ("Concurrency", ", ".join(map(str, s.concurrency))),
            ("Context (prompt tokens)", ", ".join(map(str, s.contexts))),
            ("Output tokens", str(s.output_tokens)),
            ("max-model-len", str(plan.max_model_len or "unknown")),
            ("Caps", f"{s.max_total_requests} requests, {format_duration(s.max_duration_s, 'approx')}"),
        ]
    )
    cells = "\n".join(f"conc {c:>4}  ctx {x:>6}  {n:>5} requests" for c, x, n in plan.cells)
    reply.add(heading="Cells", code=cells)
    if plan.notes:
        reply.add(text="\n".join(f"• {n}" for n in plan.notes))
    reply.buttons = [
        Button(label="Run benchmark", action_id=CONFIRM, value=plan.id, style="primary"),
        Button(label="Cancel", action_id=DISMISS, value=plan.id),
    ]
    reply.context = "The sweep loads the live model server; other users will see slower answers while it runs."
    return reply


async def _preview(ctx: CommandContext) -> Reply:
    d = ctx.deps
    spec = spec_from(ctx.opts)
    client = await d.endpoint.client()
    model = await d.endpoint.model_id()
    max_len = await server_max_model_len(client, model)
    usd_h: float | None = None
    try:
        name = d.settings.vllm_service_name
        target = d.targets.for_service(name)
        info = await target.get_service(name)
        usd_h = (await target.hourly_cost(info, d.settings.google_cloud_location)).usd_per_hour
        # One reading of the running configuration: the flags the service runs with (what /gemma config shows);
        # the server's own report only when they do not say.
        max_len = max_model_len_from_args(info.args) or max_len
    except UserFacingError:
        pass  # no Cloud Run access (e.g. VLLM_BASE_URL only): plan without a cost
    last = await _store(ctx).recent_sweeps(1)
    single = report.best_throughput(last[0])[0] if last else None
    stream_tok_s = single.output_tok_per_s if single else None
    plan = make_preview(secrets.token_hex(6), spec, model, max_len, usd_h, stream_tok_s)
    plan.user_id, plan.channel_id = ctx.user_id, ctx.channel_id
    await _store(ctx).save_preview(plan)
    return render_preview(plan)


async def _compare(ctx: CommandContext) -> Reply:
    sweeps = await _store(ctx).recent_sweeps(2)
    if len(sweeps) < 2:
        raise UserFacingError("`bench compare` needs two stored sweeps.", "Run `/gemma bench` (twice) first.")
    new, old = sweeps
    reply = Reply(title=f"Benchmark {new.id} vs {old.id} (previous)")
    reply.add(code=report.compare(new, old))
    reply.context = (
        f"new {new.started_at:%Y-%m-%d %H:%M} UTC ({new.model}), "
        f"previous {old.started_at:%Y-%m-%d %H:%M} UTC "
        f"({old.model}). Latency: lower is better; tok/s: higher is better; changes under 5% unmarked."
    )
    return reply


@command("bench", "Benchmark sweep over concurrency x context (plan first), or compare the last two",
         arguments(BenchArgs), ack="Planning the benchmark…")  # fmt: skip
async def bench(ctx: CommandContext) -> Reply:
    if ctx.opts.compare:
        return await _compare(ctx)
    return await _preview(ctx)


def _store(ctx: CommandContext | ActionContext) -> BenchStore:
    return BenchStore(ctx.deps.redis, ctx.deps.settings.key, ctx.deps.settings.plan_ttl_s)


@action(DISMISS)
async def dismiss(ctx: ActionContext) -> Reply:
    plan = await _store(ctx).get_preview(ctx.value)
    if plan is not None:
        await require_author_or_deployer(ctx.deps, ctx.user_id, plan.user_id, "cancel this benchmark plan")
    await _store(ctx).drop_preview(ctx.value)
    return Reply(title="Benchmark cancelled; nothing was run.", ephemeral=True)


@action(CONFIRM)
async def confirm(ctx: ActionContext) -> Reply | None:
    d = ctx.deps
    await require_deployer(d, ctx.user_id, "run a benchmark (it loads the live model)")
    plan = await _store(ctx).take_preview(ctx.value)  # single use: a double click runs once
    if plan is None:
        raise UserFacingError("This benchmark plan has expired or was already used.", "Run `/gemma bench` again.")
    lock = _store(ctx).lock(int(plan.spec.max_duration_s) + 600)
    try:
        await lock.acquire(ctx.user_id, f"benchmark {plan.id}")
    except LockHeld as exc:
        raise UserFacingError(
            f"Another benchmark is running: {exc}.",
            "Wait for it, or stop it with its Stop button.",
            (exc.holder.user_id,) if exc.holder else (),
        ) from None
    try:
        ts = await ctx.responder.post(_progress_reply(plan, Progress(phase="starting", cells=len(plan.cells))))
    except Exception:
        await lock.release()
        raise
    d.spawn(run_and_report(ctx, plan, lock, ts), kind="watch", user=ctx.user_id)  # minutes: counted apart
    return None


@action(STOP)
async def stop(ctx: ActionContext) -> Reply:
    holder = await _store(ctx).lock(0).holder()
    await require_author_or_deployer(ctx.deps, ctx.user_id, holder.user_id if holder else "", "stop this benchmark")
    await _store(ctx).request_stop(ctx.value, ctx.user_id)
    return Reply(title="Stopping the benchmark after the requests in flight…", ephemeral=True)


def _progress_reply(plan: SweepPreview, p: Progress) -> Reply:
    pct = p.done_requests / p.total_requests if p.total_requests else 0.0
    bar = "█" * int(pct * 20) + "░" * (20 - int(pct * 20))
    title = f":hourglass_flowing_sand: Benchmark {plan.id} of `{plan.model}`: {p.phase}"
    reply = Reply(title=title)
    text = f"`{bar}` {p.done_requests}/{p.total_requests} requests"
    if p.cell_index:
        text += f" · cell {p.cell_index}/{p.cells} (concurrency {p.concurrency}, context {p.context})"
    text += f" · {format_duration(p.elapsed_s, 'approx')} elapsed"
    reply.add(text=text)
    reply.buttons = [Button(label="Stop", action_id=STOP, value=plan.id, style="danger")]
    return reply


def result_reply(result: SweepResult) -> Reply:
    head = "stopped early (" + result.stopped + ")" if result.stopped else "done"
    reply = Reply(title=f":checkered_flag: Benchmark {result.id} of `{result.model}`: {head}")
    reply.add(code=report.table(result) if result.cells else "no cell finished")
    errs = report.error_summary(result)
    if errs:
        reply.add(heading="Errors", code=errs)
    if result.notes:
        reply.add(text="\n".join(f"• {n}" for n in result.notes))
    reply.context = (
        "Latencies in ms. TTFT at the first token-bearing chunk; ITL = gaps between chunks; "
        "tokens from server usage; "
        "req/s and tok/s over each cell's wall time (vLLM benchmark_serving definitions)."
    )
    reply.files = [
        FileOut(filename=f"bench-{result.id}.csv", title="Benchmark results (CSV)", content=report.to_csv(result))
    ]
    if result.cells:
        for name, png in report.charts(result).items():
            reply.files.append(FileOut(filename=f"bench-{result.id}-{name}", title=name, content=png))
    return reply


async def run_and_report(ctx: ActionContext, plan: SweepPreview, lock: ServiceLock, ts: str) -> None:
    d, store = ctx.deps, _store(ctx)
    responder: Responder = ctx.responder
    stop_event = asyncio.Event()

    async def watch_stop() -> None:
        while not stop_event.is_set():
            if await store.stop_requested(plan.id):
                stop_event.set()
            await asyncio.sleep(0.5)

    async def progress(p: Progress) -> None:
        try:
            await responder.update(ts, _progress_reply(plan, p))
        except Exception:  # a failed progress edit must not stop the sweep
            log.warning("benchmark progress update failed", exc_info=True)

    watcher = asyncio.ensure_future(watch_stop())
    try:
        if d.streams is None:
            raise UserFacingError("The benchmark's load generator is not wired in this process.")
        base = await d.endpoint.base_url()

        async def count(prompt: str) -> int:
            return len(await d.model_server.tokenize(base, plan.model, prompt))

        result = await run_sweep(
            d.streams,
            plan.model,
            count,
            plan.spec,
            plan.id,
            stop=stop_event,
            on_progress=progress,
            progress_every_s=3.0,
        )
        await store.save_sweep(result)
        final = Reply(title=f":checkered_flag: Benchmark {plan.id}: {result.stopped or 'done'}; results in the thread")
        await responder.update(ts, final)
        await responder.post(result_reply(result), thread_ts=ts)
    except UserFacingError as exc:
        await responder.update(
            ts, Reply(title=f":warning: Benchmark {plan.id} failed: {exc.message}").add(text=exc.hint or None)
        )
    except Exception:
        log.exception("benchmark %s failed", plan.id)
        await responder.update(
            ts, Reply(title=f":warning: Benchmark {plan.id} failed unexpectedly; see the bot's logs.")
        )
    finally:
        stop_event.set()
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        await store.clear_stop(plan.id)
        await lock.release()

"""/gemma fit MODEL [--gpu ...] — will it fit, what will it cost; and /gemma models — the catalog."""

from __future__ import annotations

import logging

from handlers.context import CommandContext
from handlers.fit_args import MODELS_HINT, add_fit_arguments, namespace_to_request
from handlers.registry import COMMANDS, command
from handlers.reply import Button, Reply, plan_button
from handlers.tpu_fit_render import render_tpu_fit, tpu_request
from skills.capacity.catalog import Catalog
from skills.capacity.fit import FitReport, check_fit, load_catalog
from skills.capacity.prices import format_usd
from skills.capacity.startup_log import StartupFigures, kv_settings, last_figures
from skills.capacity.tpu_fit import check_tpu_fit
from skills.durations import format_duration
from skills.serving.profiles import DeployProfile, load_profiles

log = logging.getLogger(__name__)

_VERDICT = {
    "fits": (":white_check_mark:", "fits"),
    "fits_with_changes": (":large_yellow_circle:", "fits with changes"),
    "does_not_fit": (":x:", "does NOT fit"),
}


def _about(seconds: float) -> str:
    return "~" + format_duration(seconds, "approx")


def _measured(r: FitReport, service: str, seen: StartupFigures) -> tuple[str, str]:
    """A "last measured on this service" section beside the prediction."""
    heading = f"Last measured on `{service}`"
    if (seen.model, seen.gpu) != (r.model.name, r.gpu.name):
        return heading, f"{seen.model} on {seen.gpu} (not this configuration)"
    lines = []
    if seen.weights_gib is not None:
        lines.append(f"weights {seen.weights_gib:g} GiB (predicted {r.weights_gib:g})")
    # KV figures compare only like with like: measured with other settings, they are said as such.
    same_kv = not seen.kv_settings or seen.kv_settings == kv_settings(r.request)
    if seen.kv_cache_tokens is not None and same_kv:
        lines.append(f"GPU KV cache size {seen.kv_cache_tokens:,} tokens (predicted {r.kv_cache_tokens:,})")
    elif seen.kv_cache_tokens is not None:
        lines.append(
            f"GPU KV cache size {seen.kv_cache_tokens:,} tokens with `{seen.kv_settings}`, not this fit's "
            f"`{kv_settings(r.request)}`: not comparable"
        )
    if seen.max_concurrency is not None and seen.max_model_len:
        lines.append(f"max concurrency {seen.max_concurrency:g}x at {seen.max_model_len:,} tokens")
    if seen.ready_after_s is not None:
        lines.append(f"cold start {_about(seen.ready_after_s)} (predicted {_about(r.cold_start_s)})")
    return heading, "; ".join(lines) + f" — image `{seen.image}`"


def render_fit(r: FitReport, measured: tuple[str, StartupFigures] | None = None) -> Reply:
    icon, word = _VERDICT[r.verdict]
    q = r.request
    gpus = f"{q.gpu_count} x {r.gpu.name}" if q.gpu_count > 1 else r.gpu.name
    reply = Reply(title=f"{icon} {r.model.name} {word} on {gpus}")
    if r.changes:
        reply.add(heading="Apply these changes", code=" ".join(r.changes))
    if r.warnings:
        reply.add(text="\n".join(f":warning: {w}" for w in r.warnings))
    kv = f"{r.kv_cache_tokens:,} tokens ({r.kv_cache_gib:g} GiB, {r.kv_bytes_per_token:,} B/token"
    kv += f" {q.kv_cache_dtype})"
    tok = f"~{r.est_tokens_per_s:g} tok/s" if r.est_tokens_per_s else "—"
    reply.add(
        fields=[
            ("Weights", f"{r.weights_gib:g} GiB ({r.model.quantization})"),
            ("GPU budget", f"{r.budget_gib:g} GiB = {r.gpu.memory_gib:g} x {q.gpu_memory_utilization:g}"),
            ("Overhead", f"{r.overhead_gib:g} GiB{' (eager)' if q.enforce_eager else ''}"),
            ("KV cache", kv),
            ("Concurrency", f"{r.max_concurrency:g} x {q.max_model_len:,}-token sequences"),
            ("Host RAM", f"~{r.host_memory_gib:g} GiB peak → memory {r.recommended_memory_gib}Gi"),
            ("Cold start", f"{_about(r.cold_start_s)} (probe budget {format_duration(r.startup_budget_s, 'approx')})"),
            (
                "Cost",
                format_usd(r.cost_per_hour_usd, "h") + (f", {r.recommended_cpu:g} vCPU" if r.recommended_cpu else ""),
            ),
            ("Single stream", tok),
        ]
    )
    if r.startup_lines and r.verdict != "does_not_fit":
        reply.add(heading="vLLM will print", code="\n".join(r.startup_lines))
    if measured is not None:
        heading, text = _measured(r, *measured)
        reply.add(heading=heading, text=text)
    if r.verdict != "does_not_fit":
        reply.add(heading="vLLM args", code=" ".join(r.vllm_args))
    if r.alternatives:
        reply.add(heading="Nearest configurations that fit", text="\n".join(f"• {a}" for a in r.alternatives))
    if r.notes:
        reply.add(heading="Why", text="\n".join(f"• {n}" for n in r.notes))
    button = _deploy_button(r)
    if button is not None:
        reply.buttons.append(button)
    reply.context = "Estimates from the planner's catalog and field notes; reports vary by 20-30%."
    return reply


def _deploy_button(r: FitReport) -> Button | None:
    """'Plan deploy' through the normal plan -> confirm flow, from a deploy profile serving this model."""
    if r.verdict == "does_not_fit" or not r.gpu.available_on_cloud_run:
        return None
    profiles = [p for p in load_profiles().values() if p.model == r.model.name]
    if not profiles:
        return None
    profile = next((p for p in profiles if p.gpu == r.gpu.name), profiles[0])
    q = r.request
    params = {
        "profile": profile.name,
        "gpu": q.gpu,
        "gpu_count": q.gpu_count,
        "max_model_len": q.max_model_len,
        "gpu_memory_utilization": q.gpu_memory_utilization,
        "kv_cache_dtype": q.kv_cache_dtype,
        "enforce_eager": q.enforce_eager,
        "cpu_offload_gb": q.cpu_offload_gb,
        "memory": f"{r.recommended_memory_gib}Gi",
        "cpu": f"{r.recommended_cpu:g}",
        "max_num_seqs": q.max_num_seqs,  # fit's args and price are for these: the plan renders the same
    }
    return plan_button("deploy", params, label=f"Plan deploy ({profile.name})")


def render_catalog(cat: Catalog) -> Reply:
    reply = Reply(title="Models and GPUs the planner knows")
    models = [
        f"`{m.name}` — {m.quantization}, ~{m.approx_disk_gb:g} GB weights, `{m.hf_repo}`" for m in cat.models.values()
    ]
    reply.add(heading="Models", text="\n".join(models))
    gpus = [
        f"`{g.name}` — {g.memory_gb:g} GB, ${g.price_per_hour_usd:.2f}/h"
        + ("" if g.available_on_cloud_run else " (comparison, not on Cloud Run)")
        for g in cat.gpus.values()
    ]
    reply.add(heading="GPUs", text="\n".join(gpus))
    reply.context = "Try `/gemma fit MODEL --gpu nvidia-l4`"
    return reply


@command(
    "fit",
    "Will a model fit a GPU: memory, KV cache, cold start, cost",
    add_fit_arguments,
    ack="Planning…",
    hint=MODELS_HINT,
)
async def fit(ctx: CommandContext) -> Reply:
    tpu = tpu_request(ctx.opts)
    if tpu is not None:
        return render_tpu_fit(check_tpu_fit(tpu))
    request = namespace_to_request(ctx.opts, COMMANDS["fit"].parser.usage_hint())
    # as a deploy from here would load the weights: from the Hub unless MODEL_BUCKET is set
    report = check_fit(request.model_copy(update={"weights_from_hub": not ctx.deps.settings.model_bucket}))
    service = ctx.deps.settings.vllm_service_name
    try:
        seen = await last_figures(ctx.deps.redis, ctx.deps.settings.key("startup"), service)
    except Exception as exc:  # noqa: BLE001 - the prediction stands on its own
        log.warning(
            "fit: last start-up figures unavailable for %s: %s: %s", service, type(exc).__name__, str(exc)[:200]
        )
        seen = None
    return render_fit(report, (service, seen) if seen is not None else None)


def _accelerator(p: DeployProfile) -> str:
    if p.tpu:
        return f"Cloud TPU {p.tpu}, {p.provisioning}"
    return f"{p.gpu_count} x {p.gpu}" if p.gpu_count > 1 else p.gpu


def render_profiles(profiles: dict[str, DeployProfile]) -> str:
    """One line per deploy profile (skills/data/profiles.yaml): its description, and what it deploys."""
    lines = []
    for p in profiles.values():
        window = f", max-model-len {p.max_model_len}" if p.max_model_len else ""
        about = f" — {p.description}" if p.description else ""
        lines.append(f"`{p.name}`{about} (`{p.model}` on {_accelerator(p)}{window})")
    return "\n".join(lines)


@command("models", "The models, GPUs and deploy profiles behind /gemma fit and deploy", ack="Listing…")
async def models(ctx: CommandContext) -> Reply:
    reply = render_catalog(load_catalog())
    reply.add(heading="Deploy profiles (`/gemma deploy PROFILE`)", text=render_profiles(load_profiles()))
    reply.context = "Try `/gemma fit MODEL --gpu nvidia-l4`, or `/gemma deploy PROFILE --help` for its options"
    return reply

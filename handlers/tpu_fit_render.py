"""`/gemma fit MODEL --tpu v6e-4`: the TPU plan as a reply (the GPU plan's rendering is untouched)."""

from __future__ import annotations

import argparse

from handlers.reply import Reply
from skills.capacity.prices import format_usd
from skills.capacity.tpu_fit import TpuFitReport, TpuFitRequest, refuse_gpu_only
from skills.durations import format_duration
from skills.errors import InvalidInput

_VERDICT = {
    "fits": (":white_check_mark:", "fits"),
    "needs_more_chips": (":large_yellow_circle:", "needs more chips than"),
    "does_not_fit": (":x:", "does NOT fit"),
    "unsupported": (":no_entry:", "is known to fail in vLLM's TPU backend on"),
}


def tpu_request(ns: argparse.Namespace) -> TpuFitRequest | None:
    """The TPU request when --tpu was given; None for a GPU plan. Refuses GPU-only flags with --tpu."""
    if getattr(ns, "tpu", None) is None:
        if getattr(ns, "provisioning", None) is not None:
            raise InvalidInput("`--provisioning` applies to a TPU plan.", "Add `--tpu v6e-4` (or v6e-1, v6e-8).")
        return None
    # Flags that only mean something on a GPU: refused rather than silently ignored (the list: tpu_fit.GPU_ONLY).
    refuse_gpu_only(vars(ns), "with `--tpu`", "A TPU plan takes the slice type only.")
    return TpuFitRequest(
        model=ns.model,
        accelerator_type=ns.tpu,
        max_model_len=ns.max_model_len,
        gpu_memory_utilization=ns.gpu_memory_utilization,
        max_num_batched_tokens=ns.max_num_batched_tokens,
        provisioning=ns.provisioning or "on-demand",
        region=ns.region,
    )


def render_tpu_fit(r: TpuFitReport) -> Reply:
    icon, word = _VERDICT[r.verdict]
    reply = Reply(title=f"{icon} {r.model} {word} {r.accelerator_type} ({r.chips} chip{'s' if r.chips > 1 else ''})")
    if r.unsupported:
        reply.add(heading="Not served on TPU (yet)", text="\n".join(f"• {u}" for u in r.unsupported))
    elif r.support_lines:  # every part's state as its sources state it (tpu.yaml `support`)
        reply.add(heading="TPU support", text="\n".join(f"• {u}" for u in r.support_lines))
    if r.smallest_that_fits:
        reply.add(text=f"Smallest slice that fits: `{r.smallest_that_fits}`.")
    hourly = format_usd(r.hourly_usd, "h")
    idle = (
        f"{hourly}, {format_usd(r.monthly_idle_usd, 'month', places=0)} while ACTIVE, serving or not (no scale to zero)"
        if r.hourly_usd is not None and r.monthly_idle_usd is not None
        else f"bills while ACTIVE; {r.price_source}"
    )
    reply.add(
        fields=[
            (
                "Weights",
                f"{r.weights_gib:g} GiB = {r.weights_per_chip_gib:g} GiB per chip (TP {r.tensor_parallel_size})",
            ),
            ("HBM budget", f"{r.budget_gib:g} GiB for the slice at {r.gpu_memory_utilization:g}"),
            ("KV cache", f"{r.kv_free_gib:g} GiB ({r.kv_per_chip_gib:g} per chip), {r.kv_cache_tokens:,} tokens"),
            ("Concurrency", f"{r.max_concurrency:g} x {r.max_model_len:,}-token sequences (block {r.block_tokens})"),
            ("Cost", f"{hourly} {r.provisioning}" + (f" in {r.price_region}" if r.price_region else "")),
            ("Idle cost", idle),
            (
                "First start",
                f"XLA compiles ~{format_duration(r.compile_s, 'approx')}; ready deadline "
                f"{format_duration(r.readiness_deadline_s, 'approx')}",
            ),
        ]
    )
    if r.problems:
        reply.add(heading="Why not", text="\n".join(f"• {p}" for p in r.problems))
    if r.startup_lines and r.verdict == "fits":
        reply.add(heading="vLLM will print", code="\n".join(r.startup_lines))
    if r.verdict == "fits":
        reply.add(heading="vLLM args", code=" ".join(r.vllm_args))
    if r.notes:
        reply.add(heading="Notes", text="\n".join(f"• {n}" for n in r.notes))
    reply.context = "TPU figures follow vLLM's TPU memory accounting (skills/data/tpu.yaml cites each source)."
    return reply

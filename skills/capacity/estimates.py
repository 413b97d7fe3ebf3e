"""The planner's estimates beside the memory arithmetic: decode speed, CPU, hourly cost, cold start, vLLM args.

Each rests on the catalog's sourced figures; the estimates there say what they rest on."""

from __future__ import annotations

import json

from skills.capacity.aca_prices import aca_price
from skills.capacity.catalog import Catalog, GpuProfile, ModelProfile
from skills.capacity.fit_types import GIB, FitRequest
from skills.capacity.prices import instance_price
from skills.serving.vllm_flags import VllmFlags, kv_flag


def tok_s_estimate(cat: Catalog, m: ModelProfile, g: GpuProfile, r: FitRequest) -> float | None:
    ref_gpu = next(iter(m.measured_tok_s), None)
    if ref_gpu is not None and ref_gpu in cat.gpus:
        # Reported figure, scaled sub-linearly by memory bandwidth (decode is bandwidth-bound).
        ratio = g.bandwidth_gb_s / cat.gpus[ref_gpu].bandwidth_gb_s
        tok = m.measured_tok_s[ref_gpu] * ratio**0.8
    else:
        active_gb = cat.weights_gb(m) * m.active_params_b / m.params_b
        tok = cat.planner.decode_efficiency * g.bandwidth_gb_s * r.gpu_count**0.7 / active_gb
    if r.cpu_offload_gb > 0:
        # Offloaded weights cross PCIe on every forward pass.
        per_tok = 1 / tok + r.cpu_offload_gb * r.gpu_count * GIB / 1e9 / cat.planner.offload_gb_s
        tok = 1 / per_tok
    return round(tok, 1)


def cpu_for(cat: Catalog, g: GpuProfile, memory_gib: float) -> int:
    if g.cloud_run is None:
        return 0
    table = cat.planner.cloud_run.cpu_for_memory
    fitting = [cpu for cpu, max_mem in sorted(table.items()) if max_mem >= memory_gib]
    return max(g.cloud_run.min_cpu, fitting[0] if fitting else g.cloud_run.min_cpu)


def hourly_usd(
    cat: Catalog,
    g: GpuProfile,
    count: int,
    cpu: float,
    memory_gib: float,
    region: str | None = None,
    aca_profile: str | None = None,
) -> float | None:
    """A Cloud Run GPU instance through the one price function; an Azure Container Apps replica through its
    profile's (skills/capacity/aca_prices.py: None when unsourced); comparison GPUs at their quoted all-in price."""
    if g.available_on_cloud_run:
        return round(instance_price(g.name, count, cpu, memory_gib, region).usd_per_hour, 2)
    if aca_profile:
        usd = aca_price(aca_profile, region).usd_per_hour
        return round(usd, 2) if usd is not None else None
    return round(g.price_per_hour_usd * count, 2)


def cold_start_estimate_s(cat: Catalog, m: ModelProfile, r: FitRequest) -> float:
    p = cat.planner
    load = cat.load_s(m)
    return round(p.container_start_s + load + (p.eager_compile_s if r.enforce_eager else p.compile_s))


def vllm_args(m: ModelProfile, r: FitRequest) -> list[str]:
    """The flags the effective config implies, rendered by the same model as a deployed service's."""
    flags = VllmFlags(
        max_model_len=r.max_model_len,
        gpu_memory_utilization=r.gpu_memory_utilization,
        kv_cache_dtype=kv_flag(r.kv_cache_dtype),
        dtype="half" if r.dtype == "half" else "auto",
        enforce_eager=r.enforce_eager,
        cpu_offload_gb=r.cpu_offload_gb,
        tensor_parallel_size=r.gpu_count,
        max_num_seqs=r.max_num_seqs,
        max_num_batched_tokens=r.max_num_batched_tokens,
    )
    args = flags.merged(VllmFlags.parse(m.vllm_args)).to_args()
    if r.limit_mm_per_prompt:  # vLLM takes it as JSON: '{"image": 0, "video": 0}'
        args += ["--limit-mm-per-prompt", json.dumps(r.limit_mm_per_prompt, separators=(",", ":"))]
    return args

"""Will a Gemma 4 model serve on a Cloud TPU v6e slice with vLLM's TPU backend, and what does the slice cost idle?

vLLM's TPU backend (vllm-project/tpu-inference, read at b8692ff0; skills/data/tpu.yaml `sources`) sizes memory
differently from CUDA, and the planner follows it:

  chips        = the slice's chips; vLLM runs one tensor-parallel group over all of them (--tensor-parallel-size)
  budget       = sum over chips of JAX's bytes_limit x --gpu-memory-utilization          (tpu_worker.py)
  used         = what the chips hold after the weights load: the weights, sharded over the chips
  KV free      = budget - used, for the whole slice; <= 0 is vLLM's ValueError "total_hbm_used_gb=... exceeds
                 total_hbm_limit_cap_gb=..." (the model needs more chips)
  KV pages     = per layer, over the whole mesh: 2 x block x KV heads x head_dim x dtype bytes, with head_dim
                 padded to a multiple of 128 and KV heads repeated up to the tensor-parallel size when there are
                 fewer (utils.get_padded_num_heads; a size that neither divides nor is divided by the heads is an
                 assertion, so that slice cannot serve the model)
  block        = 16 tokens above 8,192-token contexts, else next_power_of_2(max_model_len) / 16 in [16, 256]
  groups       = vLLM's own KV-cache grouping (shared with CUDA; skills/capacity/kv_accounting.py)

Outside the budget, XLA's compiled programs need the (1 - utilization) share; a program that does not fit is
"Ran out of memory in memory space hbm" at compile time (skills/diagnosis/analyzers/tpu.py).
Whether the backend serves the model and its quantization comes first, in the state its sources state (tested
upstream, untested upstream, runs in a field report, known to fail; tpu.yaml `support`): only "known to fail" is
refused; the others are warnings with their source. A slice bills while its node is READY and cannot scale to zero:
the idle cost is shown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from skills.capacity import kv_accounting as kva
from skills.capacity.catalog import Catalog, ModelProfile, load_catalog
from skills.capacity.fit_types import GIB
from skills.capacity.tpu_catalog import Provisioning, Support, TpuCatalog, load_tpu_catalog
from skills.errors import InvalidInput

HOURS_PER_MONTH = 730  # Google's monthly pricing convention (skills/data/prices.yaml worked example)
BF16_BYTES = 2


class TpuFitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    accelerator_type: str = "v6e-4"
    max_model_len: int | None = Field(default=None, ge=256)
    gpu_memory_utilization: float | None = Field(default=None, gt=0.1, le=0.99)  # vLLM's flag, HBM share on TPU
    max_num_batched_tokens: int | None = Field(default=None, ge=16)
    provisioning: Provisioning = "on-demand"
    region: str | None = None  # price region; None: the first region with an on-demand rate


class TpuFitReport(BaseModel):
    verdict: str  # fits | needs_more_chips | does_not_fit | unsupported
    model: str
    accelerator_type: str
    chips: int
    tensor_parallel_size: int
    max_model_len: int
    gpu_memory_utilization: float
    weights_gib: float
    weights_per_chip_gib: float
    budget_gib: float  # whole slice
    kv_free_gib: float  # whole slice
    kv_per_chip_gib: float
    block_tokens: int
    kv_cache_tokens: int
    max_concurrency: float
    longest_context: int  # the longest max-model-len one request fits (0: none)
    startup_lines: list[str] = Field(default_factory=list)
    support: list[tuple[str, Support]] = Field(default_factory=list)
    unsupported: list[str] = Field(default_factory=list)  # support_line per part known to fail (refused)
    support_lines: list[str] = Field(default_factory=list)  # support_line per part: its state and source
    problems: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    smallest_that_fits: str | None = None
    chip_hour_usd: float | None = None
    price_source: str = ""
    price_region: str = ""
    provisioning: str = "on-demand"
    hourly_usd: float | None = None  # the whole slice, while ACTIVE, busy or idle
    monthly_idle_usd: float | None = None
    compile_s: int = 0
    readiness_deadline_s: int = 0
    vllm_args: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.verdict == "fits"


# Settings that only mean something on a GPU, by the field name `/gemma fit` and `/gemma deploy` both use: the flag
# as typed and why it has no place on a slice. The TPU plan neither accounts for them nor passes them to vLLM, so
# `fit --tpu` and a TPU deploy plan refuse them (refuse_gpu_only) rather than ignore them silently.
GPU_ONLY: dict[str, tuple[str, str]] = {
    "gpu": ("--gpu", "a slice is chosen by its TPU type, not a GPU"),
    "gpu_count": ("--gpu-count", "a slice's chips come with its TPU type"),
    "cpu_offload_gb": ("--cpu-offload-gb", "the TPU plan does not offload weights to host RAM"),
    "enforce_eager": ("--enforce-eager", "it turns off CUDA graphs; on TPU, XLA compiles the model"),
    "host_memory_gib": ("--memory", "Cloud Run's instance memory; a TPU VM's host comes with its type"),
    "memory": ("--memory", "Cloud Run's instance memory; a TPU VM's host comes with its type"),
    "dtype": ("--dtype", "`half` is for GPUs without bf16; a TPU computes in bf16"),
    "vllm_image": ("--vllm-image", "a CUDA image's KV rules; the TPU plan follows vLLM's TPU backend"),
    "kv_cache_dtype": ("--kv-cache-dtype", "the TPU plan sizes the KV cache in bf16 only"),
}
# Values that ask for nothing a slice lacks (the defaults): not refused.
_HARMLESS: dict[str, object] = {"kv_cache_dtype": "auto", "enforce_eager": False, "cpu_offload_gb": 0}


def gpu_only_flags(values: Mapping[str, object]) -> list[tuple[str, str]]:
    """(flag, why) for each GPU-only setting given in `values` (field name -> value; None: not given)."""
    found: dict[str, str] = {}
    for name, (flag, why) in GPU_ONLY.items():
        value = values.get(name)
        if value is None or (name in _HARMLESS and value == _HARMLESS[name]):
            continue
        found.setdefault(flag, why)
    return list(found.items())


def refuse_gpu_only(
    values: Mapping[str, object], on: str, hint: str, also: list[tuple[str, str]] | None = None
) -> None:
    """InvalidInput naming every GPU-only setting given (and `also`: a caller's own (flag, why) to refuse with
    them), and why each does not apply `on` (e.g. "with `--tpu`"): the one check `/gemma fit --tpu` and a Cloud
    TPU deploy plan (skills/targets/tpu/target.py) share."""
    given = [*gpu_only_flags(values), *(also or [])]
    if not given:
        return
    flags = ", ".join(f"`{flag}`" for flag, _ in given)
    why = given[0][1] if len(given) == 1 else "; ".join(f"`{flag}`: {reason}" for flag, reason in given)
    raise InvalidInput(f"{flags} {'does' if len(given) == 1 else 'do'} not apply {on}: {why}.", hint)


def block_tokens(tpu: TpuCatalog, max_model_len: int) -> int:
    """PallasAttentionBackend.get_page_size (tpu.yaml `page_size`)."""
    acc = tpu.memory_accounting
    if max_model_len > 8192:
        return acc.min_block_tokens
    size = (1 << (max_model_len - 1).bit_length()) // 16
    return max(acc.min_block_tokens, min(acc.max_block_tokens, size))


def padded_heads(heads: int, tp: int) -> int | None:
    """get_padded_num_heads; None where vLLM's assertion fails (neither divides the other)."""
    if heads >= tp:
        return heads if heads % tp == 0 else None
    return tp if tp % heads == 0 else None


def padded_head_dim(tpu: TpuCatalog, head_dim: int) -> int:
    if head_dim == 64:
        return 64
    mult = tpu.memory_accounting.head_dim_multiple
    return math.ceil(head_dim / mult) * mult


def layer_specs(tpu: TpuCatalog, m: ModelProfile, tp: int, block: int) -> dict[str, kva.AttentionSpec] | None:
    """One spec per KV-owning layer, sized over the whole mesh; None when the tensor-parallel size cannot shard
    the model's KV heads."""
    sliding_heads = padded_heads(m.sliding_kv_heads, tp)
    full_heads = padded_heads(m.full_kv_heads, tp)
    if sliding_heads is None or full_heads is None:
        return None
    sliding = kva.AttentionSpec(
        block, sliding_heads, padded_head_dim(tpu, m.sliding_head_dim), BF16_BYTES, sliding_window=m.sliding_window
    )
    full = kva.AttentionSpec(block, full_heads, padded_head_dim(tpu, m.full_head_dim), BF16_BYTES)
    return {f"layers.{i}": full if kind == "full" else sliding for i, kind in enumerate(m.kv_owning_layer_types())}


@dataclass
class _Memory:
    weights: float
    budget: float
    free: float
    block: int
    tokens: int = 0
    concurrency: float = 0.0
    longest: int = 0
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _memory(cat: Catalog, tpu: TpuCatalog, m: ModelProfile, chips: int, mml: int, util: float, mnbt: int) -> _Memory:
    """The slice's memory figures and what blocks it (with numbers)."""
    acc = tpu.memory_accounting
    weights = cat.weights_gb(m) * 1e9 / GIB
    used = weights + acc.overhead_gib_per_chip * chips
    budget = tpu.chip.memory_gib * util * chips
    free = budget - used
    mem = _Memory(weights, budget, max(free, 0.0), block_tokens(tpu, mml))
    if free <= 0:
        mem.problems.append(
            f"weights {weights:.1f} GiB exceed the slice's budget {budget:.1f} GiB "
            f"({chips} x {tpu.chip.memory_gib:g} GiB x {util:g}) by {-free:.1f} GiB: vLLM raises "
            "'total_hbm_used_gb exceeds total_hbm_limit_cap_gb'"
        )
        return mem
    specs = layer_specs(tpu, m, chips, mem.block)
    if specs is None:
        mem.problems.append(
            f"tensor parallel size {chips} cannot shard {m.name}'s KV heads ({m.sliding_kv_heads} sliding, "
            f"{m.full_kv_heads} full): vLLM's get_padded_num_heads asserts"
        )
        return mem
    groups = kva.get_kv_cache_groups(specs)
    limits = kva.Limits(mml, mnbt)
    free_bytes = int(free * GIB)
    kv = kva.kv_cache_config(groups, free_bytes)
    mem.tokens = kva.reported_tokens(kv, limits)
    mem.concurrency = kva.max_concurrency(kv, limits)
    mem.longest = kva.estimate_max_model_len(groups, limits, free_bytes)
    mem.lines = kva.startup_lines(kv, limits)
    needed = kva.needed_bytes(groups, limits)
    if needed > free_bytes:
        mem.problems.append(
            f"one {mml:,}-token request needs {needed / GIB:.2f} GiB of KV cache but {free_bytes / GIB:.2f} GiB "
            f"is free on the slice (the longest that fits is {mem.longest:,} tokens)"
        )
    return mem


def support_line(tpu: TpuCatalog, what: str, s: Support) -> str:
    """'X: <state>: <detail> (source: ...)': the one wording fit, the TPU plan and the sandbox show."""
    return f"{what}: {s.label}" + (f": {s.detail}" if s.detail else "") + f" (source: {tpu.cite(s.source)})"


def _unsupported(tpu: TpuCatalog, support: list[tuple[str, Support]]) -> list[str]:
    """Only what a source shows failing is refused; untested or field-reported parts warn (notes)."""
    return [support_line(tpu, what, s) for what, s in support if s.status == "known_to_fail"]


def _price(tpu: TpuCatalog, req: TpuFitRequest) -> tuple[float | None, float | None, str, str]:
    """(chip-hour rate, slice-hour price, source, region)."""
    region = req.region
    if region is None:
        region = next((r for r, rate in tpu.prices.on_demand.items() if rate.value is not None), "")
    rate, source = tpu.chip_hour_usd(req.provisioning, region)
    hourly, _ = tpu.slice_hour_usd(req.accelerator_type, req.provisioning, region)
    return rate, hourly, source, region


def check_tpu_fit(req: TpuFitRequest, catalog: Catalog | None = None, tpu: TpuCatalog | None = None) -> TpuFitReport:
    """Plan one model on one v6e slice. Raises InvalidInput for an unknown model or accelerator type."""
    cat = catalog or load_catalog()
    tpu = tpu or load_tpu_catalog()
    m = cat.model(req.model)
    acc_name, acc = tpu.accelerator(req.accelerator_type)
    chips = acc.chips
    util = req.gpu_memory_utilization or tpu.memory_accounting.default_gpu_memory_utilization
    mml = req.max_model_len or m.default_max_model_len
    notes: list[str] = []
    if mml > m.max_context:
        notes.append(f"{m.name} supports at most {m.max_context:,} tokens: --max-model-len {m.max_context}.")
        mml = m.max_context
    mnbt = req.max_num_batched_tokens or cat.planner.max_num_batched_tokens
    support = tpu.support_of(m.family, m.quantization)
    unsupported = _unsupported(tpu, support)
    for what, s in support:
        if s.status in ("untested_upstream", "field_report"):
            notes.append(
                f"TPU support of {support_line(tpu, what, s)}: not tested by vLLM's TPU CI; the start may fail."
            )
    mem = _memory(cat, tpu, m, chips, mml, util, mnbt)
    problems = mem.problems
    smallest = None
    if problems and not unsupported:
        for name, other in sorted(tpu.accelerator_types.items(), key=lambda kv: kv[1].chips):
            if other.chips <= chips:
                continue
            if not _memory(cat, tpu, m, other.chips, mml, util, mnbt).problems:
                smallest = name
                break
    if unsupported:
        verdict = "unsupported"
    elif not problems:
        verdict = "fits"
    elif smallest is not None:
        verdict = "needs_more_chips"
    else:
        verdict = "does_not_fit"
    rate, hourly, source, region = _price(tpu, req)
    if hourly is None:
        notes.append(f"No {req.provisioning} price per chip-hour for {region or 'this region'}: {source}.")
    notes.append(f"Weights are split evenly over {chips} chip(s) (estimate: replicated tensors would add to it).")
    args = ["--tensor-parallel-size", str(chips), "--max-model-len", str(mml)]
    if req.gpu_memory_utilization is not None:
        args += ["--gpu-memory-utilization", f"{util:g}"]
    return TpuFitReport(
        verdict=verdict,
        model=m.name,
        accelerator_type=acc_name,
        chips=chips,
        tensor_parallel_size=chips,
        max_model_len=mml,
        gpu_memory_utilization=util,
        weights_gib=round(mem.weights, 2),
        weights_per_chip_gib=round(mem.weights / chips, 2),
        budget_gib=round(mem.budget, 2),
        kv_free_gib=round(mem.free, 2),
        kv_per_chip_gib=round(mem.free / chips, 2),
        block_tokens=mem.block,
        kv_cache_tokens=mem.tokens,
        max_concurrency=round(mem.concurrency, 2),
        longest_context=mem.longest,
        startup_lines=mem.lines,
        support=support,
        unsupported=unsupported,
        support_lines=[support_line(tpu, what, s) for what, s in support],
        problems=problems,
        notes=notes,
        smallest_that_fits=smallest,
        chip_hour_usd=rate,
        price_source=source,
        price_region=region,
        provisioning=req.provisioning,
        hourly_usd=round(hourly, 2) if hourly is not None else None,
        monthly_idle_usd=round(hourly * HOURS_PER_MONTH, 2) if hourly is not None else None,
        compile_s=tpu.startup.compile_s,
        readiness_deadline_s=tpu.startup.readiness_deadline_s,
        vllm_args=args,
    )

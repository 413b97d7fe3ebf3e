"""Capacity planner: will MODEL fit GPU with these vLLM settings, and what does it cost to find out?

Pure arithmetic over the catalog (skills/data/catalog.yaml), fast enough to run on every deploy plan. The
model of vLLM's memory it uses:

  weights      = quantised params x bytes/param + unquantised (embeddings, LM head, vision) params x 2 bytes,
                 minus --cpu-offload-gb, split over --tensor-parallel GPUs
  budget       = CUDA-reported GPU memory x --gpu-memory-utilization       (vLLM never allocates past this)
  overhead     = CUDA context + profiled peak activations + captured CUDA graphs (none with --enforce-eager)
  KV free      = budget - weights - overhead
  KV capacity  = counted the way vLLM's KV-cache manager counts it (skills/capacity/kv_accounting.py): one cache
                 spec per layer from the published config (sliding and full layers differ in KV heads and head dim;
                 KV-shared layers own none), KV-cache groups over one page size, blocks = KV free / (page x
                 group size), and per request every full layer's max-model-len plus every sliding layer's
                 window - 1 + --max-num-batched-tokens. This predicts vLLM's two start-up lines "GPU KV cache
                 size: N tokens" and "Maximum concurrency for L tokens per request: X".
  Outside the budget, CUDA-graph warm-up needs a transient allocation: (1 - util) x memory must cover it, or
  --enforce-eager (field notes: 31B at util 0.95 died allocating 2.62 GiB with 2.15 GiB free).
Host RAM, cold start (weights over GCS FUSE + compile), hourly cost and single-stream tok/s come with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from skills.capacity import kv_accounting as kva
from skills.capacity.aca_catalog import WorkloadProfile, load_aca_catalog
from skills.capacity.aca_prices import aca_price
from skills.capacity.catalog import ACA_PLATFORM, Catalog, GpuProfile, ModelProfile, load_catalog
from skills.capacity.cost import usd_per_m_tokens
from skills.capacity.estimates import cold_start_estimate_s, cpu_for, hourly_usd, tok_s_estimate, vllm_args
from skills.capacity.fit_types import GIB, FitReport, FitRequest, KvDtype, Verdict
from skills.capacity.prices import format_usd, load_prices, region_advice
from skills.capacity.release import assumed_release

__all__ = [
    "Catalog",
    "FitReport",
    "FitRequest",
    "GpuProfile",
    "ModelProfile",
    "check_fit",
    "load_catalog",
]


@dataclass
class _Calc:
    weights_gib: float
    weights_gpu_gib: float  # per GPU after offload
    overhead_gib: float
    budget_gib: float
    kv_free_gib: float  # all GPUs
    bpt: int
    kv_tokens: int
    host_need_gib: float  # the loading peak
    files_gib: float = 0.0  # Hub files on Cloud Run's in-memory filesystem (0: weights from a bucket)
    concurrency: float = 0.0
    kv: kva.KVCacheConfig | None = None
    limits: kva.Limits | None = None
    problems: list[str] = field(default_factory=list)  # blocking, with numbers
    warmup_short: bool = False
    host_short: bool = False
    host_impossible: bool = False


@dataclass
class _Outcome:
    verdict: Verdict
    eff: FitRequest
    calc: _Calc
    changes: list[str]
    notes: list[str]
    warnings: list[str]


# --- arithmetic -------------------------------------------------------------------------------------------


def layer_specs(cat: Catalog, m: ModelProfile, kv_dtype: str, gpu_count: int = 1) -> dict[str, kva.AttentionSpec]:
    """One KV-cache spec per layer that owns a cache, as vLLM's Gemma 4 model builds them (per GPU)."""
    block, dtype = cat.planner.kv_block_tokens, cat.kv_dtypes[kv_dtype]
    heads = max(1, m.sliding_kv_heads // gpu_count)
    sliding = kva.AttentionSpec(block, heads, m.sliding_head_dim, dtype, sliding_window=m.sliding_window)
    full = kva.AttentionSpec(block, max(1, m.full_kv_heads // gpu_count), m.full_head_dim, dtype)
    return {f"layers.{i}": full if kind == "full" else sliding for i, kind in enumerate(m.kv_owning_layer_types())}


def limits_for(cat: Catalog, r: FitRequest) -> kva.Limits:
    """Scheduler limits as the release being deployed counts them (skills/capacity/release.py)."""
    assert r.max_model_len is not None
    mnbt = r.max_num_batched_tokens or cat.planner.max_num_batched_tokens
    batches = assumed_release(r.gpu, r.vllm_image).accounting.concurrent_batches()
    return kva.Limits(r.max_model_len, mnbt, batches)


def aca_profile_of(g: GpuProfile, gpu_count: int = 1) -> WorkloadProfile | None:
    """The Azure Container Apps workload profile a fit on `gpu_count` x `g` runs on (skills/data/aca.yaml), or None
    when `g` is not an ACA GPU or no profile carries that many."""
    if g.platform != ACA_PLATFORM:
        return None
    return load_aca_catalog().default_profile_for(g.name, gpu_count)


def _recommended_memory(g: GpuProfile, need_gib: float, margin: float, gpu_count: int = 1) -> tuple[int, bool]:
    """(Cloud Run memory GiB, possible) for a host-RAM need; on Azure Container Apps, the profile's memory (a
    GPU replica gets the whole profile)."""
    want = need_gib * margin
    prof = aca_profile_of(g, gpu_count)
    if prof is not None:
        return int(prof.memory_gib), need_gib <= prof.memory_gib
    if g.cloud_run is None:
        return max(16, math.ceil(want / 8) * 8), True
    for step in g.cloud_run.memory_steps_gib:
        if step >= want:
            return step, True
    # Within the hard limit but not the margin: the largest size, flagged tight by the caller.
    return g.cloud_run.max_memory_gib, need_gib <= g.cloud_run.max_memory_gib


def compute_memory(cat: Catalog, m: ModelProfile, g: GpuProfile, r: FitRequest) -> _Calc:
    p = cat.planner
    assert r.max_model_len is not None and r.kv_cache_dtype != "auto"
    weights = cat.weights_gb(m, r.limit_mm_per_prompt) * 1e9 / GIB
    weights_gpu = max(weights - r.cpu_offload_gb * r.gpu_count, 0.0) / r.gpu_count
    overhead = p.runtime_overhead_gib + m.activation_gib + (0.0 if r.enforce_eager else p.cuda_graph_gib)
    budget = g.memory_gib * r.gpu_memory_utilization
    free_per_gpu = budget - weights_gpu - overhead
    kv_free = max(free_per_gpu, 0.0) * r.gpu_count
    limits = limits_for(cat, r)
    rules = assumed_release(r.gpu, r.vllm_image).accounting
    groups = kva.get_kv_cache_groups(layer_specs(cat, m, r.kv_cache_dtype, r.gpu_count), rules.hybrid_kv_manager)
    free_bytes = int(max(free_per_gpu, 0.0) * GIB)
    kv = kva.kv_cache_config(groups, free_bytes)
    needed = kva.needed_bytes(groups, limits)
    bpt = math.ceil(needed / r.max_model_len)
    kv_tokens = kva.reported_tokens(kv, limits, rules.kv_report)
    # Loading stages the checkpoint through host RAM (estimate; field notes: a 26B QAT load peaked at 16.8 GiB
    # with ~14.6 GB of weights and loaded in 32 GiB). From a GCS FUSE mount it is the page cache, and offloaded
    # weights then stay pinned in its place. From the Hub the files themselves sit on Cloud Run's in-memory
    # filesystem for the instance's life: safetensors maps those pages, so they are the staging, not a second
    # copy, and offloaded weights are pinned beside them.
    offload = r.cpu_offload_gb * r.gpu_count
    files = m.approx_disk_gb * 1e9 / GIB if r.weights_from_hub else 0.0
    if files:
        host_need = p.host_runtime_gib + max(files, weights) + offload
    else:
        host_need = p.host_runtime_gib + max(weights, offload + 2.0)
    c = _Calc(weights, weights_gpu, overhead, budget, kv_free, bpt, kv_tokens, host_need)
    c.files_gib = files
    c.concurrency, c.kv, c.limits = kva.max_concurrency(kv, limits), kv, limits

    if free_per_gpu <= 0:
        c.problems.append(
            f"weights {weights_gpu:.1f} GiB + overhead {overhead:.1f} GiB exceed the "
            f"{budget:.1f} GiB budget ({g.memory_gib:g} GiB x {r.gpu_memory_utilization:g}) by "
            f"{-free_per_gpu:.1f} GiB: nothing left for the KV cache"
        )
    elif needed > free_bytes:
        longest = kva.estimate_max_model_len(groups, limits, free_bytes)
        c.problems.append(
            f"one {r.max_model_len:,}-token request needs {needed / GIB:.2f} GiB of KV cache but "
            f"{free_bytes / GIB:.2f} GiB is free (vLLM refuses to start; the longest that fits is "
            f"{longest:,} tokens)"
        )
    outside = g.memory_gib * (1 - r.gpu_memory_utilization)
    if not r.enforce_eager and outside < m.graph_warmup_gib:
        c.warmup_short = True
        c.problems.append(
            f"CUDA-graph warm-up needs ~{m.graph_warmup_gib:.1f} GiB outside the budget but only "
            f"{outside:.1f} GiB is left at util {r.gpu_memory_utilization:g}"
        )
    rec_mem, possible = _recommended_memory(g, host_need, p.host_memory_margin, r.gpu_count)
    if not possible:
        c.host_impossible = True
        where = "Cloud Run allows" if g.cloud_run else "the workload profile has"
        c.problems.append(f"loading needs ~{host_need:.1f} GiB host RAM; {where} at most {rec_mem} GiB with {g.name}")
    elif r.host_memory_gib is not None and r.host_memory_gib < host_need:
        c.host_short = True
        c.problems.append(
            f"loading peaks at ~{host_need:.1f} GiB host RAM, above the {r.host_memory_gib:g} GiB "
            "memory limit ('Memory limit ... exceeded')"
        )
    return c


def _fits(c: _Calc) -> bool:
    return not c.problems


def resolve_request(
    cat: Catalog, m: ModelProfile, g: GpuProfile, req: FitRequest
) -> tuple[FitRequest, list[str], list[str]]:
    """Fill defaults; fix settings the GPU/model cannot run at all. Returns (effective, changes, notes)."""
    changes: list[str] = []
    notes: list[str] = []
    upd: dict[str, object] = {"model": m.name, "gpu": g.name}

    dtype = req.dtype
    if not g.bf16 and dtype != "half":
        changes.append("--dtype half")
        notes.append(
            f"{g.name} (compute capability {g.compute_capability:g}) has no bf16: run with `--dtype half` "
            "(fp16 has garbled Gemma tool calls on T4s) or pick a newer GPU."
        )
        dtype = "half"
    elif dtype == "auto":
        dtype = "bfloat16"
    upd["dtype"] = dtype

    act: KvDtype = "fp16" if dtype == "half" else "bf16"
    kv: KvDtype = req.kv_cache_dtype
    if kv == "fp8" and not g.fp8:
        changes.append("--kv-cache-dtype auto")
        notes.append(f"fp8 KV cache is not supported on {g.name}; `auto` keeps it in {act}.")
        kv = act
    elif kv in ("auto", "bf16", "fp16"):
        if kv == "bf16" and dtype == "half":
            notes.append("KV cache follows --dtype half (fp16).")
        kv = act
    upd["kv_cache_dtype"] = kv

    mml = req.max_model_len or m.default_max_model_len
    if mml > m.max_context:
        changes.append(f"--max-model-len {m.max_context}")
        notes.append(f"{m.name} supports at most {m.max_context:,} tokens of context.")
        mml = m.max_context
    upd["max_model_len"] = mml

    q = cat.quantizations[m.quantization]
    if q.min_compute_capability and g.compute_capability < q.min_compute_capability:
        notes.append(
            f"{m.quantization} kernels (Marlin) want compute capability {q.min_compute_capability:g}+; "
            f"{g.name} is {g.compute_capability:g}: expect a slow fallback or a load error."
        )
    return req.model_copy(update=upd), changes, notes


def largest_len(cat: Catalog, m: ModelProfile, g: GpuProfile, r: FitRequest) -> int:
    """Largest max-model-len (multiple of 1024) whose one request fits the KV cache (vLLM's estimate)."""
    length = r.max_model_len or m.default_max_model_len
    c = compute_memory(cat, m, g, r.model_copy(update={"max_model_len": length}))
    if c.kv is None or c.limits is None or not c.kv.groups:
        return 0
    free = c.kv.num_blocks * kva.bytes_per_block(c.kv.groups)
    return kva.estimate_max_model_len(c.kv.groups, c.limits, free) // 1024 * 1024


def _fixes(cat: Catalog, m: ModelProfile, g: GpuProfile, r: FitRequest, c: _Calc) -> list[dict[str, object]]:
    """Candidate setting changes, least intrusive first: fp8 KV, eager mode, both; then a shorter context."""
    p = cat.planner
    simple: list[dict[str, object]] = []
    if g.fp8 and r.kv_cache_dtype != "fp8":
        simple.append({"kv_cache_dtype": "fp8"})
    if not r.enforce_eager:
        simple.append({"enforce_eager": True})
    if len(simple) == 2:
        simple.append({**simple[0], **simple[1]})
    shorter: list[dict[str, object]] = []
    # Eager mode costs decode speed: only shorten the context in eager mode if graphs cannot fit at all.
    for upd in [u for u in [{}, *simple] if c.warmup_short or not u.get("enforce_eager")]:
        length = largest_len(cat, m, g, r.model_copy(update=upd))
        if p.min_useful_max_model_len <= length < (r.max_model_len or 0):
            shorter.append({**upd, "max_model_len": length})
    # Keep as much context as possible: the longest shorter context first, then the fewest changes.
    shorter.sort(key=lambda u: (-int(str(u["max_model_len"])), len(u)))
    result = simple + shorter
    rec_mem, possible = _recommended_memory(g, c.host_need_gib, p.host_memory_margin, r.gpu_count)
    if c.host_short and possible:  # raise the Cloud Run memory limit too
        result = [{**u, "host_memory_gib": float(rec_mem)} for u in [{}, *result]]
    return result


def _describe_changes(before: FitRequest, after: FitRequest) -> list[str]:
    out = []
    if after.kv_cache_dtype != before.kv_cache_dtype and after.kv_cache_dtype == "fp8":
        out.append("--kv-cache-dtype fp8")
    if after.enforce_eager and not before.enforce_eager:
        out.append("--enforce-eager")
    if after.max_model_len != before.max_model_len:
        out.append(f"--max-model-len {after.max_model_len}")
    if after.host_memory_gib != before.host_memory_gib and after.host_memory_gib is not None:
        out.append(f"memory {after.host_memory_gib:g}Gi")
    return out


def _evaluate(cat: Catalog, req: FitRequest) -> _Outcome:
    m, g = cat.model(req.model), cat.gpu(req.gpu)
    eff, changes, notes = resolve_request(cat, m, g, req)
    c = compute_memory(cat, m, g, eff)
    warnings: list[str] = []
    if _fits(c):
        return _Outcome("fits_with_changes" if changes else "fits", eff, c, changes, notes, warnings)
    if not c.host_impossible:
        for upd in _fixes(cat, m, g, eff, c):
            trial = eff.model_copy(update=upd)
            tc = compute_memory(cat, m, g, trial)
            if _fits(tc):
                notes += [f"As asked: {p}." for p in c.problems]
                extra = _describe_changes(eff, trial)
                flags = {x.split()[0] for x in extra}
                kept = [x for x in changes if x.split()[0] not in flags]  # one --max-model-len, the last
                return _Outcome("fits_with_changes", trial, tc, kept + extra, notes, warnings)
    notes += [f"{p[0].upper()}{p[1:]}." for p in c.problems]
    return _Outcome("does_not_fit", eff, c, changes, notes, warnings)


# --- derived figures ---------------------------------------------------------------------------------------


def _hub_note(g: GpuProfile, c: _Calc, memory: float) -> str:
    """What to say of the instance's memory when the weights come from the Hub: the files sit on Cloud Run's
    in-memory filesystem, inside the loading peak compute_memory counts (estimate)."""
    if not c.files_gib or g.platform == ACA_PLATFORM:  # the in-memory filesystem is Cloud Run's
        return ""
    files = c.files_gib
    if c.host_impossible:
        return (
            f":warning: No MODEL_BUCKET: weights pulled from the Hub (~{files:.1f} GiB) land in Cloud Run's "
            f"in-memory filesystem; loading then needs ~{c.host_need_gib:.0f} GiB (estimate), more than {g.name} "
            f"allows ({memory:g} GiB). Set MODEL_BUCKET and serve the weights from GCS instead."
        )
    return (
        f"No MODEL_BUCKET: the ~{files:.1f} GiB of weights pulled from the Hub sit in Cloud Run's in-memory "
        f"filesystem and count in the ~{c.host_need_gib:.0f} GiB loading peak (estimate). A bucket "
        "(MODEL_BUCKET) avoids that and speeds up cold starts."
    )


def _report(cat: Catalog, req: FitRequest, o: _Outcome, with_alternatives: bool) -> FitReport:
    m, g = cat.model(o.eff.model), cat.gpu(o.eff.gpu)
    c, eff = o.calc, o.eff
    p = cat.planner
    assert eff.max_model_len is not None
    # The instance's resources, decided here once: fit shows them, the plan renders them, both price them.
    aca = aca_profile_of(g, eff.gpu_count)
    rec_mem, _ = _recommended_memory(g, c.host_need_gib, p.host_memory_margin, eff.gpu_count)
    memory = eff.host_memory_gib or float(rec_mem)
    hub_note = _hub_note(g, c, memory)
    cpu = eff.cpu or (aca.vcpu if aca is not None else cpu_for(cat, g, memory))
    # Sequences averaging a quarter of max-model-len; Cloud Run concurrency should equal this.
    concurrency = c.concurrency
    rec_seqs = max(1, min(256, int(concurrency * 4)))
    mnbt = eff.max_num_batched_tokens or p.max_num_batched_tokens
    eff = eff.model_copy(
        update={
            "host_memory_gib": memory,
            "max_num_seqs": eff.max_num_seqs or rec_seqs,
            "max_num_batched_tokens": mnbt,
        }
    )
    notes, warnings = list(o.notes), list(o.warnings)
    if hub_note.startswith(":warning:"):
        warnings.append(hub_note.removeprefix(":warning: "))
    elif hub_note:
        notes.append(hub_note)
    tok = tok_s_estimate(cat, m, g, eff)
    if eff.cpu_offload_gb > 0:
        warnings.append(
            f"--cpu-offload-gb {eff.cpu_offload_gb:g}: weights cross PCIe every token, so generation runs at "
            f"~{tok or 0:.1f} tok/s (operators saw 1-2 tok/s). Prefer a model that fits in VRAM."
        )
    if o.verdict != "does_not_fit" and eff.max_num_seqs and eff.max_num_seqs > max(concurrency, 1) * 4:
        notes.append(
            f"--max-num-seqs {eff.max_num_seqs} is far above the {concurrency:.1f} full-length sequences "
            "the KV cache holds: long requests will be preempted."
        )
    if m.vllm_args:
        notes.append(f"This checkpoint needs `{' '.join(m.vllm_args)}`.")
    if g.available_on_cloud_run and eff.gpu_count > 1:
        warnings.append(f"Cloud Run attaches one GPU per instance; {eff.gpu_count} x {g.name} needs another runtime.")
    aca_region = _azure_region(eff.region)
    if g.platform == ACA_PLATFORM:
        cost: float | None = None
        if aca is not None:
            cost = hourly_usd(cat, g, eff.gpu_count, cpu, memory, aca_region, aca.type)
        aca_notes, aca_warnings = _aca_notes(g, aca, eff.gpu_count, aca_region, cost, tok)
        notes += aca_notes
        warnings += aca_warnings
    else:
        cost = hourly_usd(cat, g, eff.gpu_count, cpu, memory, eff.region)
        if not g.available_on_cloud_run:
            notes.append(f"{g.name} is a comparison GPU (not on Cloud Run); price: {g.price_source}.")
    notes += m.notes
    cold = cold_start_estimate_s(cat, m, eff)
    release = assumed_release(eff.gpu, eff.vllm_image)
    notes.append(release.describe())
    if g.available_on_cloud_run:
        advice = region_advice(g.name, eff.region or load_prices().default_region)
        if advice:
            warnings.append(advice)
    report = FitReport(
        verdict=o.verdict,
        weights_gib=round(c.weights_gib, 2),
        overhead_gib=round(c.overhead_gib, 2),
        kv_bytes_per_token=c.bpt,
        kv_cache_tokens=c.kv_tokens,
        kv_cache_gib=round(c.kv_free_gib, 2),
        max_concurrency=round(concurrency, 2),
        kv_blocks=c.kv.num_blocks if c.kv else 0,
        kv_groups=len(c.kv.groups) if c.kv else 0,
        startup_lines=kva.startup_lines(c.kv, c.limits, release.accounting.kv_report) if c.kv and c.limits else [],
        host_memory_gib=round(c.host_need_gib, 1),
        cold_start_s=cold,
        cost_per_hour_usd=cost,
        usd_per_m_tokens=usd_per_m_tokens(cost, tok) if cost is not None and tok else None,
        aca_profile=aca.type if aca is not None else "",
        est_tokens_per_s=tok if o.verdict != "does_not_fit" else None,
        changes=o.changes,
        alternatives=[],
        warnings=warnings,
        notes=notes,
        request=eff,
        requested=req,
        model=m,
        gpu=g,
        budget_gib=round(c.budget_gib, 2),
        vram_after_weights_gib=round(g.memory_gib - c.weights_gpu_gib, 2),
        recommended_memory_gib=math.ceil(memory),
        recommended_cpu=cpu,
        recommended_max_num_seqs=rec_seqs,
        startup_budget_s=int(math.ceil(cold * 1.5 / 60) * 60),
        vllm_args=vllm_args(m, eff),
        vllm_release=release.release,
    )
    if with_alternatives and (o.verdict == "does_not_fit" or eff.cpu_offload_gb > 0):
        report.alternative_requests, report.alternatives = _alternatives(cat, req, o)
    return report


def _azure_region(region: str | None) -> str | None:
    """An Azure location (westus3) from the fit's region; a Cloud Run region (us-central1, hyphenated) is not one."""
    return region if region and "-" not in region else None


def _aca_notes(
    g: GpuProfile,
    prof: WorkloadProfile | None,
    gpu_count: int,
    region: str | None,
    cost: float | None,
    tok: float | None,
) -> tuple[list[str], list[str]]:
    """(notes, warnings) of a fit on an Azure Container Apps GPU: its workload profile, where it is offered, its
    quota, its price per hour and per million output tokens, and what the data says of the GPU, each sourced."""
    aca = load_aca_catalog()
    notes: list[str] = []
    warnings: list[str] = []
    if prof is None:
        counts = sorted({p.gpu_count for p in aca.profiles.values() if p.gpu == g.name})
        warnings.append(
            f"Azure Container Apps has no workload profile with {gpu_count} x {g.name} (profiles carry "
            f"{', '.join(str(n) for n in counts)}; serverless GPU replicas have exactly one GPU: "
            f"{aca.cite('gpu_serverless')}): price unknown."
        )
    else:
        notes.append(
            f"Azure Container Apps workload profile {prof.label} per replica "
            f"({aca.cite(prof.sources['vcpu'])}); offered in {', '.join(prof.regions)} "
            f"({aca.cite(prof.sources['regions'])})."
        )
        if prof.quota_usage:
            notes.append(
                f"GPU quota: usage `{prof.quota_usage}` in {aca.quota.unit} ({aca.quota.api}); {aca.quota.note}."
            )
        if region and not prof.offered_in(region):
            warnings.append(f"{region} does not offer {prof.type}; {', '.join(prof.regions)} do.")
        price = aca_price(prof.type, region, catalog=aca)
        per_m = usd_per_m_tokens(cost, tok) if cost is not None and tok else None
        speed = f" at the planner's single-stream estimate (~{tok:g} tok/s, one stream kept busy)" if tok else ""
        notes.append(f"Price: {price.describe()}; {format_usd(per_m, 'M output tokens')}{speed}.")
    for n in aca.gpu_notes.get(g.name, []):
        notes.append(f"{n.text} (sources: {aca.cite(n.source)}).")
    return notes, warnings


# --- alternatives ------------------------------------------------------------------------------------------


def _candidates(cat: Catalog, req: FitRequest, o: _Outcome) -> list[list[FitRequest]]:
    """Groups of candidate configurations; the first that fits in each group is offered."""
    m, g = cat.model(o.eff.model), cat.gpu(o.eff.gpu)
    keep = req.model_dump(exclude={"model", "gpu", "cpu_offload_gb"})

    def mk(model: str, gpu: str, **upd: object) -> FitRequest:
        return FitRequest(**{**keep, "model": model, "gpu": gpu, **upd})

    lighter = [  # smaller builds of the same model (QAT, fp8) on the same GPU, smallest first
        mk(v.name, g.name)
        for v in sorted(cat.models.values(), key=cat.weights_gb)
        if v.family == m.family and cat.weights_gb(v) < cat.weights_gb(m)
    ]
    bigger = sorted((x for x in cat.gpus.values() if x.memory_gib > g.memory_gib), key=lambda x: x.price_per_hour_usd)
    cloud_run = [mk(m.name, x.name) for x in bigger if x.available_on_cloud_run]
    elsewhere = [mk(m.name, x.name) for x in bigger if not x.available_on_cloud_run]
    fams = {x.family for x in cat.models.values()}
    smaller_fams = sorted(
        (f for f in fams if cat.models[f].params_b < cat.models[m.family].params_b),
        key=lambda f: -cat.models[f].params_b,
    )
    smaller = [  # the largest smaller model, in its lightest build
        mk(min((x for x in cat.models.values() if x.family == f), key=cat.weights_gb).name, g.name)
        for f in smaller_fams
    ]
    offload: list[FitRequest] = []
    c = o.calc
    if req.cpu_offload_gb == 0 and c.weights_gpu_gib > 0:
        # Last resort: move the excess weights (plus room for an 8k-token sequence) to host RAM.
        assert o.eff.max_model_len is not None
        kv_room = c.bpt * min(o.eff.max_model_len, 8192) / GIB
        excess = c.weights_gpu_gib + c.overhead_gib + kv_room - c.budget_gib
        if 0 < excess < c.weights_gpu_gib:
            offload.append(mk(m.name, g.name, cpu_offload_gb=float(math.ceil(excess + 1))))
    return [lighter, cloud_run, smaller, offload, elsewhere]


def _alternatives(cat: Catalog, req: FitRequest, o: _Outcome) -> tuple[list[FitRequest], list[str]]:
    reqs: list[FitRequest] = []
    lines: list[str] = []
    for group in _candidates(cat, req, o):
        for cand in group:
            co = _evaluate(cat, cand)
            if co.verdict == "does_not_fit":
                continue
            r = _report(cat, cand, co, with_alternatives=False)
            how = f" with {' '.join(r.changes)}" if r.changes else ""
            if r.request.cpu_offload_gb:
                how = f" with --cpu-offload-gb {r.request.cpu_offload_gb:g}{how.replace(' with', ',')}"
            slow = " — SLOW: CPU offload" if r.request.cpu_offload_gb else ""
            tok = f", ~{r.est_tokens_per_s:g} tok/s" if r.est_tokens_per_s else ""
            lines.append(
                f"{r.model.name} on {r.gpu.label}{how}: {r.verdict.replace('_', ' ')} — "
                f"{r.kv_cache_tokens:,} KV tokens ({r.max_concurrency:g} x {r.request.max_model_len:,})"
                f"{tok}, {format_usd(r.cost_per_hour_usd, 'h')}{slow}"
            )
            reqs.append(r.request)
            break
    return reqs, lines


def check_fit(req: FitRequest, catalog: Catalog | None = None) -> FitReport:
    """Plan one configuration. Raises InvalidInput for unknown model/GPU names (with close matches)."""
    cat = catalog or load_catalog()
    return _report(cat, req, _evaluate(cat, req), with_alternatives=True)

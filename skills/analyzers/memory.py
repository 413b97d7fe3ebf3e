# ruff: noqa: E501  (remediation prose and log wordings read better unbroken)
"""GPU memory at load, KV cache too small for max-model-len, host memory limit of the container."""

from __future__ import annotations

import re

from skills.diagnose import Finding, ProposedAction, Remediation

from .base import LogView, analyzer, evidence_of, first_seen, rx

_GPU_OOM = rx(
    r"CUDA out of memory",  # torch.OutOfMemoryError / torch.cuda.OutOfMemoryError / RuntimeError wordings
    r"CUDA error: out of memory",
    r"\bOutOfMemoryError\b",
    r"Free memory on device .{0,80} is less than desired GPU memory utilization",
    r"CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation",
    r"\bOOM when allocating tensor",
)
_GRAPH = re.compile(r"captur|cudagraph|CUDA ?graph", re.IGNORECASE)
_TRIED = re.compile(r"Tried to allocate ([\d.]+) ?([GM]i?B)")
_FREE = re.compile(r"of which ([\d.]+) ?([GM]i?B) is free|([\d.]+) ?([GM]i?B) (?:is )?free")


def _gib(num: str, unit: str) -> float:
    return float(num) / (1024 if unit.upper().startswith("M") else 1)


@analyzer("gpu_oom_at_load")
def gpu_oom(view: LogView) -> Finding | None:
    hits = view.grep(*_GPU_OOM)
    if not hits:
        return None
    line, _ = hits[0]
    cfg = view.config_at(line.idx)
    during_graphs = any(view.near(h.idx, _GRAPH) for h, _ in hits)
    detail = ""
    if m := _TRIED.search(line.text):
        detail = f" (tried to allocate {_gib(m.group(1), m.group(2)):.2f} GiB"
        if f := _FREE.search(line.text):
            num, unit = (f.group(1), f.group(2)) if f.group(1) else (f.group(3), f.group(4))
            detail += f", {_gib(num, unit):.2f} GiB free"
        detail += ")"
    util = cfg.get("gpu_memory_utilization")
    actions: list[ProposedAction] = []
    steps: list[str] = []
    if during_graphs and cfg.get("enforce_eager") is not True:
        actions.append(ProposedAction(action="redeploy", params={"enforce_eager": True}, reason="skip CUDA graphs"))
        steps.append("Add `--enforce-eager`: skipping CUDA graph capture saves ~2-3 GB at startup.")
    if isinstance(util, int | float) and util > 0.8:
        lower = round(max(0.8, util - 0.05), 2)
        actions.append(ProposedAction(action="redeploy", params={"gpu_memory_utilization": lower}))
        steps.append(f"Lower `--gpu-memory-utilization` from {util} to {lower}.")
    mml = cfg.get("max_model_len")
    if isinstance(mml, int) and mml > 4096:
        half = max(4096, mml // 2)
        actions.append(ProposedAction(action="redeploy", params={"max_model_len": half}))
        steps.append(f"Lower `--max-model-len` from {mml} to {half}.")
    steps.append(
        "If it still does not fit: a smaller or QAT (w4a16) checkpoint, `--cpu-offload-gb` (slow), or a bigger GPU."
    )
    model = cfg.get("model")
    where = "while capturing CUDA graphs" if during_graphs else "while loading"
    return Finding(
        kind="gpu_oom_at_load",
        title=f"GPU out of memory {where}{detail}" + (f" for {str(model).rsplit('/', 1)[-1]}" if model else ""),
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary="The model and its runtime buffers do not fit in GPU memory at these settings.",
            steps=steps,
            actions=actions,
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )


_KV = rx(
    r"estimated maximum model length is (\d+)",
    r"largest (?:model |sequence |context )?length that (?:fits|can fit)\D{0,20}(\d+)",
    r"larger than the maximum number of tokens that can be stored in KV cache \((\d+)\)",
    r"KV cache is needed, which is larger than the available KV cache memory",
    r"No available memory for the cache blocks",
    r"[Ii]nsufficient (?:GPU )?memory (?:for|to allocate) (?:the )?KV cache",
)
_MAX_SEQ = re.compile(r"max(?:imum)? seq(?:uence)? len(?:gth)? \((\d+)\)|max_model_len \((\d+)\)")


@analyzer("kv_cache_insufficient")
def kv_cache(view: LogView) -> Finding | None:
    hits = view.grep(*_KV)
    if not hits:
        return None
    line, _ = hits[0]
    cfg = view.config_at(line.idx)
    fits: int | None = None
    wanted: int | None = None
    for h, m in hits:
        if m.groups() and m.group(1) and fits is None:
            fits = int(m.group(1))
        if (s := _MAX_SEQ.search(h.text)) and wanted is None:
            wanted = int(s.group(1) or s.group(2))
    wanted = wanted or (cfg.get("max_model_len") if isinstance(cfg.get("max_model_len"), int) else None)
    actions: list[ProposedAction] = []
    steps: list[str] = []
    if fits:
        actions.append(ProposedAction(action="redeploy", params={"max_model_len": fits}, reason="largest that fits"))
        steps.append(f"Lower `--max-model-len` to {fits} (the largest that fits in the KV cache).")
    dtype = str(cfg.get("kv_cache_dtype", "auto"))
    if dtype != "fp8" and not dtype.startswith("fp8"):
        params: dict[str, object] = {"kv_cache_dtype": "fp8"}
        if wanted:
            params["max_model_len"] = wanted
        actions.append(ProposedAction(action="redeploy", params=params, reason="halves KV bytes per token"))
        steps.append("Or use `--kv-cache-dtype fp8` (about twice the tokens in the same memory; L4/H100, not A100).")
    util = cfg.get("gpu_memory_utilization")
    if isinstance(util, int | float) and util < 0.95:
        up = round(min(0.95, util + 0.05), 2)
        actions.append(ProposedAction(action="redeploy", params={"gpu_memory_utilization": up}))
        steps.append(f"Or raise `--gpu-memory-utilization` from {util} to {up}.")
    title = "KV cache too small for --max-model-len"
    if wanted and fits:
        title += f" ({wanted} requested, {fits} fits)"
    return Finding(
        kind="kv_cache_insufficient",
        title=title,
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary="vLLM refused to start: one sequence of the configured length does not fit in the KV cache.",
            steps=steps,
            actions=actions,
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )


_HOST_MEM = rx(
    r"Memory limit of (\d+) ?MiB exceeded(?: with (\d+) ?MiB used)?",
    r"exceeded (?:its |the )?memory limit",
    r"terminated (?:because|due to) (?:it exceeded )?(?:the )?memory limit",
    r"\bOOMKilled\b",
    r"Out of memory: Killed process \d+",
    flags=re.IGNORECASE,
)
_SIZES_MIB = [16384, 24576, 32768]
_CPU_FOR = {16384: "4", 24576: "6", 32768: "8"}  # Cloud Run's minimum vCPU per memory size


@analyzer("container_memory_exceeded")
def host_memory(view: LogView) -> Finding | None:
    hits = [(h, m) for h, m in view.grep(*_HOST_MEM) if "cuda" not in h.text.lower()]
    if not hits:
        return None
    limit = used = None
    for _, m in hits:
        if m.re.pattern.startswith("Memory limit") and m.group(1):
            limit = int(m.group(1))
            used = int(m.group(2)) if m.group(2) else None
            break
    need = max((limit or 16384) * 2, (used or 0) * 1.25)  # field notes: 16 GiB -> 32 GiB for loading
    target = next((s for s in _SIZES_MIB if s >= need), 32768)
    mem = f"{target // 1024}Gi"
    actions = []
    steps = []
    if limit is None or target > limit:
        actions.append(ProposedAction(action="redeploy", params={"memory": mem, "cpu": _CPU_FOR[target]}))
        steps.append(f"Raise the Cloud Run memory limit to {mem} (with {_CPU_FOR[target]} vCPU, Cloud Run's minimum).")
    steps.append(
        "Loading safetensors can peak at ~17 GiB of host RAM for a 26B QAT model; `--safetensors-load-strategy lazy` lowers it."
    )
    title = "Container host memory limit exceeded" + (f" ({limit} MiB)" if limit else "")
    return Finding(
        kind="container_memory_exceeded",
        title=title,
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary="Cloud Run killed the instance for using more host RAM than its memory limit.",
            steps=steps,
            actions=actions,
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )

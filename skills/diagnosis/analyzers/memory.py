"""GPU memory at load, KV cache too small for max-model-len, host memory limit of the container."""

from __future__ import annotations

import re

from skills.diagnosis.analyzers.aca import on_aca
from skills.diagnosis.analyzers.base import Line, LogView, analyzer, evidence_of, first_seen, rx
from skills.diagnosis.analyzers.bounds import mib, service_mib
from skills.diagnosis.findings import Finding, ProposedAction, Remediation

# Sources: PyTorch's caching allocator (c10/cuda/CUDACachingAllocator.cpp: "CUDA out of memory. Tried to allocate
# X. GPU 0 has a total capacity of Y of which Z is free ...", raised as torch.OutOfMemoryError), the CUDA runtime's
# cudaErrorMemoryAllocation / cuBLAS' CUBLAS_STATUS_ALLOC_FAILED, vLLM's own check before it sizes the cache
# (vllm/v1/worker/gpu_worker.py: "Free memory on device ... is less than desired GPU memory utilization").
_GPU_OOM = rx(
    r"CUDA out of memory",  # torch.OutOfMemoryError / torch.cuda.OutOfMemoryError / RuntimeError wordings
    r"CUDA error: out of memory",
    r"\bOutOfMemoryError\b",
    r"Free memory on device .{0,80} is less than desired GPU memory utilization",
    r"CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation",
    r"\bOOM when allocating tensor",
)
# Graph capture itself, not PyTorch's generic OOM advice ("... private pools (e.g., CUDA Graphs)").
_GRAPH = re.compile(r"captur|cudagraph|cuda_graph|CUDA ?graph", re.IGNORECASE)
_GRAPH_ADVICE = re.compile(r"\(e\.g\., CUDA Graphs\)", re.IGNORECASE)
_SAMPLER = re.compile(r"warming up (?:the )?sampler with (\d+) dummy requests")
_TRIED = re.compile(r"Tried to allocate ([\d.]+) ?([GM]i?B)")
_FREE = re.compile(r"of which ([\d.]+) ?([GM]i?B) is free|([\d.]+) ?([GM]i?B) (?:is )?free")


def _gib(num: str, unit: str) -> float:
    return float(num) / (1024 if unit.upper().startswith("M") else 1)


def _graph_near(view: LogView, idx: int) -> bool:
    lo, hi = max(0, idx - 15), min(len(view.lines), idx + 4)
    return any(_GRAPH.search(_GRAPH_ADVICE.sub("", line.text)) for line in view.lines[lo:hi])


def _sampler_oom(view: LogView, hits: list[tuple[Line, re.Match[str]]], seqs: int) -> Finding:
    """vLLM warms its sampler up with --max-num-seqs dummy requests: fewer sequences is the fix, not a smaller
    model (vLLM's message: "Please try lowering `max_num_seqs` or `gpu_memory_utilization`")."""
    lower = max(1, seqs // 2)
    return Finding(
        kind="gpu_oom_at_load",
        title=f"GPU out of memory while warming up the sampler ({seqs} dummy requests = --max-num-seqs)",
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary="vLLM's sampler warm-up for --max-num-seqs requests at once does not fit in GPU memory.",
            steps=[
                f"Lower `--max-num-seqs` from {seqs} to {lower} (and Cloud Run concurrency with it).",
                "Or lower `--gpu-memory-utilization` a little to leave the sampler room outside vLLM's budget.",
            ],
            actions=[
                ProposedAction(
                    action="redeploy", params={"max_num_seqs": lower}, reason="the sampler warm-up is sized by it"
                )
            ],
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )


@analyzer("gpu_oom_at_load")
def gpu_oom(view: LogView) -> Finding | None:
    hits = view.grep(*_GPU_OOM)
    if not hits:
        return None
    line, _ = hits[0]
    cfg = view.config_at(line.idx)
    sampler = next((int(m.group(1)) for h, _ in hits if (m := _SAMPLER.search(h.text))), None)
    if sampler is not None:
        return _sampler_oom(view, hits, sampler)
    during_graphs = any(_graph_near(view, h.idx) for h, _ in hits)
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


# Sources: vLLM's V1 check (vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory: "To serve at least one
# request with the model's max seq len (N), (X GiB KV cache is needed, which is larger than the available KV cache
# memory (Y GiB). Based on the available memory, the estimated maximum model length is M."), the older engine's
# (vllm/worker/worker.py raise_if_cache_size_invalid: "The model's max seq len (N) is larger than the maximum
# number of tokens that can be stored in KV cache (M)" / "No available memory for the cache blocks").
_KV = rx(
    r"estimated maximum model length is (\d+)",
    r"largest (?:model |sequence |context )?length that (?:fits|can fit)\D{0,20}(\d+)",
    r"larger than the maximum number of tokens that can be stored in KV cache \((\d+)\)",
    r"KV cache is needed, which is larger than the available KV cache memory",
    r"To serve at least one request with the models?'s max seq len",
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


# Sources: Cloud Run's system log ("Memory limit of N MiB exceeded with M MiB used. Consider increasing the memory
# limit", https://cloud.google.com/run/docs/configuring/memory-limits), Kubernetes' OOMKilled, the kernel's OOM
# killer ("Out of memory: Killed process"), Ray's memory monitor (ray/_private/memory_monitor).
_HOST_MEM = rx(
    r"Memory limit of ([\d.]+) ?(M|Mi|MiB|G|Gi|GiB)B? exceeded(?: with ([\d.]+) ?(M|Mi|MiB|G|Gi|GiB)B? used)?",
    r"exceeded (?:its |the |their )?(?:allowed )?memory limit",
    r"terminated (?:because|due to) (?:it exceeded )?(?:the )?memory limit",
    r"\bOOMKilled\b",
    r"Out of memory: Killed process \d+",
    # Ray's memory monitor (vLLM with --distributed-executor-backend ray): the host, not the GPU.
    r"killed due to memory pressure",
    r"Ray killed this worker",
    r"which exceeds the memory usage threshold",
    r"killed due to the node running low on memory",
    flags=re.IGNORECASE,
)
_RAY = re.compile(r"memory pressure|Ray killed|memory usage threshold|node running low on memory")
# A SIGKILL alone (exit code 137) is not a memory kill: a probe restart ends the same way, and ACA users saw 137 with
# memory well in range (microsoft/azure-container-apps#1085, #534). With the shell's own "Killed" report of a child
# it is the kernel's OOM killer at work (an ACA replica's start-up build, 'Killed' then "Container 'x' was terminated
# with exit code '137'": a public-viewer incident note, tests/data/aca_logs).
_SHELL_KILLED = re.compile(r"^\W*Killed\s*$")
_EXIT_137 = re.compile(r"terminated with exit code '?137\b")
# Ray: "... was 12.49GB / 13.15GB (0.950003), which exceeds the memory usage threshold"
_RAY_NODE = re.compile(r"was ([\d.]+) ?GB / ([\d.]+) ?GB")
MAX_MIB = 32 * 1024  # Cloud Run's maximum memory per instance
MIN_MIB = 512  # second-generation minimum
# Minimum vCPUs per memory size: more than 4 GiB needs 2, more than 8 needs 4, more than 16 needs 6, more
# than 24 needs 8 (https://cloud.google.com/run/docs/configuring/services/memory-limits).
_CPU_STEPS = ((24 * 1024, 8), (16 * 1024, 6), (8 * 1024, 4), (4 * 1024, 2))


def min_cpu(mem_mib: int) -> int:
    return next((cpu for above, cpu in _CPU_STEPS if mem_mib > above), 1)


def _target_mib(limit: float, used: float) -> int:
    """Twice the limit (loading peaks well above steady state; field notes: 16 GiB -> 32 GiB), at least 1.25x
    what was used, in whole GiB above 1 GiB (512 MiB steps below), within Cloud Run's 512 MiB..32 GiB."""
    need = max(limit * 2, used * 1.25, MIN_MIB)
    step = 1024 if need > 1024 else 512
    return int(min(MAX_MIB, -(-need // step) * step))


def _limit_and_used(view: LogView, hits: list[tuple[Line, re.Match[str]]]) -> tuple[float | None, float]:
    limit: float | None = None
    used = 0.0
    for h, m in hits:
        if m.re.pattern.startswith("Memory limit") and m.group(1):
            limit = mib(m.group(1), m.group(2))
            used = max(used, mib(m.group(3), m.group(4)) if m.group(3) else 0.0)
        elif r := _RAY_NODE.search(h.text):
            used = max(used, float(r.group(1)) * 1000**3 / 1024**2)
            limit = limit or float(r.group(2)) * 1000**3 / 1024**2
    if limit is None and view.service:
        limit = service_mib(view.service.memory)
    return limit, used


@analyzer("container_memory_exceeded")
def host_memory(view: LogView) -> Finding | None:
    hits = [(h, m) for h, m in view.grep(*_HOST_MEM) if "cuda" not in h.text.lower()]
    if not hits and (killed := view.grep(_SHELL_KILLED)) and (exits := view.grep(_EXIT_137)):
        hits = [*killed, *exits]
    if not hits:
        return None
    if on_aca(view):
        return _aca_memory(hits)
    limit, used = _limit_and_used(view, hits)
    actions = []
    steps = []
    if limit is not None:
        target = _target_mib(limit, used)
        if target > limit and target > used:
            mem = f"{target // 1024}Gi" if target % 1024 == 0 else f"{target}Mi"
            params = {"memory": mem}
            cpu = min_cpu(target)
            svc_cpu = view.service.cpu if view.service else ""
            if cpu > 1 and not (svc_cpu.isdigit() and int(svc_cpu) >= cpu):
                params["cpu"] = str(cpu)
            actions.append(ProposedAction(action="redeploy", params=params))
            cpu_note = f" with {params['cpu']} vCPU, Cloud Run's minimum for it" if "cpu" in params else ""
            steps.append(f"Raise the Cloud Run memory limit to {mem}{cpu_note} (it used {used:.0f} MiB).")
        else:
            steps.append("Cloud Run's maximum is 32 GiB: lower the peak instead (below).")
    else:
        steps.append("Raise the Cloud Run memory limit above the current one (the log does not say how much was used).")
    steps.append(
        "For vLLM: loading safetensors can peak at ~17 GiB of host RAM for a 26B QAT model; "
        "`--safetensors-load-strategy lazy` lowers it."
    )
    fmt = f"{limit:.0f} MiB" if limit else ""
    ray = any(_RAY.search(h.text) for h, _ in hits)
    title = "Host memory ran out: Ray killed workers" if ray else "Container host memory limit exceeded"
    return Finding(
        kind="container_memory_exceeded",
        title=title + (f" ({fmt})" if fmt else ""),
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary="The instance was killed for using more host RAM than its memory limit.",
            steps=steps,
            actions=actions,
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )


def _aca_memory(hits: list[tuple[Line, re.Match[str]]]) -> Finding:
    """On Container Apps memory comes with CPU in fixed pairs, and a GPU profile's replica has its profile's memory."""
    return Finding(
        kind="container_memory_exceeded",
        title="Container Apps killed the container for memory (exit code 137)",
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary="The replica's processes used more RAM than the container's memory allocation.",
            steps=[
                "Give the container more memory: `az containerapp update -n APP -g RG --cpu N --memory NGi` "
                "(a pair the workload profile allows; a GPU profile's replica can use up to its profile's memory).",
                "For vLLM: loading safetensors can peak well above steady state; "
                "`--safetensors-load-strategy lazy` lowers it.",
                "Confirm with `az containerapp logs show -n APP -g RG --type system` (ContainerTerminated, "
                "exit code '137') and the app's MemoryPercentage metric (Azure Monitor).",
            ],
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )

"""Cloud TPU failures: HBM out of memory, XLA compiles that outlast the start-up deadline, a model or feature
vLLM's TPU backend does not serve, no capacity in the zone, TPU quota, spot preemption.

Each pattern is a wording seen in real logs (sources next to it). The fix for no capacity or no quota is
another zone or provisioning model that has both: the zone search (skills/targets/tpu, `/gemma tpu zones`)
finds one; where nothing the bot does can help (quota zero everywhere, a model the backend does not serve),
the remediation says so.
"""

from __future__ import annotations

import re

from skills.capacity.image_compat import load_image_data
from skills.diagnosis.analyzers.base import Line, LogView, analyzer, evidence_of, first_seen, rx
from skills.diagnosis.analyzers.lines import READY
from skills.diagnosis.findings import Finding, Remediation

# HBM: XLA's compile-time check ("XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used
# 30.21G of 15.48G hbm. Exceeded hbm capacity by 14.73G.", erfanzar/EasyDeL#142, LargeWorldModel/LWM#60), the
# runtime's reservation failure ("Error loading program: Attempting to reserve 1.04G at the bottom of memory.
# That was not possible. There are 905.37M free", vllm-project/vllm#16521), buffer allocation ("Error allocating
# device buffer: Attempting to allocate 4.39G. That was not possible. There are 2.30G free.; (0x0x0_HBM0)",
# huggingface/diffusers#8358, google-deepmind/gemma#85) and vLLM's TPU worker when the weights leave no room
# ("total_hbm_used_gb=...GiB exceeds total_hbm_limit_cap_gb=...GiB by ...GiB. Please consider increasing
# --gpu-memory-utilization", tpu-inference tpu_inference/worker/tpu_worker.py).
_HBM_COMPILE = re.compile(r"Ran out of memory in memory space hbm\. Used ([\d.]+)([GM]) of ([\d.]+)([GM]) hbm")
_HBM_WEIGHTS = re.compile(r"total_hbm_used_gb=([\d.]+)GiB exceeds total_hbm_limit_cap_gb=([\d.]+)GiB by ([\d.]+)GiB")
_HBM = [
    _HBM_COMPILE,
    _HBM_WEIGHTS,
    re.compile(r"Attempting to reserve [\d.]+[GMK]? at the bottom of memory\. That was not possible"),
    re.compile(r"Error allocating device buffer: Attempting to allocate [\d.]+[GMK]?\. That was not possible.*HBM"),
]

# Compile time: tpu-inference precompiles every padded shape before serving ("Precompile ... -->", "Compilation
# finished in X [secs]", tpu_inference/runner/compilation_manager.py); a start-up check that gave up first says
# "TIMEOUT: Waited 961 seconds (limit was 960). The string 'Application startup complete.' was NOT found."
# (tpu-inference PR #2722: gemma-4-31B spent ~415 s compiling; the check is tests/e2e/benchmarking/bench_utils.sh).
_PRECOMPILE = re.compile(r"\bPrecompile \S|Compilation finished in [\d.]+ \[secs\]|Compiling \w+ with")
_COMPILE_TIMEOUT = rx(
    r"TIMEOUT: Waited \d+ seconds \(limit was \d+\)\. The string 'Application startup complete\.' was NOT found",
)

# Unsupported: Gemma 4 through the torchax path ("AttributeError: 'Tensor' object has no attribute '_elem'" at
# "Precompile input_embeddings_merger", vllm-project/vllm#43239 with image vllm/vllm-tpu:gemma4), and a Gemma 4
# MoE (26B-A4B) whose engine fails on TPU (tpu-inference#2453; its nightly CI skips it on v6e, #2333).
_UNSUPPORTED = rx(r"'Tensor' object has no attribute '_elem'")
_TPU_FRAMES = re.compile(r"tpu_inference/|torchax/")
_ENGINE_FAILED = re.compile(r"EngineCore failed to start|Engine core initialization failed")
_MOE = re.compile(r"gemma-4-26B-A4B", re.IGNORECASE)

# Capacity: 'There is no more capacity in the zone "us-central1-c"; you can try in another zone where Cloud TPU
# Nodes are offered' (hashicorp/terraform-provider-google#21243, thevasudevgupta/gsoc-wav2vec2#11) and reserved
# capacity ("Insufficient reserved capacity. Contact customer support", skypilot-org/skypilot#4579).
_NO_CAPACITY = re.compile(r'There is no more capacity in the zone "?([a-z]+-[a-z]+\d+-[a-z])"?')
_NO_RESERVED = re.compile(r"Insufficient reserved capacity")

# Quota: "Quota 'TPUV5sLitepodServingPerProjectPerZoneForTPUAPI' exhausted. Limit 4 in zone us-central1-a",
# "Quota 'TPUV4sPreemptiblePodPerProjectPerRegionForTPUAPI' exhausted. Limit 20800 in region us-central2"
# (marin-community/marin#87), "Quota limit 'TPUV2sPodPerProjectPerRegionForTPUAPI,...' has been exceeded. Limit:
# 0,0 in region us-central1,zone us-central1-a." (BioMedBERT/biomedbert nohup.out).
_TPU_QUOTA = re.compile(
    r"Quota '(TPU\w+)' exhausted\.(?:\s*Limit (\d+) in (?:zone|region) ([a-z0-9-]+))?"
    r"|Quota limit '(TPU[\w,]+)' has been exceeded\. Limit: ([\d,]+)"
)

# Preemption: the node's state PREEMPTED and its queued resource SUSPENDED (tpu_v2 Node.State /
# QueuedResourceState.State), as `gcloud ... describe` prints them and the TPU target's status lines carry them.
_PREEMPTED = re.compile(r"\bstate\"?:\s*\"?PREEMPTED\b|\bnode \S+ (?:is|was) PREEMPTED\b|\bPREEMPTED\b.*\bspot\b")
_SUSPENDED = re.compile(r"\bstate\"?:\s*\"?SUSPENDED\b|queued resource \S+ (?:is )?SUSPEND(?:ED|ING)\b")


# The limit on its own line, as the error wraps in marin#87's paste.
_LIMIT_LINE = re.compile(r"^\s*()Limit (\d+) in (?:zone|region) ([a-z0-9-]+)")


def _state_lines(view: LogView) -> list[tuple[Line, re.Match[str] | None]]:
    """The service's own state as the TPU target reads it from the API (a queued resource FAILED for capacity or
    quota, SUSPENDED after a preemption): evidence the logs of a node that never ran cannot carry."""
    svc = view.service
    cond = svc.terminal_condition if svc is not None else None
    if cond is None or cond.state != "CONDITION_FAILED":
        return []
    text = f"queued resource {svc.name if svc else ''} {cond.reason}: {cond.message}".strip()
    return [(Line(idx=-1, ts=None, severity="ERROR", text=text), None)]


def _with_state(view: LogView, *patterns: re.Pattern[str]) -> list[tuple[Line, re.Match[str]]]:
    hits = view.grep(*patterns)
    for line, _ in _state_lines(view):
        for rx_ in patterns:
            if (m := rx_.search(line.text)) is not None:
                hits.append((line, m))
                break
    return hits


def _gib(num: str, unit: str) -> float:
    return float(num) / (1024 if unit.upper() == "M" else 1)


@analyzer("tpu_hbm_oom")
def tpu_hbm_oom(view: LogView) -> Finding | None:
    hits = view.grep(*_HBM)
    if not hits:
        return None
    line, _ = hits[0]
    cfg = view.config_at(line.idx)
    util = cfg.get("gpu_memory_utilization")
    if (w := _HBM_WEIGHTS.search(line.text)) is not None:
        title = f"TPU HBM: the weights ({w.group(1)} GiB) exceed vLLM's budget ({w.group(2)} GiB) by {w.group(3)} GiB"
        steps = [
            "The slice has too few chips for this model: `/gemma fit MODEL --tpu v6e-8` names the smallest slice "
            "that fits; redeploy on it (more chips = a larger tensor-parallel group).",
            "Or a smaller model the TPU backend serves (E2B, E4B: `/gemma fit e4b --tpu v6e-1`).",
        ]
        summary = "vLLM's TPU worker found no HBM left for the KV cache after loading the weights."
    else:
        detail = ""
        if (c := _HBM_COMPILE.search(line.text)) is not None:
            detail = f" (XLA needed {_gib(c.group(1), c.group(2)):.1f} GiB of {_gib(c.group(3), c.group(4)):.1f} GiB)"
        title = f"TPU HBM out of memory while compiling or loading{detail}"
        lower = round(max(0.5, float(util) - 0.1), 2) if isinstance(util, int | float) else 0.8
        steps = [
            f"Leave XLA's programs more HBM outside vLLM's budget: `--gpu-memory-utilization {lower}`.",
            "Or a shorter `--max-model-len` / fewer `--max-num-seqs` (smaller padded shapes to compile), "
            "or a slice with more chips.",
        ]
        summary = "A compiled XLA program or buffer did not fit in the HBM left on a chip."
    return Finding(
        kind="tpu_hbm_oom",
        title=title,
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(summary=summary, steps=steps),
        first_seen=first_seen(hits),
        count=len(hits),
    )


@analyzer("tpu_compile_timeout")
def tpu_compile_timeout(view: LogView) -> Finding | None:
    timeouts = view.grep(*_COMPILE_TIMEOUT)
    if not timeouts:
        return None
    compiling = view.grep(_PRECOMPILE)
    # The check's own line quotes the ready message it did not find: it is not the server being ready.
    ready = [ln for ln in view.lines if READY.search(ln.text) and not any(r.search(ln.text) for r in _COMPILE_TIMEOUT)]
    if not compiling or ready:
        return None
    return Finding(
        kind="tpu_compile_timeout",
        title="Start-up gave up while XLA was still compiling (first compiles on TPU take 10-30 minutes)",
        severity="error",
        evidence=evidence_of([*timeouts, compiling[-1]]),
        remediation=Remediation(
            summary="The engine was precompiling its padded shapes when the start-up deadline passed; nothing failed.",
            steps=[
                "Allow the first start up to 30 minutes (tpu-inference raised its own check to 1800 s for "
                "gemma-4-31B): the TPU target's readiness deadline.",
                "Keep XLA's compile cache on a persistent disk so later starts reuse it (tpu-inference logs "
                "'Enabling JAX compile cache.').",
            ],
        ),
        first_seen=first_seen(timeouts),
        count=len(timeouts),
    )


@analyzer("tpu_unsupported")
def tpu_unsupported(view: LogView) -> Finding | None:
    hits = view.grep(*_UNSUPPORTED)
    moe = False
    if not hits:
        failed = view.grep(_ENGINE_FAILED)
        frames = view.grep(_TPU_FRAMES)
        model = next((str(c.get("model", "")) for _, c in view.configs if c.get("model")), "")
        if failed and frames and _MOE.search(model):
            hits, moe = failed, True
    if not hits:
        return None
    if moe:
        title = "Gemma 4 26B-A4B is not served by vLLM's TPU backend yet"
        source = "tpu-inference#2453 (fails to start, open) and its nightly CI skipping it on v6e (#2333)"
    else:
        title = "Gemma 4 failed in vLLM's TPU backend (torchax path): unsupported on TPU (yet)"
        source = "vllm-project/vllm#43239 (E4B on vllm/vllm-tpu:gemma4, 'Tensor' object has no attribute '_elem')"
    return Finding(
        kind="tpu_unsupported",
        title=title,
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary=f"Nothing the bot can change in flags fixes this: the backend does not serve it ({source}).",
            steps=[
                "Serve a model the TPU backend passes on v6e (skills/data/tpu.yaml: E2B, E4B, 31B in bf16) with "
                f"the pinned release image ({load_image_data().tpu.default}), or this model on a GPU target.",
                "`/gemma fit MODEL --tpu v6e-4` says what is supported and why.",
            ],
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )


@analyzer("tpu_no_capacity")
def tpu_no_capacity(view: LogView) -> Finding | None:
    hits = _with_state(view, _NO_CAPACITY, _NO_RESERVED)
    if not hits:
        return None
    zones = sorted({m.group(1) for _, m in hits if m.lastindex})
    where = f" in {', '.join(zones)}" if zones else ""
    return Finding(
        kind="tpu_no_capacity",
        title=f"No TPU capacity{where}",
        severity="error",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary="Cloud TPU has no free v6e capacity for this request in that zone right now.",
            steps=[
                "Another zone or provisioning model with both capacity and quota: `/gemma tpu zones v6e-4` "
                "searches them; redeploy the TPU profile there.",
                "Or keep waiting: a queued resource waits in WAITING_FOR_RESOURCES until capacity frees up.",
            ],
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )


@analyzer("tpu_quota_exceeded")
def tpu_quota_exceeded(view: LogView) -> Finding | None:
    hits = _with_state(view, _TPU_QUOTA)
    if not hits:
        return None
    _, m = hits[0]
    quota = m.group(1) or m.group(4)
    limit = m.group(2) or m.group(5)
    limit_at = next(((x.group(2), x.group(3)) for _, x in view.grep(_LIMIT_LINE) if x), (limit, None))
    limit = limit or limit_at[0]
    where = f" in {m.group(3) or limit_at[1]}" if (m.group(3) or limit_at[1]) else ""
    zero = limit is not None and all(x.strip() == "0" for x in limit.split(",") if x.strip())
    steps = [
        "Another zone or provisioning model with quota (spot uses preemptible quota, on-demand its own): "
        "`/gemma tpu zones v6e-4` reads both per zone from the Cloud Quotas API.",
        "Delete FAILED or SUSPENDED queued resources: they hold quota until deleted.",
        f"Or request more: Console > IAM & Admin > Quotas, service tpu.googleapis.com, quota {quota}.",
    ]
    return Finding(
        kind="tpu_quota_exceeded",
        title=f"TPU quota {quota} exhausted{where}"
        + (f" (limit {limit})" if limit else "")
        + (": none" if zero else ""),
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary="The project's TPU quota does not cover this slice's chips.",
            steps=steps,
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )


@analyzer("tpu_preempted")
def tpu_preempted(view: LogView) -> Finding | None:
    hits = _with_state(view, _PREEMPTED, _SUSPENDED)
    if not hits:
        return None
    return Finding(
        kind="tpu_preempted",
        title="The spot TPU was preempted: its queued resource is SUSPENDED",
        severity="error",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary="Cloud TPU reclaimed the spot slice; a preempted node does not come back on its own.",
            steps=[
                "Delete the suspended queued resource (it still holds quota, skypilot-org/skypilot#1483) and "
                "create it again: the same zone if it has spot capacity, another zone, or on-demand.",
                "On-demand is not preempted; spot is cheaper but can be reclaimed at any time.",
            ],
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )

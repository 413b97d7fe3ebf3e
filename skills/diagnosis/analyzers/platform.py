"""The hardware and the project: bf16 on pre-Ampere GPUs, GPU quota and Cloud Run CPU/memory quota in the region."""

from __future__ import annotations

import re

from skills.diagnosis.analyzers.base import Line, LogView, analyzer, evidence_of, first_seen, rx
from skills.diagnosis.findings import Finding, ProposedAction, Remediation

# Source: vLLM's dtype check (_check_if_gpu_supports_dtype in vllm/worker/worker.py, later vllm/platforms/cuda.py):
# "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute
# capability 7.5. You can use float16 instead ...".
_BF16 = rx(
    r"Bfloat16 is only supported on GPUs with compute capability of at least 8\.0",
    r"(?:bf16|bfloat16|BFloat16)(?: is)? (?:not supported|unsupported)",
    r"does not support (?:bf16|bfloat16)",
    flags=re.IGNORECASE,
)
_GPU_NAME = re.compile(r"Your (.{1,40}?) GPU has compute capability (\d+\.\d+)")


@analyzer("bf16_unsupported")
def bf16(view: LogView) -> Finding | None:
    hits = view.grep(*_BF16)
    if not hits:
        return None
    gpu = next((m for h, _ in hits if (m := _GPU_NAME.search(h.text))), None)
    where = f" on {gpu.group(1)} (compute capability {gpu.group(2)})" if gpu else ""
    return Finding(
        kind="bf16_unsupported",
        title="bfloat16 is not supported by this GPU" + where,
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary="The model's bf16 weights need compute capability 8.0+ (L4, A100, H100); T4 is 7.5.",
            steps=[
                "Start vLLM with `--dtype half` (float16), or deploy on an NVIDIA L4.",
                "On a T4, expect garbled tool calls in fp16: prefer an L4 for tool calling.",
            ],
            actions=[
                ProposedAction(action="redeploy", params={"dtype": "half"}, reason="float16: no bf16 on this GPU")
            ],
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )


# GPU quota wordings by service: Cloud Run's ("Quota exceeded for total allowable count of GPUs", its
# Nvidia*Gpu*PerProjectRegion quota names); Google APIs' 429 RESOURCE_EXHAUSTED "The following quota metrics
# exceed quota limits: <service>/<metric>" when the metric is a GPU one (Vertex AI's
# custom_model_training_nvidia_l4_gpus; field: GoogleCloudPlatform/stable-diffusion-on-gcp#12); Compute Engine's
# "Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 0.0 globally." / "Quota 'NVIDIA_L4_GPUS' exceeded" (field:
# fastai/course-v3#165); GKE's cluster autoscaler event for a GPU pod, "Node scale up in zones ... associated
# with this pod failed: GCE quota exceeded" (field: huggingface/Google-Cloud-Containers#126). Generic
# "Resource has been exhausted (e.g. check quota)" from the Gemini API is a client's rate limit, not GPU quota.
# Azure: ARM's "QuotaExceeded: Operation could not be completed as it results in exceeding approved <quota> quota.
# Additional details - ... Current Limit: N, Current Usage: N, Additional Required: N" when the quota is a GPU one
# (an N-series family, "Standard NCASv3_T4 Family Cores", skypilot-org/skypilot#464; ACA's GPU quota names
# "Managed Environment Consumption NCA100 Gpus" / "... T4 Gpus" and their usage names ManagedEnvironmentConsumption
# NCA100Gpus, SubscriptionConsumptionT4Gpus, learn.microsoft.com/azure/container-apps/gpu-serverless-overview and the
# ACA quota-request code, skills/data/aca.yaml quota_types). A CPU core quota ("Total Regional Cores", "Maximum
# Allowed Cores exceeded for the Managed Environment") is not a GPU quota.
_AZURE_GPU = r"(?:\b(?:NC|ND|NV)\w*|\bGPU|\bGpus?\b|\bT4\b|\bA100\b|NCA100)"
_AZURE_GPU_QUOTA = (
    r"exceeding approved [^.]{0,120}?" + _AZURE_GPU + r"[^.]{0,60}? quota",
    r"\b(?:ManagedEnvironment|Subscription)(?:Consumption)?(?:NCA100|T4)Gpus\b",
    r"Managed Environment Consumption (?:NCA100|T4) Gpus",
)
_AZURE = re.compile(r"exceeding approved|(?:NCA100|T4) ?Gpus\b")
_QUOTA = rx(
    r"Quota exceeded for total allowable count of GPUs",
    r"You do not have quota for using GPUs",
    r"Nvidia\w*Gpu\w*(?:PerProject|Quota)\w*",
    r"[Qq]uota (?:exceeded|violated|limit reached).{0,200}(?:GPU|gpu|nvidia|Nvidia)",
    r"(?:GPU|gpu|nvidia|Nvidia).{0,200}[Qq]uota (?:exceeded|violated)",
    r"[Ii]nsufficient (?:GPU|nvidia-l4) quota",
    r"quota metrics exceed quota limits:\s*[\w./-]*(?:gpu|GPU)",
    r"Quota '(?:GPUS_ALL_REGIONS|\w*(?:NVIDIA|GPU)\w*)' exceeded",
    r"(?:[Ss]cale[- ]up|Node scale up).{0,200}GCE quota exceeded",
    *_AZURE_GPU_QUOTA,
)
# Which quota it is decides the fix: only Cloud Run's is the service's own.
_OTHER_QUOTA = re.compile(r"quota metrics exceed quota limits|Quota '\w+' exceeded|GCE quota exceeded")


_ALLOWED = re.compile(r"requested:? (\d+),? allowed:? (\d+)", re.IGNORECASE)


def _quota_scale(view: LogView, hits: list[tuple[Line, re.Match[str]]]) -> tuple[ProposedAction, str] | None:
    """Fewer instances when that fits the quota: the quota's GPU count if the error states it, else one
    instance when the running service allows more. A region or a quota request is a human's call."""
    svc = view.service
    allowed = next((int(m.group(2)) for h, _ in hits if (m := _ALLOWED.search(h.text))), None)
    per_instance = max(svc.gpu_count, 1) if svc else 1
    if allowed is not None:
        target = allowed // per_instance
    elif svc and svc.max_instances > 1:
        target = 1
    else:
        return None
    if target < 1 or (svc and svc.max_instances and svc.max_instances <= target):
        return None
    low = min(svc.min_instances if svc else 0, target)
    action = ProposedAction(
        action="scale", params={"min_instances": low, "max_instances": target}, reason="stay within the GPU quota"
    )
    gpus = target * per_instance
    return action, f"Or cap the service at {target} instance(s) ({gpus} GPU(s)) to stay within the quota."


@analyzer("gpu_quota_exceeded")
def gpu_quota(view: LogView) -> Finding | None:
    hits = view.grep(*_QUOTA)
    if not hits:
        return None
    if all(_AZURE.search(h.text) for h, _ in hits):
        return _azure_gpu_quota(hits)
    if all(_OTHER_QUOTA.search(h.text) for h, _ in hits):
        return Finding(
            kind="gpu_quota_exceeded",
            title="GPU quota exceeded (Compute Engine / GKE / Vertex AI quota, not Cloud Run's)",
            severity="critical",
            evidence=evidence_of(hits),
            remediation=Remediation(
                summary="The project has no GPU quota left for the service that asked (the quota the error names).",
                steps=[
                    "Request the quota the error names: Console > IAM & Admin > Quotas, filtered by that metric "
                    "and region.",
                    "Or use a region or GPU type with quota. Cloud Run GPUs have their own quota "
                    "(service 'Cloud Run Admin API').",
                ],
            ),
            first_seen=first_seen(hits),
            count=len(hits),
        )
    steps = [
        "Request quota: Console > IAM & Admin > Quotas, service 'Cloud Run Admin API', "
        "'Total Nvidia L4 GPU allocation without zonal redundancy, per project per region'.",
        "Deploy with `--no-gpu-zonal-redundancy` (that quota is easier to get), or in a region with quota.",
    ]
    actions = []
    if scale := _quota_scale(view, hits):
        actions.append(scale[0])
        steps.append(scale[1])
    return Finding(
        kind="gpu_quota_exceeded",
        title="Deploy refused: no Cloud Run GPU quota in this region",
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary="The project lacks Cloud Run L4 GPU quota in the region (Cloud Run's quota, not Compute Engine's).",
            steps=steps,
            actions=actions,
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )


_AZURE_QUOTA_NAME = re.compile(r"exceeding approved (.{1,80}?) quota|\b((?:ManagedEnvironment|Subscription)\w*Gpus)\b")
_AZURE_LIMIT = re.compile(r"Current Limit: (\d+), Current Usage: (\d+), Additional Required: (\d+)")


def _azure_gpu_quota(hits: list[tuple[Line, re.Match[str]]]) -> Finding:
    name = next((m.group(1) or m.group(2) for h, _ in hits if (m := _AZURE_QUOTA_NAME.search(h.text))), "")
    nums = next((m for h, _ in hits if (m := _AZURE_LIMIT.search(h.text))), None)
    detail = f" (limit {nums.group(1)}, in use {nums.group(2)}, {nums.group(3)} more needed)" if nums else ""
    return Finding(
        kind="gpu_quota_exceeded",
        title=f"Azure refused the deploy for GPU quota: {name or 'GPU quota'}{detail}",
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary="The subscription or environment has no GPU quota left for this in the region (Azure's quota, "
            "per region; serverless GPUs count per managed environment).",
            steps=[
                "See what is used: `az containerapp env list-usages -n ENV -g RG` "
                "(ManagedEnvironmentConsumptionNCA100Gpus, ...T4Gpus); a zero may be another region's "
                "(the field write-up's West Europe, which has no A100).",
                "Request more: Azure portal, Quotas, provider Azure Container Apps ('Managed Environment "
                "Consumption NCA100 Gpus' or '... T4 Gpus'), or a support request of type 'Service and "
                "subscription limits (quotas)'.",
                "Or lower min replicas, or deploy in a region whose quota is free "
                "(`az containerapp env list-usages` there).",
            ],
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )


# Cloud Run's own CPU / memory quota per project and region (GPU quota is gpu_quota_exceeded). Wordings: the
# quota names in "Quota violated:", "Max instances must be set to N or fewer to set the requested total
# CPU|memory", "Invalid value specified for cpu|memory. For the specified value, maxScale may not exceed N".
_CR_QUOTA = rx(
    r"\b(?:Cpu|Mem)AllocPerProjectRegion\b",
    r"Max instances must be set to \d+ or fewer to set the requested total (?:CPU|memory)",
    r"Invalid value specified for (?:cpu|memory)\. For the specified value, maxScale may not exceed \d+",
)
_MAX_SCALE = re.compile(r"must be set to (\d+) or fewer|maxScale may not exceed (\d+)")
_ALLOC = re.compile(r"(Cpu|Mem)AllocPerProjectRegion requested:? (\d+)\s*allowed:? (\d+)")


def _amount(kind: str, value: int) -> str:
    # CPU quota counts milli-vCPU, memory quota bytes (codelab: 3 x 20 vCPU -> 60000; 3 x 80 GiB -> 257698037760).
    return f"{value / 1000:g} vCPU" if kind == "Cpu" else f"{value / 1024**3:g} GiB"


@analyzer("cloud_run_quota_exceeded")
def cloud_run_quota(view: LogView) -> Finding | None:
    hits = view.grep(*_CR_QUOTA)
    if not hits:
        return None
    cap = next((int(m.group(1) or m.group(2)) for h, _ in hits if (m := _MAX_SCALE.search(h.text))), None)
    shortfalls: list[tuple[str, str, str]] = []
    for h, _ in hits:
        joined = " ".join(x.text for x in view.lines[h.idx : h.idx + 2])
        if (m := _ALLOC.search(joined)) and m.group(1) not in [s[0] for s in shortfalls]:
            shortfalls.append((m.group(1), _amount(m.group(1), int(m.group(2))), _amount(m.group(1), int(m.group(3)))))
    what = ", ".join(f"{'CPU' if k == 'Cpu' else 'memory'}: {req} requested, {ok} allowed" for k, req, ok in shortfalls)
    steps = [
        "Lower the per-instance CPU / memory, or max instances, so instances x size fits the regional quota.",
        "Or request more: Console > IAM & Admin > Quotas, service 'Cloud Run Admin API', the CPU / memory allocation "
        "quota per project per region; or deploy in a region with quota.",
    ]
    actions = []
    svc = view.service
    if cap is not None and cap >= 1 and not (svc and svc.max_instances and svc.max_instances <= cap):
        low = min(svc.min_instances if svc else 0, cap)
        actions.append(
            ProposedAction(
                action="scale", params={"min_instances": low, "max_instances": cap}, reason="stay within the quota"
            )
        )
        steps.insert(0, f"Cloud Run accepts at most {cap} instance(s) at this size: cap max instances at {cap}.")
    return Finding(
        kind="cloud_run_quota_exceeded",
        title="Deploy refused: Cloud Run CPU/memory quota in this region" + (f" ({what})" if what else ""),
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary="The project's Cloud Run CPU or memory quota in the region is smaller than max instances x "
            "the per-instance size.",
            steps=steps,
            actions=actions,
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )

"""What a Cloud Run service spec runs, read back from its v2 JSON for the planner (start-up comparison)."""

from __future__ import annotations

from typing import Any

from skills.capacity.fit_types import FitRequest, ServingSummary
from skills.serving.vllm_flags import VllmFlags
from skills.targets.cloud_run.plan_redeploy import effective_settings, model_of, probe_budget
from skills.targets.cloud_run.render import main_container


def serving_of(spec: dict[str, Any]) -> ServingSummary | None:
    """The image, the configuration as the planner reads it and the startup probe's budget; None when the
    spec does not run a catalog model with flags the model can read."""
    container = main_container(spec)
    flags = VllmFlags.parse_or_none([str(a) for a in container.get("args") or []])
    model = model_of(spec, flags)
    if model is None or flags is None:
        return None
    o = effective_settings(spec, container)
    req = FitRequest(
        model=model,
        gpu=o["gpu"],
        gpu_count=o["gpu_count"],
        max_model_len=o.get("max_model_len"),
        gpu_memory_utilization=o.get("gpu_memory_utilization", 0.90),
        kv_cache_dtype=o.get("kv_cache_dtype", "auto"),
        cpu_offload_gb=o.get("cpu_offload_gb", 0.0),
        enforce_eager=o["enforce_eager"],
        max_num_seqs=o.get("max_num_seqs"),
        dtype=o["dtype"],
        max_num_batched_tokens=o.get("max_num_batched_tokens"),
    )
    return ServingSummary(image=str(container.get("image", "")), fit=req, startup_budget_s=probe_budget(container))

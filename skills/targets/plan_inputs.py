"""What every target's write-plan builders share: parameter validation and the capacity planner's figures.

Nothing here knows a serving target: the planner reasons about the model, its GPU and vLLM's flags.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from skills.capacity.fit import FitReport, FitRequest, check_fit
from skills.capacity.prices import format_usd
from skills.capacity.release import assumed_release
from skills.errors import InvalidInput, explain_validation
from skills.serving.sizes import gib

ActionKind = Literal["deploy", "redeploy", "scale", "rollback", "destroy", "promote"]


def validate_params(model: type[BaseModel], params: dict[str, Any], kind: str) -> Any:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise InvalidInput(f"Invalid {kind} parameters: {explain_validation(exc, flag_style=False)}") from None


def as_text(x: Any) -> str:
    if isinstance(x, str):
        return x
    for attr in ("summary", "description", "text", "reason"):
        val = getattr(x, attr, None)
        if isinstance(val, str) and val:
            return val
    return str(x)


def fit_lines(r: FitReport) -> list[str]:
    speed = f"~{r.est_tokens_per_s:.0f} tok/s single stream" if r.est_tokens_per_s else "no speed estimate"
    return [
        f"weights {r.weights_gib:.1f} GiB + overhead {r.overhead_gib:.1f} GiB on {r.request.gpu_count} x {r.gpu.name}",
        f"KV cache {r.kv_cache_tokens:,} tokens = {r.max_concurrency:g} full sequences at max-model-len "
        f"{r.request.max_model_len or 0:,}",
        f"host RAM to load {r.host_memory_gib:.1f} GiB; cold start ~{r.cold_start_s / 60:.0f} min",
        f"{format_usd(r.cost_per_hour_usd, 'h', approx=True)}; {speed}",
    ]


def fit_for(model: str, o: dict[str, Any], memory: str | None) -> FitReport:
    return check_fit(
        FitRequest(
            model=model,
            gpu=o["gpu"],
            gpu_count=o.get("gpu_count", 1),
            max_model_len=o.get("max_model_len"),
            # absent (a service deployed without the flag): what that image's vLLM defaults to
            gpu_memory_utilization=o.get("gpu_memory_utilization")
            or assumed_release(o["gpu"], o.get("vllm_image")).accounting.gpu_memory_utilization_default,
            kv_cache_dtype=o.get("kv_cache_dtype", "auto"),
            cpu_offload_gb=o.get("cpu_offload_gb", 0) or 0,
            enforce_eager=bool(o.get("enforce_eager", False)),
            host_memory_gib=gib(memory) if memory else None,
            cpu=float(o["cpu"]) if o.get("cpu") else None,
            weights_from_hub=o.get("weights_from_hub", True),
            max_num_seqs=o.get("max_num_seqs"),
            vllm_image=o.get("vllm_image"),  # the image being deployed: its release's KV accounting
            region=o.get("region"),  # where it deploys: prices and GPU availability
        )
    )

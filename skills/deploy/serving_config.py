"""The serving configuration every target shares: the model, its accelerator, vLLM's flags and the instance
range, resolved from a profile, the overrides and the capacity planner's figures. A target adds what only it
asks for (Cloud Run: CPU and memory sizes, the startup probe, the launch stage; skills/targets/cloud_run/render.py).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from skills.capacity.fit_types import FitRequest
from skills.capacity.image_compat import load_image_data
from skills.deploy.profiles import KvDtype
from skills.deploy.vllm_flags import VllmFlags, kv_flag

# Where a bucket's weights are mounted read-only in the serving container.
MOUNT_PATH = "/mnt/models"


class ServingConfig(BaseModel):
    """A resolved deployment, as the planner and VllmFlags reason about it."""

    model_config = ConfigDict(extra="forbid")

    service: str
    profile: str = ""
    model: str  # catalog name
    hf_repo: str
    model_args: list[str] = Field(default_factory=list)  # from the catalog, e.g. --quantization compressed-tensors
    gpu: str
    gpu_count: int = 1
    max_model_len: int
    gpu_memory_utilization: float
    kv_cache_dtype: KvDtype = "auto"
    dtype: str = "auto"  # vLLM --dtype; "half" on GPUs without bf16
    enforce_eager: bool = False
    cpu_offload_gb: float = 0
    max_num_seqs: int
    max_num_batched_tokens: int = 4096  # the capacity planner's figure (sliding-window KV reservations)
    min_instances: int = 0
    max_instances: int = 1
    image: str
    model_bucket: str | None = None
    hf_token_secret: str = "hf-token"

    @property
    def model_dir(self) -> str:
        # Weights are expected under the repo's own folder name (as `hf download` lays them out).
        return self.hf_repo.rsplit("/", 1)[-1]

    @property
    def model_path(self) -> str:
        return f"{MOUNT_PATH}/{self.model_dir}" if self.model_bucket else self.hf_repo


class ServingSummary(BaseModel):
    """What a deployed spec runs, as the planner reads it back (a target reads its own spec into this)."""

    image: str
    fit: FitRequest  # the model, accelerator and vLLM settings, for a re-plan
    startup_budget_s: int = 0  # how long the target lets the server start before giving up on it


def serving_flags(cfg: ServingConfig, port: int) -> VllmFlags:
    """The vLLM flags a resolved deployment runs with (listening on `port`), the catalog's checkpoint flags
    merged in."""
    flags = VllmFlags(
        model=cfg.model_path,
        host="0.0.0.0",
        port=port,
        max_model_len=cfg.max_model_len,
        gpu_memory_utilization=cfg.gpu_memory_utilization,
        kv_cache_dtype=kv_flag(cfg.kv_cache_dtype),
        max_num_seqs=cfg.max_num_seqs,
        enable_chunked_prefill=True,
        max_num_batched_tokens=cfg.max_num_batched_tokens,
        dtype="half" if cfg.dtype == "half" else "auto",
        tensor_parallel_size=cfg.gpu_count,
        enforce_eager=cfg.enforce_eager,
        cpu_offload_gb=cfg.cpu_offload_gb,
    )
    return with_tool_calling(flags, True).merged(VllmFlags.parse(cfg.model_args))


def with_tool_calling(flags: VllmFlags, on: bool) -> VllmFlags:
    """Tool calling and reasoning as vLLM's Gemma 4 recipe configures them (skills/data/vllm_images.yaml):
    the gemma4 parsers and the recipe's chat template, which the official image ships under /vllm-workspace.
    Off removes all of them."""
    serving = load_image_data().serving
    return flags.with_(
        enable_auto_tool_choice=True if on else None,
        tool_call_parser=serving.tool_call_parser if on else None,
        reasoning_parser=serving.reasoning_parser if on else None,
        chat_template=serving.chat_template if on else None,
    )

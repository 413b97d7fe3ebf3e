"""The serving configuration every target shares: the model, its accelerator, vLLM's flags and the instance
range, resolved from a profile, the overrides and the capacity planner's figures. A target adds what only it
asks for (Cloud Run: CPU and memory sizes, the startup probe, the launch stage; skills/targets/cloud_run/render.py).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from skills.serving.profiles import KvDtype

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

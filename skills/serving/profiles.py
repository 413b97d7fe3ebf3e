"""Deploy profiles (skills/data/profiles.yaml): named starting points for `/gemma deploy PROFILE`."""

from __future__ import annotations

import difflib
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from skills.errors import InvalidInput

PROFILES_FILE = Path(__file__).parents[1] / "data" / "profiles.yaml"

KvDtype = Literal["auto", "fp8", "bf16", "fp16"]  # as the capacity planner names them
# The serving target a profile deploys to when it names none (skills/targets/registry.py resolves the name).
DEFAULT_TARGET = "cloud-run"


class DeployProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = ""
    description: str = ""
    model: str  # a catalog model name (skills/capacity/fit.py)
    target: str = Field(default=DEFAULT_TARGET, pattern=r"^[a-z][a-z0-9-]*$")  # where it is served
    gpu: str = "nvidia-l4"
    gpu_count: int = Field(default=1, ge=1, le=8)
    max_model_len: int | None = Field(default=None, ge=256)
    gpu_memory_utilization: float = Field(default=0.90, gt=0.1, le=0.99)
    kv_cache_dtype: KvDtype = "auto"
    enforce_eager: bool = False
    cpu_offload_gb: float = Field(default=0, ge=0)
    max_num_seqs: int = Field(default=8, ge=1, le=1000)
    min_instances: int = Field(default=0, ge=0)
    max_instances: int = Field(default=1, ge=1)
    cpu: str | None = None
    memory: str | None = None
    # A pinned image for this profile; unset = the GPU's default from skills/data/vllm_images.yaml.
    image: str | None = None
    # Cloud TPU profiles (target: cloud-tpu): the v6e slice and how it is provisioned (skills/data/tpu.yaml).
    tpu: str | None = Field(default=None, pattern=r"^v6e-\d+$")
    provisioning: Literal["on-demand", "spot", "reserved"] = "on-demand"


@lru_cache(maxsize=4)
def load_profiles(path: Path = PROFILES_FILE) -> dict[str, DeployProfile]:
    data = yaml.safe_load(path.read_text()) or {}
    return {name: DeployProfile(name=name, **body) for name, body in (data.get("profiles") or {}).items()}


def get_profile(name: str, path: Path = PROFILES_FILE) -> DeployProfile:
    profiles = load_profiles(path)
    if name in profiles:
        return profiles[name]
    close = difflib.get_close_matches(name, list(profiles), n=3, cutoff=0.4)
    hint = f"Did you mean {', '.join(f'`{c}`' for c in close)}? " if close else ""
    raise InvalidInput(
        f"Unknown deploy profile `{name}`.",
        hint + "Known profiles: " + ", ".join(f"`{p}`" for p in sorted(profiles)) + ".",
    )

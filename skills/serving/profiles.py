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
    # Azure Container Apps profiles (target: azure-container-apps): the GPU workload profile type the app runs on
    # (skills/data/aca.yaml); unset, the GPU's serverless profile. Checked against aca.yaml when profiles load.
    aca_profile: str | None = None


def _check_aca_profile(p: DeployProfile) -> None:
    """An `aca_profile` must be a workload profile aca.yaml knows, carrying the profile's GPU and GPU count."""
    if p.aca_profile is None:
        return
    # Read here, not at import: the serving floor only reads the data file (skills/README.md floors).
    data = yaml.safe_load((Path(__file__).parents[1] / "data" / "aca.yaml").read_text()) or {}
    known = data.get("profiles") or {}
    wp = known.get(p.aca_profile)
    if wp is None:
        raise ValueError(f"profile {p.name}: unknown aca_profile {p.aca_profile!r} (known: {', '.join(known)})")
    if wp.get("gpu") != p.gpu or wp.get("gpu_count") != p.gpu_count:
        raise ValueError(
            f"profile {p.name}: {p.aca_profile} carries {wp.get('gpu_count')} x {wp.get('gpu')}, "
            f"not {p.gpu_count} x {p.gpu}"
        )


@lru_cache(maxsize=4)
def load_profiles(path: Path = PROFILES_FILE) -> dict[str, DeployProfile]:
    data = yaml.safe_load(path.read_text()) or {}
    profiles = {name: DeployProfile(name=name, **body) for name, body in (data.get("profiles") or {}).items()}
    for p in profiles.values():
        _check_aca_profile(p)
    return profiles


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

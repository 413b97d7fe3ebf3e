"""Where deploys go and what they pull: the handful of settings the deploy skills need, as one typed value."""

from __future__ import annotations

from pydantic import BaseModel


class DeployEnv(BaseModel):
    service: str  # the default service name
    region: str
    project: str | None = None
    image: str | None = None  # VLLM_IMAGE: overrides the per-GPU default (skills/data/vllm_images.yaml)
    model_bucket: str | None = None
    hf_token_secret: str = "hf-token"
    service_account: str | None = None  # VLLM_SERVICE_ACCOUNT: the vLLM service's runtime identity
    metrics_sidecar: bool = False  # VLLM_METRICS_SIDECAR: deploys add the Managed Service for Prometheus sidecar

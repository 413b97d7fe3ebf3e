"""Where deploys go and what they pull: the handful of settings the deploy skills need, as one typed value."""

from __future__ import annotations

from pydantic import BaseModel


class DeployEnv(BaseModel):
    service: str  # the default service name
    region: str
    project: str | None = None
    image: str
    model_bucket: str | None = None
    hf_token_secret: str = "hf-token"

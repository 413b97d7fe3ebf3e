"""What a Cloud Run service spec needs to exist before it is applied, read from its v2 JSON (for preflight)."""

from __future__ import annotations

from typing import Any

from skills.capacity.fit import load_catalog
from skills.targets.cloud_run.plan_common import container_flags
from skills.targets.cloud_run.plan_redeploy import model_of
from skills.targets.cloud_run.render import gcs_mounts, main_container, secret_env_of
from skills.targets.env import DeployEnv
from skills.targets.preflight_check import PreflightTarget


def target_of(spec: dict[str, Any], env: DeployEnv) -> PreflightTarget:
    """The checkpoint (Hub id, or bucket folder under a GCS mount), image, GPU and scaling a spec runs with."""
    container = main_container(spec)
    flags = container_flags(container)
    model = model_of(spec, flags)
    path = flags.model_path or ""
    template = spec.get("template") or {}
    hf_repo = bucket = None
    prefix = ""
    if path.startswith("/"):
        for volume, mount in gcs_mounts(spec, container):
            root = mount.rstrip("/") + "/"
            if path.startswith(root):
                bucket = str(volume["gcs"].get("bucket", ""))
                prefix = path[len(root) :].strip("/") + "/"
    elif path:
        hf_repo = path
    return PreflightTarget(
        image=str(container.get("image", "")),
        model=model,
        family=load_catalog().model(model).family if model else None,
        hf_repo=hf_repo,
        bucket=bucket,
        prefix=prefix,
        gpu=str((template.get("nodeSelector") or {}).get("accelerator") or "nvidia-l4"),
        region=env.region,
        project=env.project,
        max_instances=int((template.get("scaling") or {}).get("maxInstanceCount") or 1),
        # the secret the service's HF_TOKEN comes from; "" when it gets none (a checkpoint the Hub does not gate)
        hf_token_secret=secret_env_of(container, "HF_TOKEN") or "",
    )

"""The TPU target's spec document and what the node runs.

The spec (a plain dict, kept in the node's metadata as `gemma-sre-spec` so the bot reads back what it deployed):
zone and the zones to fall back to, accelerator type, runtime version, provisioning model, the vLLM TPU image,
the model and vLLM's arguments, the VPC and the Secret Manager secrets for vLLM's --api-key and, for a checkpoint
the Hub gates, the HF token (empty otherwise: Gemma 4's public checkpoints need none).

The node starts vLLM's TPU image as vLLM's TPU guide runs it (tpu-inference docs, skills/data/tpu.yaml
`vllm_tpu_image`: `docker run --privileged --net=host -v /dev/shm:/dev/shm --shm-size 150gb ... vllm/vllm-tpu`),
from the node's startup-script metadata, with Docker's gcplogs driver so vLLM's lines land in Cloud Logging
(log `gcplogs-docker-driver`, jsonPayload.instance.name = the node: docs.docker.com/engine/logging/drivers/gcplogs).
No Cloud Run IAM stands in front of a node: vLLM's own --api-key guards the API, and the node has no external IP
(the bot reaches its internal IP over its VPC egress).
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from skills.capacity.image_compat import load_image_data

SPEC_KEY = "gemma-sre-spec"
LOG_NAME = "gcplogs-docker-driver"
VLLM_PORT = 8000
# A pinned vLLM TPU release (skills/data/vllm_images.yaml `tpu`, with its source), never a floating tag: preflight
# checks it as it checks a GPU image (skills/capacity/image_compat.py check_tpu_image).
DEFAULT_IMAGE = load_image_data().tpu.default


def startup_script(spec: dict[str, Any]) -> str:
    """The node's startup script: fetch the secrets with the node's service account, then run vLLM's TPU image."""
    args = " ".join(shlex.quote(a) for a in spec["vllmArgs"])
    project = f" --project={shlex.quote(spec['project'])}" if spec.get("project") else ""
    # An HF token only for a checkpoint the Hub gates (hfTokenSecret set by the plan), as on Cloud Run: Gemma 4's
    # public checkpoints download without one, and a missing secret would stop the script (set -e).
    secret = spec.get("hfTokenSecret") or ""
    hf_fetch = (
        [f"HF=$(gcloud secrets versions access latest --secret={shlex.quote(secret)}{project})"] if secret else []
    )
    hf_env = '-e HF_TOKEN="$HF" ' if secret else ""
    return "\n".join(
        [
            "#!/bin/bash",
            "# Written by gemma-sre: vLLM's TPU image as vLLM's TPU guide runs it; logs to Cloud Logging (gcplogs).",
            "set -euo pipefail",
            f"KEY=$(gcloud secrets versions access latest --secret={shlex.quote(spec['apiKeySecret'])}{project})",
            *hf_fetch,
            "docker rm -f vllm 2>/dev/null || true",
            "docker run -d --name vllm --privileged --net=host -v /dev/shm:/dev/shm --shm-size 150gb \\",
            f"  --log-driver=gcplogs --log-opt gcp-meta-name={shlex.quote(spec['nodeId'])} \\",
            f'  {hf_env}-e VLLM_API_KEY="$KEY" \\',
            f"  {shlex.quote(spec['image'])} \\",
            f"  vllm serve {shlex.quote(spec['hfRepo'])} --host 0.0.0.0 --port {VLLM_PORT} {args}",
        ]
    )


def metadata_of(spec: dict[str, Any]) -> dict[str, str]:
    return {"startup-script": startup_script(spec), SPEC_KEY: json.dumps(spec, sort_keys=True)}


def spec_from_metadata(metadata: dict[str, str]) -> dict[str, Any] | None:
    raw = metadata.get(SPEC_KEY)
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def gcloud_create(service: str, spec: dict[str, Any]) -> str:
    """The gcloud equivalent of the create (what an operator would type)."""
    # A named reservation: gcloud alpha's --reservation (tpu.yaml `reservation`); --reserved would take any match.
    reserved = f" --reservation={spec.get('reservation', '')}" if spec.get("reservation") else " --reserved"
    tier = {"spot": " --spot", "reserved": reserved}.get(spec["provisioning"], "")
    alpha = "alpha " if spec.get("reservation") else ""  # --reservation is gcloud alpha's
    project = f" --project {spec['project']}" if spec.get("project") else ""
    return (
        f"gcloud {alpha}compute tpus queued-resources create {service} --node-id {spec['nodeId']} --zone {spec['zone']}"
        f" --accelerator-type {spec['acceleratorType']} --runtime-version {spec['runtimeVersion']}{tier}"
        f" --valid-until-duration {spec['queueWaitS']}s --internal-ips"
        f" --metadata-from-file startup-script=startup.sh{project}"
    )

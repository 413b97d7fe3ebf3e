"""Render the Cloud Run v2 Service (camelCase REST JSON) that runs vLLM, and patch a running one.

Every value here follows the field notes: pinned image, vLLM flags that matter (tool calling needs the
gemma4 parsers, --max-num-seqs equals Cloud Run concurrency), GPU node selector + limit, CPU always
allocated, memory from the planner, read-only GCS FUSE volume as uid/gid 1001, HF token only from Secret
Manager, and a startup probe whose budget covers the planner's cold-start estimate within Cloud Run's caps.
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from skills.capacity.catalog import GpuProfile
from skills.capacity.cost import parse_cpu
from skills.errors import InvalidInput
from skills.serving.config import MOUNT_PATH, ServingConfig
from skills.serving.sizes import gib
from skills.serving.vllm_flags import VllmFlags
from skills.targets.cloud_run import metrics_sidecar
from skills.targets.cloud_run.diff import OUTPUT_ONLY_FIELDS
from skills.targets.serving_flags import serving_flags

PORT = 8080
VOLUME = "models"
CONTAINER = "vllm"
ENTRYPOINT = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
# uid/gid 1001: the vLLM image's user; without them loading fails with Permission denied.
MOUNT_OPTIONS = [
    "uid=1001",
    "gid=1001",
    "max-conns-per-host=100",
    "stat-cache-ttl=3600s",
    "type-cache-ttl=3600s",
]
ANNOTATION_PROFILE = "gemma-sre/profile"
ANNOTATION_MODEL = "gemma-sre/model"

# Cloud Run startup-probe caps: initialDelaySeconds <= 240, periodSeconds <= 240, timeout <= period, and
# failureThreshold x periodSeconds <= 1800 s for GPU services (so the most a probe can wait is 2,040 s).
MAX_INITIAL_DELAY_S = 240
MAX_PERIOD_S = 240
MAX_THRESHOLD_WINDOW_S = 1800
PROBE_MARGIN = 1.5  # reports disagree by 20-30%; leave room for a slow FUSE read
PROBE_EXTRA_S = 120


class StartupProbe(BaseModel):
    initial_delay_s: int = Field(ge=0, le=MAX_INITIAL_DELAY_S)
    period_s: int = Field(ge=1, le=MAX_PERIOD_S)
    timeout_s: int = Field(ge=1, le=MAX_PERIOD_S)
    failure_threshold: int = Field(ge=1)

    @model_validator(mode="after")
    def _caps(self) -> StartupProbe:
        if self.timeout_s > self.period_s:
            raise ValueError("startup probe timeout must not exceed its period")
        if self.failure_threshold * self.period_s > MAX_THRESHOLD_WINDOW_S:
            raise ValueError(f"failure threshold x period must stay within {MAX_THRESHOLD_WINDOW_S} s")
        return self

    @property
    def budget_s(self) -> int:
        return self.initial_delay_s + self.failure_threshold * self.period_s

    def to_json(self) -> dict[str, Any]:
        return {
            "httpGet": {"path": "/health", "port": PORT},
            "initialDelaySeconds": self.initial_delay_s,
            "periodSeconds": self.period_s,
            "timeoutSeconds": self.timeout_s,
            "failureThreshold": self.failure_threshold,
        }


def probe_for(
    cold_start_s: float | None,
    failure_threshold: int | None = None,
    period_s: int | None = None,
    budget_s: float | None = None,
) -> StartupProbe:
    """A probe whose budget covers budget_s (default cold_start_s x margin), within Cloud Run's caps."""
    period = period_s or 60
    if not 1 <= period <= MAX_PERIOD_S:
        raise InvalidInput(f"Startup probe period {period} s is outside Cloud Run's 1-{MAX_PERIOD_S} s.")
    cold = cold_start_s or 300.0  # no estimate: assume a small model over FUSE
    initial = MAX_INITIAL_DELAY_S if cold >= MAX_INITIAL_DELAY_S else int(cold) // 2
    if failure_threshold is None:
        want = budget_s or cold * PROBE_MARGIN + PROBE_EXTRA_S
        failure_threshold = max(3, math.ceil((want - initial) / period))
        failure_threshold = min(failure_threshold, MAX_THRESHOLD_WINDOW_S // period)
    if failure_threshold * period > MAX_THRESHOLD_WINDOW_S or failure_threshold < 1:
        raise InvalidInput(
            f"Startup probe failure threshold {failure_threshold} x period {period} s exceeds Cloud Run's "
            f"{MAX_THRESHOLD_WINDOW_S} s for GPU services.",
            f"Use at most {MAX_THRESHOLD_WINDOW_S // period} failures at a {period} s period.",
        )
    return StartupProbe(
        initial_delay_s=initial,
        period_s=period,
        timeout_s=max(1, min(50, period - 1) if period > 1 else 1),
        failure_threshold=failure_threshold,
    )


class DeployConfig(ServingConfig):
    """A resolved Cloud Run deployment: the target-independent serving configuration (ServingConfig) and what
    only Cloud Run asks for (instance CPU and memory sizes, the startup probe, the launch stage, the runtime
    service account). Rendering it has no choices left."""

    cpu: str
    memory: str
    probe: StartupProbe
    launch_stage: str = "GA"  # BETA for a Preview GPU (nvidia-rtx-pro-6000)
    service_account: str | None = None  # the vLLM service's runtime identity (bucket + HF token secret readers)
    # VLLM_METRICS_SIDECAR: add the Managed Service for Prometheus sidecar (metrics_sidecar.py) after vLLM.
    metrics_sidecar: bool = False

    @field_validator("service")
    @classmethod
    def _service_name(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z]([-a-z0-9]{0,47}[a-z0-9])?", v):
            raise ValueError("Cloud Run service names are lowercase letters, digits and '-', start with a letter")
        return v


def vllm_flags(cfg: ServingConfig) -> VllmFlags:
    """The vLLM flags a resolved deployment runs with on Cloud Run (its container port)."""
    return serving_flags(cfg, PORT)


def vllm_args(cfg: ServingConfig) -> list[str]:
    return vllm_flags(cfg).to_args()


GIB = 2**30


def check_gpu_minimums(gpu: GpuProfile, cpu: str, memory: str) -> None:
    """Cloud Run refuses a GPU service below the GPU's CPU/memory minimum: say so before it does."""
    limits = gpu.cloud_run
    if limits is None:
        return
    if float(cpu) < limits.min_cpu or gib(memory) < limits.min_memory_gib:
        raise InvalidInput(
            f"{gpu.display} on Cloud Run needs at least {limits.min_cpu} CPU and {limits.min_memory_gib} GiB; "
            f"this asks for {cpu} CPU and {memory}.",
            f"Use --cpu {limits.min_cpu} or more and --memory {limits.min_memory_gib}Gi or more.",
        )


def render_service(cfg: DeployConfig) -> dict[str, Any]:
    """The full v2 Service JSON (camelCase) for `Runtime.apply_service`."""
    if cfg.model_bucket:
        env: list[dict[str, Any]] = [{"name": "HF_HUB_OFFLINE", "value": "1"}]
    elif cfg.hf_token_secret:
        # Pulling a gated checkpoint from the Hub: token only from Secret Manager; never HF_HUB_OFFLINE (it blocks
        # the download).
        env = [
            {
                "name": "HF_TOKEN",
                "valueSource": {"secretKeyRef": {"secret": cfg.hf_token_secret, "version": "latest"}},
            }
        ]
    else:
        env = []  # a checkpoint the Hub does not gate (Gemma 4): downloaded without a token
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": cfg.image,
        "command": list(ENTRYPOINT),
        "args": vllm_args(cfg),
        "ports": [{"name": "http1", "containerPort": PORT}],
        "env": env,
        "resources": {
            "limits": {"cpu": cfg.cpu, "memory": cfg.memory, "nvidia.com/gpu": str(cfg.gpu_count)},
            "cpuIdle": False,  # CPU always allocated: vLLM's scheduler runs between requests
            "startupCpuBoost": True,
        },
        "startupProbe": cfg.probe.to_json(),
    }
    template: dict[str, Any] = {
        "scaling": {"minInstanceCount": cfg.min_instances, "maxInstanceCount": cfg.max_instances},
        "timeout": "3600s",
        "executionEnvironment": "EXECUTION_ENVIRONMENT_GEN2",
        "maxInstanceRequestConcurrency": cfg.max_num_seqs,
        "nodeSelector": {"accelerator": cfg.gpu},
        "gpuZonalRedundancyDisabled": True,
        "containers": [container],
    }
    if cfg.metrics_sidecar:
        template["containers"].append(metrics_sidecar.container(depends_on=CONTAINER))
        limits = container["resources"]["limits"]
        own_cpu, own_gib = parse_cpu(cfg.cpu), gib(cfg.memory)
        cpu, mem = metrics_sidecar.share_of(own_cpu, own_gib)
        if cpu != own_cpu:
            limits["cpu"] = f"{cpu:g}"
        if mem != own_gib:
            limits["memory"] = f"{int(mem * 1024)}Mi"
    if cfg.service_account:
        template["serviceAccount"] = cfg.service_account
    if cfg.model_bucket:
        container["volumeMounts"] = [{"name": VOLUME, "mountPath": MOUNT_PATH}]
        template["volumes"] = [
            {
                "name": VOLUME,
                "gcs": {"bucket": cfg.model_bucket, "readOnly": True, "mountOptions": list(MOUNT_OPTIONS)},
            }
        ]
    annotations = {ANNOTATION_MODEL: cfg.model}
    if cfg.profile:
        annotations[ANNOTATION_PROFILE] = cfg.profile
    service: dict[str, Any] = {
        "labels": {"managed-by": "gemma-sre"},
        "annotations": annotations,
        "ingress": "INGRESS_TRAFFIC_ALL",
        "invokerIamDisabled": False,  # callers need an identity token
        "template": template,
        # Traffic follows the latest *ready* revision: a revision that fails its probe never gets traffic.
        "traffic": [{"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST", "percent": 100}],
    }
    if cfg.launch_stage != "GA":
        service["launchStage"] = cfg.launch_stage  # a Preview GPU is refused without it
    return service


# --- the fixes a redeploy may apply (skills/diagnosis/remediation.py RedeployFixes), as edits of a running spec -----


OFFLINE_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def fuse_mount_options(current: list[str] | None) -> list[str]:
    """Mount options with uid/gid 1001 (replacing any other uid/gid), keeping the rest and adding the
    cache options that are missing."""
    kept = [o for o in (current or []) if o.split("=", 1)[0].strip() not in ("uid", "gid")]
    names = {o.split("=", 1)[0].strip() for o in kept}
    defaults = [
        o for o in MOUNT_OPTIONS if o.split("=", 1)[0] not in names and o.split("=", 1)[0] not in ("uid", "gid")
    ]
    return ["uid=1001", "gid=1001", *kept, *defaults]


def gcs_mounts(spec: dict[str, Any], container: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """The GCS volumes the container mounts, with their mount paths."""
    volumes = {v.get("name"): v for v in spec.get("template", {}).get("volumes") or [] if v.get("gcs")}
    return [
        (volumes[m.get("name")], str(m.get("mountPath", "")))
        for m in container.get("volumeMounts") or []
        if m.get("name") in volumes
    ]


def fix_fuse_mounts(spec: dict[str, Any], container: dict[str, Any]) -> None:
    """uid=1001;gid=1001 on every GCS volume the serving container mounts (the image's user)."""
    mounts = gcs_mounts(spec, container)
    if not mounts:
        raise InvalidInput(
            "The running service mounts no GCS FUSE volume, so there are no mount options to fix.",
            "Serve the weights from the bucket with `model_source=bucket` (needs MODEL_BUCKET), or deploy a profile.",
        )
    for volume, _ in mounts:
        volume["gcs"]["mountOptions"] = fuse_mount_options(volume["gcs"].get("mountOptions"))


def add_model_volume(spec: dict[str, Any], container: dict[str, Any], bucket: str) -> str:
    """Mount `bucket` read-only at MOUNT_PATH with the field-notes options; returns the mount path."""
    tmpl = spec.setdefault("template", {})
    volumes = tmpl.setdefault("volumes", [])
    names = {v.get("name") for v in volumes}
    name = (
        VOLUME if VOLUME not in names else next(f"{VOLUME}-{i}" for i in range(2, 100) if f"{VOLUME}-{i}" not in names)
    )
    volumes.append({"name": name, "gcs": {"bucket": bucket, "readOnly": True, "mountOptions": list(MOUNT_OPTIONS)}})
    mounts = [m for m in container.get("volumeMounts") or [] if m.get("mountPath") != MOUNT_PATH]
    container["volumeMounts"] = [*mounts, {"name": name, "mountPath": MOUNT_PATH}]
    return MOUNT_PATH


def set_env(container: dict[str, Any], name: str, value: str | None) -> None:
    """A plain env var set (or removed when value is None)."""
    env = [e for e in container.get("env") or [] if e.get("name") != name]
    if value is not None:
        env.append({"name": name, "value": value})
    container["env"] = env


def set_secret_env(container: dict[str, Any], name: str, secret: str) -> None:
    """An env var from Secret Manager (latest version), replacing any literal value of the same name."""
    env = [e for e in container.get("env") or [] if e.get("name") != name]
    env.append({"name": name, "valueSource": {"secretKeyRef": {"secret": secret, "version": "latest"}}})
    container["env"] = env


def secret_env_of(container: dict[str, Any], name: str) -> str | None:
    for e in container.get("env") or []:
        if e.get("name") == name:
            return (e.get("valueSource") or {}).get("secretKeyRef", {}).get("secret")
    return None


def set_model(flags: VllmFlags, path: str, old_model_args: list[str], new_model_args: list[str]) -> VllmFlags:
    """--model `path`, and the catalog flags of the new checkpoint instead of the old one's."""
    return flags.without(VllmFlags.parse(old_model_args)).merged(VllmFlags.parse(new_model_args)).with_(model=path)


def main_container(spec: dict[str, Any]) -> dict[str, Any]:
    containers = spec.get("template", {}).get("containers") or []
    if not containers:
        raise InvalidInput("The running service has no container to change.", "Deploy a profile instead.")
    for c in containers:  # the one serving the port; sidecars do not
        if c.get("ports"):
            return dict(c)
    return dict(containers[0])


def replace_container(spec: dict[str, Any], new: dict[str, Any]) -> None:
    containers = spec["template"]["containers"]
    for i, c in enumerate(containers):
        if c.get("ports") or len(containers) == 1:
            containers[i] = new
            return
    containers[0] = new


def strip_output_only(spec: dict[str, Any]) -> dict[str, Any]:
    """The service as a request may send it: a deep copy without Cloud Run's output-only fields."""
    return {k: copy.deepcopy(v) for k, v in spec.items() if k not in OUTPUT_ONLY_FIELDS}

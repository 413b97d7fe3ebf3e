"""The Managed Service for Prometheus sidecar a deploy adds to the vLLM service (VLLM_METRICS_SIDECAR, opt-in).

vLLM serves its Prometheus metrics at /metrics on its HTTP port; Cloud Monitoring gets them only through the
Managed Service for Prometheus sidecar (https://cloud.google.com/run/docs/monitoring-managed-prometheus-sidecar:
"the Google-recommended way to get Prometheus-style monitoring for Cloud Run services"; it runs a collector "as a
sidecar container alongside your workload container", does a start-up scrape after 10 s and a shut-down scrape,
and recommends instance-based billing, which a GPU service has anyway). The alert policies read what it writes
(bot/deploy/alert_policies.py).

Where each value comes from:
- Image and pin: `us-docker.pkg.dev/cloud-ops-agents-artifacts/cloud-run-gmp-sidecar/cloud-run-gmp-sidecar:1.2.0`,
  the image GoogleCloudPlatform/run-gmp-sidecar's own multi-container sample deploys (run-service-simple.yaml at
  commit 056abb4, 2026-03-10). The repository has later tags (1.3.0 .. 1.8.0); only this one is seen deployed
  from that registry path in a source, so it is the pin.
- What it scrapes with no configuration: confgenerator/config.go DefaultRunMonitoringConfig ("used by default if
  no user config (or an empty one) is found"): port "8080", path "/metrics", interval "30s", and the target labels
  instance, revision, service, configuration. The user config would be read from /etc/rungmp/config.yaml
  (entrypoint.go userConfigFile), which run-service.yaml mounts from a Secret Manager secret. vLLM listens on
  render.PORT = 8080 (`--port 8080`, containerPort 8080), the default's port, so no config secret and no volume
  are needed; CONFIG_PORT is checked against render.PORT (tests/test_metrics_sidecar.py).
- Start order: the sample's `run.googleapis.com/container-dependencies: '{"collector":["app"]}'`, the collector
  starting after the app container; in the Admin API v2 that is the collector's `dependsOn` ("Names of the
  containers that must start before this container", google-cloud-run's Container.depends_on). The container name
  `collector` is the sample's.
- Liveness probe: the sample's (`httpGet` /liveness on 13133, timeout and period 30 s), the port and path
  entrypoint.go serves (livenessProbePort 13133, livenessProbePath "/liveness").
- CPU always allocated (`cpuIdle: false`): the sample sets `run.googleapis.com/cpu-throttling: "false"`, and the
  sidecar page says scrapes may fail when CPU is throttled.
- Resources: neither the sample nor the parts of Google's page readable here give limits, so these are the bot's
  choice: 1 vCPU (Cloud Run's CPU page: below 1 vCPU needs request-based billing, which a GPU service cannot use,
  GPU page: "You must use instance-based billing to use the GPU feature") and 512 MiB (within 1 vCPU's "up to
  4 GiB"). A plan prices them (skills/capacity/prices.py), and says so.
- A GPU service may have sidecars: Cloud Run GPU page, "If you use sidecar containers, note that the GPU can only
  be attached to one container."
- Identity: the revision's service account writes the series; run-gmp-sidecar's README lists
  `roles/monitoring.metricWriter` (and `roles/logging.logWriter`) as the minimum, which the default compute account
  has; a VLLM_SERVICE_ACCOUNT needs them granted (README, Deployment).
"""

from __future__ import annotations

from typing import Any

IMAGE_REPO = "us-docker.pkg.dev/cloud-ops-agents-artifacts/cloud-run-gmp-sidecar/cloud-run-gmp-sidecar"
IMAGE = f"{IMAGE_REPO}:1.2.0"
NAME = "collector"
CONFIG_PORT = 8080  # DefaultRunMonitoringConfig's endpoint port
CONFIG_PATH = "/metrics"
SCRAPE_INTERVAL_S = 30
LIVENESS_PORT = 13133
CPU = "1"
MEMORY = "512Mi"
CPU_VCPU = 1.0
MEMORY_GIB = 0.5
# Cloud Run's limits per instance: "each instance is limited to ... a maximum of 8 CPUs" (CPU limits page) and "The
# maximum amount of memory you can configure is 32 GiB" (memory limits page). Whether the Admin API checks the sum
# of a multi-container instance's limits against them was not found stated; the bot assumes it does and keeps the
# instance within them (see share_of), which at worst leaves vLLM 1 vCPU and 0.5 GiB short of the maximum.
INSTANCE_MAX_VCPU = 8.0
INSTANCE_MAX_GIB = 32.0


def share_of(cpu_vcpu: float, memory_gib: float) -> tuple[float, float]:
    """The serving container's CPU and memory beside the sidecar: its own limits, lowered only as far as the
    instance's maximums require."""
    return min(cpu_vcpu, INSTANCE_MAX_VCPU - CPU_VCPU), min(memory_gib, INSTANCE_MAX_GIB - MEMORY_GIB)


def container(depends_on: str) -> dict[str, Any]:
    """The sidecar's v2 container JSON, started after the serving container `depends_on`."""
    return {
        "name": NAME,
        "image": IMAGE,
        "dependsOn": [depends_on],
        "resources": {"limits": {"cpu": CPU, "memory": MEMORY}, "cpuIdle": False},
        "livenessProbe": {
            "httpGet": {"path": "/liveness", "port": LIVENESS_PORT},
            "timeoutSeconds": 30,
            "periodSeconds": 30,
        },
    }


def is_gmp_sidecar(c: dict[str, Any]) -> bool:
    """A container running the Managed Service for Prometheus sidecar image (any tag or digest)."""
    image = str(c.get("image") or "")
    return image == IMAGE_REPO or image.startswith((IMAGE_REPO + ":", IMAGE_REPO + "@"))


def find(containers: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((c for c in containers if is_gmp_sidecar(c)), None)


def describe() -> str:
    return (
        f"Managed Service for Prometheus sidecar `{NAME}` (`{IMAGE}`): scrapes vLLM's :{CONFIG_PORT}{CONFIG_PATH} "
        f"every {SCRAPE_INTERVAL_S} s into Cloud Monitoring (the vLLM alert policies need it); {CPU} vCPU, "
        f"{MEMORY}, priced in. The service's runtime account needs roles/monitoring.metricWriter."
    )


def retarget(containers: list[dict[str, Any]], old: str, new: str) -> None:
    """Point other containers' dependsOn at the serving container's new name (a deploy renames it)."""
    if not old or old == new:
        return
    for c in containers:
        deps = c.get("dependsOn")
        if deps and old in deps:
            c["dependsOn"] = [new if d == old else d for d in deps]

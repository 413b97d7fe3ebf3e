"""Sandbox scenarios: the failures seen in the field, made to happen on the simulated project.

A deploy scenario is a teammate deploying a bad configuration by hand (as `gcloud run deploy` would: straight
to Cloud Run, past the bot's planner); the simulated revision then fails on its own, by the lifecycle's rules
(bot/sandbox/lifecycle.py), and Cloud Monitoring's alert reaches the bot through its webhook. A load scenario
drives the vLLM simulator's gauges and writes the engine's stats lines. Each names the finding kind the
diagnosis should report (skills/diagnosis/analyzers). Which failures, and their fixes: field notes, "Failures seen in
the wild".
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.sandbox.examples import ALERTS
from bot.sandbox.preflight_standins import GATED_REPO
from skills.serving.vllm_flags import VllmFlags
from skills.targets.cloud_run.render import CONTAINER, MOUNT_PATH, VOLUME

Mutation = Callable[[dict[str, Any]], None]  # edits a copy of the service's template in place


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    kind: str  # what /gemma diagnose should find
    alert: str  # the alert policy's name
    mutate: Mutation | None = None  # a deploy scenario
    load: bool = False  # a load scenario


def _main(template: dict[str, Any]) -> dict[str, Any]:
    containers = template.get("containers") or []
    return next((c for c in containers if c.get("name") == CONTAINER), containers[0])


def _args(template: dict[str, Any], **flags: str | bool | None) -> None:
    c = _main(template)
    c["args"] = VllmFlags.parse([str(a) for a in c.get("args") or []]).with_(**flags).to_args()


def _kv(t: dict[str, Any]) -> None:
    # 131,072 tokens of bf16 KV at 55% of an L4: one sequence needs more than the cache holds.
    _args(t, max_model_len="131072", kv_cache_dtype="auto", gpu_memory_utilization="0.55")


def _oom(t: dict[str, Any]) -> None:
    # 98%: too little left outside vLLM's budget for CUDA-graph capture (field notes: util 0.95 on the 31B).
    _args(t, gpu_memory_utilization="0.98", enforce_eager=None)


def _host_memory(t: dict[str, Any]) -> None:
    # The 26B-A4B QAT in 16 GiB: loading peaks above the limit (field notes: 16.8 GiB peak; needs 32 GiB).
    _args(t, model="xbill9/gemma-4-26B-A4B-it-qat-q4_0-w4a16-ct", max_model_len="16384", max_num_seqs="4")
    _main(t)["resources"]["limits"].update(memory="16Gi", cpu="4")
    t["maxInstanceRequestConcurrency"] = 4
    _main(t)["startupProbe"] = _probe_json(initial=240, period=60, threshold=30)  # field notes' working budget


def _probe_json(initial: int, period: int, threshold: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": "/health", "port": 8080},
        "initialDelaySeconds": initial,
        "periodSeconds": period,
        "timeoutSeconds": min(50, period - 1),
        "failureThreshold": threshold,
    }


def _probe(t: dict[str, Any]) -> None:
    # Cloud Run's probe gives up after 2 minutes; a 12B QAT cold start over FUSE takes several.
    _main(t)["startupProbe"] = _probe_json(initial=0, period=10, threshold=12)


def _fuse(t: dict[str, Any]) -> None:
    # Weights on a GCS FUSE mount without uid/gid 1001: the vLLM image's user cannot read them.
    c = _main(t)
    repo_dir = "gemma-4-12b-it-qat-w4a16-ct"
    for arg in c.get("args") or []:
        if "/" in str(arg) and not str(arg).startswith("-"):
            repo_dir = str(arg).rstrip("/").rsplit("/", 1)[-1]
            break
    _args(t, model=f"{MOUNT_PATH}/{repo_dir}")
    c["volumeMounts"] = [{"name": VOLUME, "mountPath": MOUNT_PATH}]
    c["env"] = [{"name": "HF_HUB_OFFLINE", "value": "1"}]
    t["volumes"] = [{"name": VOLUME, "gcs": {"bucket": "sandbox-models", "readOnly": True}}]


def _gated(t: dict[str, Any]) -> None:
    # A teammate tries a gated checkpoint by hand, pulled from the Hub with no HF_TOKEN. Gemma 4 is not gated
    # (catalog.yaml, hub_gated), so it is a Gemma 3n one, gated behind the Gemma Terms of Use (GATED_REPO's source).
    _args(t, model=GATED_REPO)
    c = _main(t)
    c["env"] = [e for e in c.get("env") or [] if e.get("name") != "HF_TOKEN"]
    c.pop("volumeMounts", None)
    t.pop("volumes", None)


def _old_image(t: dict[str, Any]) -> None:
    # A hand deploy of an image from before Gemma 4 (vLLM 0.12.0 < 0.19.1, skills/data/vllm_images.yaml families).
    _main(t)["image"] = "vllm/vllm-openai:v0.12.0"


def _cuda13_on_l4(t: dict[str, Any]) -> None:
    # The unsuffixed tag is the CUDA 13.0 build since v0.20.0; the L4's driver 535 (CUDA 12.2) cannot run it.
    _main(t)["image"] = "vllm/vllm-openai:v0.25.1"
    t.setdefault("nodeSelector", {})["accelerator"] = "nvidia-l4"


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("kv-cache-too-small", "max-model-len 131072, bf16 KV cache, util 0.55", "kv_cache_insufficient",
                 "vLLM revision failed to start", _kv),
        Scenario("gpu-oom-at-load", "--gpu-memory-utilization 0.98: CUDA graphs run out of memory", "gpu_oom_at_load",
                 "vLLM revision failed to start", _oom),
        Scenario("host-memory", "the 26B QAT model loaded in a 16 GiB container", "container_memory_exceeded",
                 "vLLM revision failed to start", _host_memory),
        Scenario("probe-too-short", "a 2-minute startup probe for a multi-minute cold start", "startup_probe_timeout",
                 "vLLM revision failed to start", _probe),
        Scenario("fuse-permission", "weights on GCS FUSE without uid=1001;gid=1001", "gcs_fuse_permission_denied",
                 "vLLM revision failed to start", _fuse),
        Scenario("gated-model", f"a gated checkpoint ({GATED_REPO}) pulled without HF_TOKEN", "hf_auth_failed",
                 "vLLM revision failed to start", _gated),
        Scenario("image-too-old", "vllm/vllm-openai:v0.12.0: its Transformers does not know Gemma 4",
                 "container_exited_at_start", "vLLM revision failed to start", _old_image),
        Scenario("image-too-new-for-driver", "a CUDA 13 build (v0.25.1) on the L4's driver 535",
                 "cuda_incompatible", "vLLM revision failed to start", _cuda13_on_l4),
        Scenario("queue-saturation", "more requests than the instance serves: queueing, KV cache at 97%",
                 "request_queue_saturated", "vLLM requests waiting", load=True),
    )
}  # fmt: skip


def mutated_template(scenario: Scenario, template: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(template)
    if scenario.mutate is not None:
        scenario.mutate(out)
    return out


def saturation_lines(revision: str, n: int = 6) -> list[tuple[str, str]]:
    """vLLM's periodic engine stats under load (wording as in the example scenarios), as (severity, text)."""
    return [
        (
            "INFO",
            f"[loggers.py:123] Engine 000: Avg prompt throughput: {900 + 10 * i:.1f} tokens/s, Avg generation "
            f"throughput: 240.0 tokens/s, Running: 8 reqs, Waiting: {4 + 3 * i} reqs, GPU KV cache usage: 97.0%, "
            "Prefix cache hit rate: 41.2%",
        )
        for i in range(n)
    ]


def gcp_alert(scenario: Scenario, project: str, service: str, revision: str, location: str) -> dict[str, Any]:
    """A Cloud Monitoring notification (schema 1.2, as in bot/sandbox/data/alerts) for this scenario."""
    p: dict[str, Any] = json.loads((ALERTS / "gcp-monitoring-open.json").read_text())
    inc = p["incident"]
    iid = f"0.sandbox{uuid.uuid4().hex[:8]}"
    failed = not scenario.load
    inc.update(
        incident_id=iid,
        scoping_project_id=project,
        url=f"https://console.cloud.google.com/monitoring/alerting/incidents/{iid}?project={project}",
        started_at=int(time.time()),
        summary=(
            f"Revision {revision} of {service} failed to become ready ({scenario.summary})."
            if failed
            else f"vllm:num_requests_waiting for {service} is above the threshold of 0 with a value of 19."
        ),
        policy_name=scenario.alert,
        observed_value="1" if failed else "19",
        threshold_value="0",
        resource_display_name=service,
        resource_name=f"{project} {service}",
    )
    inc["resource"]["labels"].update(
        project_id=project, service_name=service, revision_name=revision, location=location, configuration_name=service
    )
    inc["documentation"]["subject"] = f"[ALERT] {scenario.alert}"
    inc["condition_name"] = inc["condition"]["displayName"] = scenario.alert
    return p


def gcp_closed(opened: dict[str, Any], summary: str) -> dict[str, Any]:
    """The close notification of an alert sent with `gcp_alert`: the same incident id, state "closed" and its
    end time (as in bot/sandbox/data/alerts/gcp-monitoring-closed.json, which is how Cloud Monitoring says its
    condition stopped being met: https://cloud.google.com/monitoring/alerts/incidents-events)."""
    p = copy.deepcopy(opened)
    inc = p["incident"]
    inc.update(state="closed", ended_at=int(time.time()), summary=summary)
    inc["documentation"]["subject"] = f"[RESOLVED] {inc['policy_name']}"
    return p


def revision_number(name: str) -> int:
    """Cloud Run names revisions <service>-<NNNNN>-<suffix>, numbered in creation order."""
    parts = name.rsplit("-", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else 0

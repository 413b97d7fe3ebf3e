"""Deterministic analyzers for known vLLM / Cloud Run failures, one small module per family.

`run_all(view)` runs every registered analyzer, adds the start-up fallback when none of them explains a fatal
start (fallback.py), bounds each proposed fix by what the log and the planner say
can work (bounds.py), and puts root causes before the findings they explain (causes.py). Importing the
family modules registers them (see base.analyzer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skills.diagnosis.analyzers import (  # noqa: F401  (registration)
    aca,
    access,
    container,
    cuda,
    engine,
    interrupted,
    memory,
    platform,
    serving,
    startup,
    tpu,
)
from skills.diagnosis.analyzers.base import REGISTRY, LogView
from skills.diagnosis.analyzers.bounds import bound
from skills.diagnosis.analyzers.causes import order_by_cause
from skills.diagnosis.analyzers.fallback import startup_fatal

if TYPE_CHECKING:
    from skills.diagnosis.findings import Finding

KINDS = (
    "container_exited_at_start",
    "container_port_mismatch",
    "cloud_run_quota_exceeded",
    "gpu_quota_exceeded",
    "max_model_len_exceeds_model",
    "bf16_unsupported",
    "cuda_incompatible",
    "hf_auth_failed",
    "model_not_found",
    "gcs_fuse_permission_denied",
    "container_memory_exceeded",
    "torch_compile_failed",
    "gpu_oom_at_load",
    "kv_cache_insufficient",
    "engine_hung",
    "engine_startup_failed",
    "startup_probe_timeout",
    "startup_interrupted",
    "context_length_exceeded",
    "tool_parser_missing",
    "cpu_offload_slow",
    "request_queue_saturated",
    # Cloud TPU (skills/diagnosis/analyzers/tpu.py)
    "tpu_hbm_oom",
    "tpu_compile_timeout",
    "tpu_unsupported",
    "tpu_no_capacity",
    "tpu_quota_exceeded",
    "tpu_preempted",
    # Azure Container Apps (skills/diagnosis/analyzers/aca.py)
    "aca_image_pull_failed",
    "aca_workload_profile_missing",
)


def run_all(view: LogView) -> list[Finding]:
    findings = []
    for kind in KINDS:
        finding = REGISTRY[kind](view)
        if finding is not None:
            bound(view, finding)
            findings.append(finding)
    # A fatal start no kind explains is still reported (fallback.py); a specific kind, when one applied, wins.
    # Any other finding already explains the log (a serving-time error means it was serving); only a probe that
    # gave up, or a stop from outside (SIGTERM), is left for the fallback to explain: an error before either is
    # their cause (causes.py).
    unexplained = all(f.kind in ("startup_probe_timeout", "startup_interrupted") for f in findings)
    if unexplained and (fallback := startup_fatal(view)) is not None:
        bound(view, fallback)
        findings.append(fallback)
    return order_by_cause(view, findings)

"""Deterministic analyzers for known vLLM / Cloud Run failures, one small module per family.

`run_all(view)` runs every registered analyzer and returns their findings. Importing the family modules
registers them (see base.analyzer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import access, memory, platform, serving, startup  # noqa: F401  (registration)
from .base import REGISTRY, LogView

if TYPE_CHECKING:
    from skills.diagnose import Finding

KINDS = (
    "gpu_oom_at_load",
    "kv_cache_insufficient",
    "context_length_exceeded",
    "startup_probe_timeout",
    "gcs_fuse_permission_denied",
    "hf_auth_failed",
    "model_not_found",
    "container_memory_exceeded",
    "bf16_unsupported",
    "tool_parser_missing",
    "cpu_offload_slow",
    "request_queue_saturated",
    "gpu_quota_exceeded",
)


def run_all(view: LogView) -> list[Finding]:
    findings = []
    for kind in KINDS:
        finding = REGISTRY[kind](view)
        if finding is not None:
            findings.append(finding)
    return findings

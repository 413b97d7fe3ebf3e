"""Causal order between findings: the cause is the headline, what it explains is shown as its consequence.

A container that exits at start is followed by Cloud Run's "failed to start and listen on the port" and
startup-probe lines; an engine whose torch.compile failed reports "Engine core initialization failed"; a
memory limit turns into a restart loop that never passes the startup probe. Each consequence kind lists the
kinds that can explain it, most specific first. When one of them is in the same log, no later than the
consequence's last line, the consequence is marked `caused_by` that kind and loses its own remediation:
proposing a 2,000 s probe budget for a process that exits in 3 s cannot help.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skills.diagnosis.analyzers.base import LogView

if TYPE_CHECKING:
    from skills.diagnosis.findings import Finding

# Anything that stops vLLM from ever listening explains a failed startup probe, and an engine that did not start.
_STARTUP_FATAL = (
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
    "kv_cache_insufficient",
    "gpu_oom_at_load",
    "engine_hung",
    "tpu_hbm_oom",
    "tpu_unsupported",
    "tpu_compile_timeout",
    "aca_image_pull_failed",
    "aca_workload_profile_missing",
)

CAUSED_BY: dict[str, tuple[str, ...]] = {
    "startup_probe_timeout": (*_STARTUP_FATAL, "engine_startup_failed"),
    "engine_startup_failed": tuple(k for k in _STARTUP_FATAL if k != "container_port_mismatch"),
    # An OOM (GPU or host) inside compilation shows torch.compile frames: the memory is the cause. So does a
    # kernel the image cannot run on this GPU ("device kernel image is invalid" under a compile wrapper).
    "torch_compile_failed": ("gpu_oom_at_load", "container_memory_exceeded", "cuda_incompatible"),
    # A server stopped from outside during start-up (SIGTERM) was stopped because of what came before: a probe that
    # gave up (its orchestrator sends the SIGTERM), or an error that kept it from ever being ready.
    "startup_interrupted": ("startup_probe_timeout", *_STARTUP_FATAL, "engine_startup_failed"),
    # A stuck engine queues every request behind it.
    "request_queue_saturated": ("engine_hung",),
}

# A consequence's own title may guess at a cause ("before vLLM finished loading"); shown as a consequence it
# states only what happened.
_NEUTRAL_TITLE = {
    "startup_probe_timeout": "Startup probe failed: the instance never became ready",
    "startup_interrupted": "vLLM was stopped from outside during start-up (SIGTERM)",
    "engine_startup_failed": "vLLM engine failed to start",
}
# A cause may be printed just after what it explains (vLLM: "EngineCore failed to start." then the traceback).
SLACK = 200
SEVERITY_RANK = {"critical": 3, "error": 2, "warning": 1, "info": 0}


def _span(view: LogView, f: Finding) -> tuple[int, int]:
    """First and last log line of a finding's evidence (0..len when the evidence is not a single line)."""
    idx = [line.idx for line in view.lines if line.evidence() in f.evidence]
    return (min(idx), max(idx)) if idx else (0, len(view.lines))


def order_by_cause(view: LogView, findings: list[Finding]) -> list[Finding]:
    """Mark consequences (`caused_by`, no fix of their own) and return root causes first, then consequences."""
    by_kind = {f.kind: f for f in findings}
    spans = {f.kind: _span(view, f) for f in findings}
    for f in findings:
        for cause in CAUSED_BY.get(f.kind, ()):
            if cause in by_kind and by_kind[cause].caused_by is None and spans[cause][0] <= spans[f.kind][1] + SLACK:
                f.caused_by = cause
                f.title = f"{_NEUTRAL_TITLE.get(f.kind, f.title)} (because of {cause})"
                f.remediation.summary = f"A consequence of {cause}: {f.remediation.summary}"
                f.evidence = [e for e in f.evidence if e not in by_kind[cause].evidence] or f.evidence
                f.remediation.steps = []
                f.remediation.actions = []
                f.severity = "warning" if f.severity == "critical" else f.severity
                break
    # A cause that is itself explained hands its consequences up to the root (one level is all the table has).
    for f in findings:
        while f.caused_by and by_kind[f.caused_by].caused_by:
            f.caused_by = by_kind[f.caused_by].caused_by

    def rank(f: Finding) -> tuple[int, int, int]:
        return (f.caused_by is not None, -SEVERITY_RANK.get(f.severity, 0), spans[f.kind][0])

    return sorted(findings, key=rank)

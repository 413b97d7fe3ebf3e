"""Startup probe exhausted while vLLM is still loading weights (the most common Cloud Run GPU failure)."""

from __future__ import annotations

import math
import re
from itertools import pairwise
from statistics import median

from skills.diagnosis.analyzers.aca import on_aca
from skills.diagnosis.analyzers.base import Line, LogView, analyzer, evidence_of, first_seen, rx
from skills.diagnosis.findings import Finding, ProposedAction, Remediation

# Sources: Cloud Run's system log and revision conditions ("STARTUP HTTP probe failed N times consecutively for
# container ...", "The user-provided container failed the configured startup probe checks", "... failed to start
# and listen on the port defined provided by the PORT=8080 environment variable";
# https://cloud.google.com/run/docs/configuring/healthchecks and /troubleshooting).
_PROBE_FAIL = rx(
    r"STARTUP (?:HTTP|TCP|GRPC) probe failed (\d+) times? consecutively",
    r"[Ss]tartup probe failed",
    r"failed the configured startup probe checks",
    r"failed to start and listen on the port defined provided by the PORT=\d+",
    r"failed to start and listen on the port",
    # Azure Container Apps: its ProbeFailed event "Probe of StartUp failed with status code: 1" (yeongseon/azure-
    # container-apps-practical-guide probe labs) and the restart it passes through from Kubernetes, "Container X failed
    # startup probe, will be restarted" (microsoft/azure-container-apps#1561).
    r"Probe of StartUp failed",
    r"failed startup probe, will be restarted",
)
_TERMINAL = re.compile(
    r"instance was not started|failed the configured startup probe|failed to start and listen|"
    r"[Cc]ontainer failed to become healthy|Revision '[^']*' is not ready"
)
_SUCCESS = re.compile(r"STARTUP \w+ probe succeeded|Application startup complete|Uvicorn running on")
# tqdm progress of vLLM's loader: "... | 2/5 [08:02<12:03, 241.00s/it]"
_SHARDS = re.compile(r"checkpoint shards:.*?\|\s*(\d+)/(\d+) \[(?:(\d+):)?(\d+):(\d+)<(?:(\d+):)?(\d+):(\d+)")
_THRESHOLD = re.compile(r"failed (\d+) times? consecutively")

WARMUP_S = 120  # torch.compile / CUDA graphs / warm-up after the weights (field notes: ~100 s)
PERIOD_S = 60
MIN_THRESHOLD = 25


def _secs(h: str | None, m: str, s: str) -> int:
    return int(h or 0) * 3600 + int(m) * 60 + int(s)


@analyzer("startup_probe_timeout")
def startup_probe(view: LogView) -> Finding | None:
    hits = view.grep(*_PROBE_FAIL)
    if not hits:
        return None
    terminal = [h for h in hits if _TERMINAL.search(h[0].text) or h[0].severity in ("ERROR", "CRITICAL")]
    if not terminal and view.after(hits[-1][0].idx, _SUCCESS):
        return None  # probes failed while loading, then the server came up: a working budget
    # How long loading would have taken: the slowest loader progress line (elapsed + remaining).
    load_s = 0
    for line in view.lines:
        if m := _SHARDS.search(line.text):
            load_s = max(load_s, _secs(m.group(3), m.group(4), m.group(5)) + _secs(m.group(6), m.group(7), m.group(8)))
    times = [h.ts for h, _ in hits if h.ts is not None]
    gaps = [(b - a).total_seconds() for a, b in pairwise(times) if (b - a).total_seconds() > 5]
    period = median(gaps) if gaps else None
    threshold = max((int(t.group(1)) for h, _ in hits if (t := _THRESHOLD.search(h.text))), default=None)
    needed = (load_s + WARMUP_S) * 1.2 if load_s else None
    if on_aca(view):
        return _aca_probe(view, hits, terminal, load_s, needed)
    new_threshold = max(MIN_THRESHOLD, math.ceil(needed / PERIOD_S)) if needed else 30
    steps = []
    budget = ""
    if threshold and period:
        budget = f" (budget ~{int(threshold * period)} s: {threshold} failures x {period:.0f} s)"
    if load_s:
        steps.append(
            f"Loading the weights was on course to take ~{load_s} s, plus ~{WARMUP_S} s of compile and warm-up."
        )
    steps.append(
        f"Give the startup probe ~{new_threshold * PERIOD_S + 240} s: initial delay 240 s (Cloud Run's cap), "
        f"period {PERIOD_S} s, failure threshold {new_threshold}, timeout 50-60 s."
    )
    steps.append("Faster loads: GCS FUSE cache options (stat-cache-ttl, type-cache-ttl, max-conns-per-host=100).")
    steps.append("Keep `--min-instances 1` if cold starts of many minutes are not acceptable (costs the idle GPU).")
    return Finding(
        kind="startup_probe_timeout",
        title="Startup probe gave up before vLLM finished loading" + budget,
        severity="critical",
        evidence=evidence_of(terminal or hits),
        remediation=Remediation(
            summary="Cloud Run restarted the instance because /health did not answer within the probe budget.",
            steps=steps,
            actions=[
                ProposedAction(
                    action="redeploy",
                    params={"startup_failure_threshold": new_threshold, "startup_period_s": PERIOD_S},
                    reason="startup budget for the observed load time",
                )
            ],
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )


# Azure Container Apps' limits on a probe (the Microsoft.App spec as azure-mgmt-appcontainers carries it:
# failureThreshold at most 10, periodSeconds at most 240, initialDelaySeconds at most 60; skills/data/aca.yaml
# probe_spec), so the longest start-up a startup probe allows is 60 + 10 x 240 s. Without a probe of its own an
# app with ingress gets ACA's default startup probe: TCP, period 1 s, 240 failures (health_probes).
ACA_MAX_THRESHOLD = 10
ACA_MAX_PERIOD_S = 240
ACA_MAX_DELAY_S = 60


def _aca_probe(
    view: LogView,
    hits: list[tuple[Line, re.Match[str]]],
    terminal: list[tuple[Line, re.Match[str]]],
    load_s: int,
    needed: float | None,
) -> Finding:
    want = needed or 1800  # no loader progress in the log: a large model's first start (aca.yaml cold_start)
    period = min(ACA_MAX_PERIOD_S, max(PERIOD_S, math.ceil((want - ACA_MAX_DELAY_S) / ACA_MAX_THRESHOLD / 10) * 10))
    steps = []
    if load_s:
        steps.append(
            f"Loading the weights was on course to take ~{load_s} s, plus ~{WARMUP_S} s of compile and warm-up."
        )
    steps += [
        f"Give the startup probe more time within ACA's limits: initial delay {ACA_MAX_DELAY_S} s, period {period} s, "
        f"failure threshold {ACA_MAX_THRESHOLD} (~{ACA_MAX_DELAY_S + period * ACA_MAX_THRESHOLD} s; ACA allows at most "
        f"{ACA_MAX_DELAY_S + ACA_MAX_PERIOD_S * ACA_MAX_THRESHOLD} s), an HTTP probe on vLLM's /health at the "
        "ingress target port.",
        "Set it in the app's YAML: `az containerapp show -n APP -g RG -o yaml > app.yaml`, edit "
        "`template.containers[].probes` (type Startup), then `az containerapp update -n APP -g RG --yaml app.yaml`.",
        "'connection refused' means nothing listened on the probe's port yet (or ever): check the ingress target port "
        "is vLLM's --port before lengthening the probe.",
        "Confirm with `az containerapp logs show -n APP -g RG --type system` (ProbeFailed / ReplicaUnhealthy "
        "events) and `az containerapp revision show -n APP -g RG --revision REV`.",
    ]
    return Finding(
        kind="startup_probe_timeout",
        title="Startup probe failed: Container Apps restarted the replica before it was ready",
        severity="critical",
        evidence=evidence_of(terminal or hits),
        remediation=Remediation(
            summary="Container Apps restarted the replica because its startup probe did not pass within its budget.",
            steps=steps,
            actions=[
                ProposedAction(
                    action="redeploy",
                    params={"startup_failure_threshold": ACA_MAX_THRESHOLD, "startup_period_s": period},
                    reason="startup budget within ACA's probe limits",
                )
            ],
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )

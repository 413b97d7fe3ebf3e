# ruff: noqa: E501  (remediation prose and log wordings read better unbroken)
"""vLLM stopped from outside while it was starting (SIGTERM): nothing in the log failed; something stopped it.

Sources of the lines (issue 52):
- vLLM's API server installs a SIGTERM handler for start-up only, "Interrupt server on sigterm while initializing":
  `signal_handler` / `_interrupt_init` raise `KeyboardInterrupt("terminated")` (vllm/entrypoints/openai/api_server.py,
  vllm/entrypoints/cli/serve.py setup_interrupt_handler); uvicorn replaces it once the server runs, so this
  traceback means the process was stopped before it was ready. Python prints it as any traceback, and a start-up
  fallback that reads it as an error quotes the interrupt as the cause (what issue 52 found).
- The older engine's worker monitor: "Worker %s pid %s died, exit code: %s" (vllm/executor/multiproc_worker_utils.py);
  a negative exit code -N is death by signal N (Python's multiprocessing.Process.exitcode), and 15 is SIGTERM
  (signal(7)).
- The V1 engine's shutdown log: "[shutdown] EngineCore: trigger received signal=SIGTERM" (vllm/v1/engine/core.py);
  before that, run_engine_core's own handler ("Either SIGTERM or SIGINT will terminate the engine_core") raised
  SystemExit, logged at DEBUG as "EngineCore exiting." (only a stop signal raises it; an error logs "EngineCore failed
  to start." instead).
- Docker's "exited with code 143": 128 + 15, a process ended by SIGTERM.

What stops a server that is still starting is its orchestrator: a startup probe that gave up (Kubernetes restarts the
container; vLLM's own docs, "Using Kubernetes" > Troubleshooting, name this traceback), a deploy or scale-down that
replaced it, a start timeout (systemd's TimeoutStartSec, a wrapper script's). When the log holds a real error before the
stop, that error is the cause and the stop is its consequence (causes.py); when the probe's own lines are there, the
probe is the cause.
"""

from __future__ import annotations

import re

from skills.diagnosis.analyzers.base import Line, LogView, analyzer, evidence_of, first_seen, rx
from skills.diagnosis.analyzers.lines import body, ready_at, unprefixed
from skills.diagnosis.findings import Finding, Remediation

MARKERS = rx(
    r"KeyboardInterrupt: terminated\b",
    r"raise KeyboardInterrupt\(\"terminated\"\)",
    r'File "[^"]*entrypoints[/\\](?:openai[/\\]api_server|cli[/\\]serve)\.py", line \d+, in (?:signal_handler|_interrupt_init)\b',
    r"\bdied, exit code:? -15\b",
    r"received signal=SIGTERM\b",
    r"exited with code 143\b",
    r"\bEngineCore exiting\.",
)
# Markers that name SIGTERM itself (the others: SIGTERM or SIGINT, both a stop from outside).
_SIGTERM = re.compile(r"terminated|-15\b|SIGTERM|code 143|signal_handler|_interrupt_init")
# Lines that belong to the traceback the interrupt printed: its header, frames and their code lines, the
# interrupt itself.
_TRACEBACK_PART = re.compile(
    r"^(?:Traceback \(most recent call last\)|File \"|KeyboardInterrupt\b|raise KeyboardInterrupt|\^+$|"
    r"During handling of the above exception|The above exception was the direct cause)"
)
# What vLLM was doing, from its own start-up lines (vllm/model_executor/model_loader, vllm/compilation/backends.py
# and monitor.py, the model runners' CUDA graph capture and memory profiling): the last one seen before the stop.
_PHASES = (
    (
        "loading the weights",
        re.compile(r"Loading safetensors checkpoint shards|Starting to load model|Loading (?:model )?weights"),
    ),
    (
        "compiling the model (torch.compile)",
        re.compile(
            r"Dynamo bytecode transform time|Start compiling function|Compiling a graph for|for vLLM's torch\.compile|Cache the graph of"
        ),
    ),
    (
        "profiling memory for the KV cache",
        re.compile(
            r"torch\.compile (?:takes|took) [\d.]+ ?s in total|Initial profiling/warmup run|Memory profiling takes|Available KV cache memory|# GPU blocks"
        ),
    ),
    ("capturing CUDA graphs", re.compile(r"Capturing (?:CUDA graph|cudagraph)", re.IGNORECASE)),
)


def stopped_at(view: LogView) -> int | None:
    """Index of the first line saying the process was stopped by SIGTERM before the server was ready; None if none."""
    ready = ready_at(view)
    for line in view.lines:
        if ready is not None and line.idx >= ready:
            return None  # stopped after it was up: a shutdown, not a failed start
        if any(m.search(line.text) for m in MARKERS):
            return line.idx
    return None


def traceback_start(view: LogView, at: int) -> int:
    """Where the traceback that the interrupt at line `at` printed begins (its header, or the first of its frames):
    the lines before it are what happened before the stop."""
    i = at
    while i > 0:
        prev = view.lines[i - 1]
        b = body(prev)
        if b.startswith("Traceback (most recent call last)"):
            return i - 1
        if _TRACEBACK_PART.match(b) or unprefixed(prev)[:1].isspace():
            i -= 1
            continue
        break
    return i


def _phase(lines: list[Line]) -> str:
    last = ""
    for line in lines:
        for name, pattern in _PHASES:
            if pattern.search(line.text):
                last = name
    return last


@analyzer("startup_interrupted")
def startup_interrupted(view: LogView) -> Finding | None:
    at = stopped_at(view)
    if at is None:
        return None
    hits = [(line, None) for line in view.lines[at : at + 200] if any(m.search(line.text) for m in MARKERS)]
    phase = _phase(view.lines[:at])
    doing = f", while {phase}" if phase else ""
    signal = "SIGTERM" if any(_SIGTERM.search(h.text) for h, _ in hits) else "SIGTERM or SIGINT"
    return Finding(
        kind="startup_interrupted",
        title=f"vLLM was stopped from outside during start-up{doing} ({signal}): it never got to serve",
        severity="critical",
        evidence=evidence_of(hits, 2),
        remediation=Remediation(
            summary=f"Nothing in these lines failed: the process was sent {signal} before it was ready, and any traceback that follows is the interrupt, not an error.",
            steps=[
                "Find what stopped it, usually the orchestrator's startup probe or start timeout. Kubernetes: `kubectl get events` shows 'failed startup probe, will be restarted'; give the startupProbe a failureThreshold x periodSeconds above the measured start time (vLLM docs, Using Kubernetes > Troubleshooting). Cloud Run: the startup probe's failure threshold x period. systemd: TimeoutStartSec; a wrapper script or `docker stop`: its own timeout.",
                "Measure one start without the probe (load, compile, warm-up) and set the budget above it"
                + (f"; this one was {phase} when it was stopped." if phase else "."),
                "If nothing was meant to stop it, look at who else sends SIGTERM: a deploy that replaced the instance, a scale-down, a node drain.",
            ],
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )

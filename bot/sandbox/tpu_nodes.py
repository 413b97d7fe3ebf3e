"""What runs on a sandbox TPU node once its queued resource is ACTIVE: vLLM's TPU image, simulated.

The node's spec (the `gemma-sre-spec` metadata the target wrote) says what it serves; the TPU fit decides how it
goes, the way vLLM's TPU worker decides (skills/capacity/tpu_fit.py): weights that leave no HBM stop it with the
worker's ValueError; a model the backend does not serve fails its engine; otherwise XLA precompiles for the
catalog's compile time and the server answers. Its lines go to the simulated Cloud Logging as Docker's gcplogs
driver writes them (log gcplogs-docker-driver, jsonPayload.instance.name = the node, jsonPayload.data = the
line), so `/gemma logs` and `/gemma diagnose` read them through the TPU target's filter. Its HTTP surface
(/health, /v1/models) is served under /nodes/<internal IP>, the address the sandbox maps node IPs to.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.sandbox.clock import SandboxClock
from bot.sandbox.cloud_logging_api import CloudLoggingStandIn
from bot.sandbox.tpu_api import State, TpuStandIn
from skills.capacity.catalog import load_catalog
from skills.capacity.tpu_fit import TpuFitRequest, check_tpu_fit
from skills.targets.tpu.spec import LOG_NAME, spec_from_metadata

LOAD_S = 60.0  # simulated seconds to read the weights (a sandbox choice, not a measurement)


@dataclass
class _Line:
    at: float  # simulated seconds after ACTIVE
    text: str
    severity: str = "INFO"


@dataclass
class _Run:
    node: str
    started: float
    lines: list[_Line]
    ready_at: float | None  # None: never (it failed)
    written: int = 0
    model: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _ts(prefix: str, text: str) -> str:
    return f"(EngineCore pid=7) {prefix} 11-27 10:00:00 [{text}"


def script_for(spec: dict[str, Any], hbm_oom: bool = False) -> tuple[list[_Line], float | None]:
    """The lines vLLM's TPU image prints for this spec, and when it is ready (None: it never is)."""
    cat = load_catalog()
    m = cat.model(spec["model"])
    args = list(spec.get("vllmArgs", []))

    def arg(name: str, default: str) -> str:
        return args[args.index(name) + 1] if name in args and args.index(name) + 1 < len(args) else default

    mml = int(arg("--max-model-len", str(m.default_max_model_len)))
    util = float(arg("--gpu-memory-utilization", "0.9"))
    fit = check_tpu_fit(
        TpuFitRequest(
            model=m.name, accelerator_type=spec["acceleratorType"], max_model_len=mml, gpu_memory_utilization=util
        )
    )
    chips, limit = fit.chips, 30.75
    lines = [
        _Line(
            0,
            _ts(
                "INFO",
                f"utils.py:326] non-default args: {{'model': '{spec['hfRepo']}', 'max_model_len': {mml}, "
                f"'tensor_parallel_size': {chips}, 'gpu_memory_utilization': {util}}}",
            ),
        ),
        _Line(5, _ts("INFO", f"tpu_worker.py:477] Init worker | rank=0 | hbm=[(0.0, {limit})]GiB")),
        _Line(20, _ts("INFO", f"weight_utils.py:100] Downloading weights from HF {spec['hfRepo']}")),
    ]
    used = fit.weights_gib if not hbm_oom else fit.budget_gib + 2.0
    cap = round(limit * chips * util, 2)
    avail = round(cap - used, 2)
    lines.append(
        _Line(
            LOAD_S,
            _ts(
                "INFO",
                f"tpu_worker.py:557] Memory statistics | total_hbm_limit_gb={limit * chips:.2f}GiB | "
                f"total_hbm_limit_cap_gb={cap}GiB | total_hbm_used_gb={used:.2f}GiB | total_hbm_avail_gb={avail}GiB",
            ),
        )
    )
    if avail <= 0:
        lines += [
            _Line(
                LOAD_S + 1,
                f"(EngineCore pid=7) ValueError: total_hbm_used_gb={used:.2f}GiB exceeds total_hbm_limit_cap_gb="
                f"{cap}GiB by {-avail}GiB. Please consider increasing --gpu-memory-utilization from {util} "
                "to a larger value.",
                "ERROR",
            ),
            _Line(LOAD_S + 2, _ts("ERROR", "core.py:1136] EngineCore failed to start."), "ERROR"),
        ]
        return lines, None
    if fit.unsupported:
        lines += [
            _Line(LOAD_S + 1, _ts("INFO", "moe_weights.py:194] w13_weight_w3 shape after padding: (128, 2816, 1024)")),
            _Line(LOAD_S + 2, _ts("ERROR", "core.py:1136] EngineCore failed to start."), "ERROR"),
            _Line(
                LOAD_S + 2,
                _ts(
                    "ERROR",
                    'core.py:1136]   File "/workspace/tpu_inference/tpu_inference/layers/jax/'
                    'moe/moe_weights.py", line 212, in process_weights',
                ),
                "ERROR",
            ),
        ]
        return lines, None
    compile_s = float(fit.compile_s)
    steps = 6
    for i in range(steps):
        at = LOAD_S + 5 + compile_s * i / steps
        tokens = 16 * 2**i
        lines.append(
            _Line(at, _ts("INFO", f"compilation_manager.py:100] Precompile backbone --> {{'num_tokens': {tokens}}}"))
        )
        lines.append(
            _Line(
                at + compile_s / steps - 1,
                _ts("INFO", f"compilation_manager.py:105] Compilation finished in {compile_s / steps - 1:.2f} [secs]."),
            )
        )
    ready = LOAD_S + 10 + compile_s
    lines.append(_Line(ready, "INFO:     Application startup complete."))
    return lines, ready


class TpuNodeSim:
    def __init__(self, tpu: TpuStandIn, logging: CloudLoggingStandIn, clock: SandboxClock, project: str) -> None:
        self.tpu = tpu
        self.logging = logging
        self.clock = clock
        self.project = project
        self.runs: dict[str, _Run] = {}  # node ip -> what runs there
        self.hbm_oom_next = False  # scenario: the next node to start runs out of HBM at load
        self._lock = threading.Lock()

    def _active(self) -> dict[str, tuple[str, dict[str, Any], float]]:
        """ip -> (node id, spec, ACTIVE since) for every ACTIVE queued resource."""
        out = {}
        with self.tpu._lock:
            self.tpu._advance()
            for q in self.tpu.queued.values():
                if q.qr.state.state == State.ACTIVE and q.node.network_endpoints:
                    spec = spec_from_metadata(dict(q.node.metadata)) or {}
                    out[q.node.network_endpoints[0].ip_address] = (q.node_name.rsplit("/", 1)[1], spec, q.since)
        return out

    def tick(self) -> None:
        """Start what became ACTIVE; write the lines that are due; forget nodes that went away."""
        now = self.clock.now()
        active = self._active()
        with self._lock:
            for ip in [ip for ip in self.runs if ip not in active]:
                del self.runs[ip]
            for ip, (node, spec, since) in active.items():
                if ip not in self.runs and spec.get("model"):
                    lines, ready = script_for(spec, hbm_oom=self.hbm_oom_next)
                    self.hbm_oom_next = False
                    self.runs[ip] = _Run(node, since, lines, ready, model=spec.get("hfRepo", ""))
            for run in self.runs.values():
                due = [x for x in run.lines[run.written :] if x.at <= now - run.started]
                if due:
                    self.logging.append([self._entry(run, x) for x in due])
                    run.written += len(due)

    def _entry(self, run: _Run, line: _Line) -> dict[str, Any]:
        return {
            "logName": f"projects/{self.project}/logs/{LOG_NAME}",
            "resource": {"type": "gce_instance", "labels": {"instance_id": run.node}},
            "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "severity": line.severity,
            "jsonPayload": {"instance": {"name": run.node}, "container": {"name": "/vllm"}, "data": line.text},
        }

    def _ready(self, ip: str) -> _Run | None:
        self.tick()
        with self._lock:
            run = self.runs.get(ip)
            if run is None or run.ready_at is None or self.clock.now() - run.started < run.ready_at:
                return None
            return run

    async def _health(self, request: Request) -> Response:
        ready = self._ready(request.path_params["ip"])
        return Response(status_code=200 if ready else 503)

    async def _models(self, request: Request) -> Response:
        run = self._ready(request.path_params["ip"])
        if run is None:
            return Response(status_code=503)
        return JSONResponse({"object": "list", "data": [{"id": run.model, "object": "model", "owned_by": "vllm"}]})

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/nodes/{ip}/health", self._health, methods=["GET"]),
                Route("/nodes/{ip}/v1/models", self._models, methods=["GET"]),
            ]
        )

"""The planner checks itself: read what vLLM printed at start-up, compare it with the prediction, keep it.

vLLM's start-up lines, as its source formats them (vllm-project/vllm; Cloud Logging shows them after vLLM's own
prefix, e.g. "(EngineCore_DP0 pid=93) INFO 11-23 17:44:08 [kv_cache_utils.py:1311] GPU KV cache size: ..."):
  vllm/v1/worker/gpu_model_runner.py  "Model loading took %s GiB memory and %.6f seconds"
                                      (older servers, and vllm/worker/model_runner.py: "Model loading took
                                      %.4f GiB and %.6f seconds", as in tests/data/field_logs_heldout/
                                      vllm23230_oom_l40s_load.log from vllm-project/vllm#23230)
                                      "Graph capturing finished in %.0f secs, took %.2f GiB"
  vllm/compilation/monitor.py         "torch.compile takes %.2f s in total"
  vllm/v1/worker/gpu_worker.py        "Available KV cache memory: %s GiB"
  vllm/v1/core/kv_cache_utils.py      "GPU KV cache size: %s tokens"
                                      "Maximum concurrency for %s tokens per request: %.2fx"
                                      (newer servers print both on one line, joined by ", ")
  vllm/v1/engine/core.py              "init engine (profile, create kv cache, warmup model) took %.2f seconds"
                                      (newer: "took %.2f s (compilation: %.2f s)")
Figures are kept in Redis per service/model/GPU/image, so `/gemma fit` can show "last measured on this service".
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable

from pydantic import BaseModel

from skills.capacity.fit import FitReport
from skills.capacity.fit_types import FitRequest
from skills.ports import Store

_NUM = r"(\d[\d,]*(?:\.\d+)?)"
_PATTERNS: dict[str, re.Pattern[str]] = {
    "weights": re.compile(rf"Model loading took {_NUM} GiB (?:memory )?and {_NUM} seconds"),
    "compile": re.compile(rf"torch\.compile takes {_NUM} s in total"),
    "graphs": re.compile(rf"Graph capturing finished in {_NUM} secs, took {_NUM} GiB"),
    "kv_memory": re.compile(rf"Available KV cache memory: {_NUM} GiB"),
    "kv_tokens": re.compile(rf"GPU KV cache size: {_NUM} tokens"),
    "concurrency": re.compile(rf"Maximum concurrency for {_NUM} tokens per request: {_NUM}x"),
    "engine": re.compile(rf"init engine \(profile, create kv cache, warmup model\) took {_NUM} s(?:econds)?"),
}


def _f(text: str) -> float:
    return float(text.replace(",", ""))


class StartupFigures(BaseModel):
    """What one vLLM start-up reported (None: the line was not seen)."""

    weights_gib: float | None = None
    load_s: float | None = None
    compile_s: float | None = None
    graph_s: float | None = None
    graph_gib: float | None = None
    kv_cache_gib: float | None = None
    kv_cache_tokens: int | None = None
    max_model_len: int | None = None
    max_concurrency: float | None = None
    engine_init_s: float | None = None  # profile + KV cache + compile + graphs + warm-up, after the load
    ready_after_s: float | None = None  # container start to ready, when the caller knows it
    measured_at: float = 0.0  # epoch seconds
    # The KV settings it ran with (the deployed flags as the planner read them): figures measured with others are
    # not this configuration's, and a comparison says so.
    kv_settings: str = ""
    model: str = ""
    gpu: str = ""
    image: str = ""

    @property
    def complete(self) -> bool:
        return self.kv_cache_tokens is not None and self.weights_gib is not None


def parse_startup(lines: Iterable[str]) -> StartupFigures:
    """Pick vLLM's start-up figures out of log lines (any order; later lines win, as after a restart)."""
    out = StartupFigures()
    for line in lines:
        for key, pattern in _PATTERNS.items():
            m = pattern.search(line)
            if not m:
                continue
            g = m.groups()
            if key == "weights":
                out.weights_gib, out.load_s = _f(g[0]), _f(g[1])
            elif key == "compile":
                out.compile_s = _f(g[0])
            elif key == "graphs":
                out.graph_s, out.graph_gib = _f(g[0]), _f(g[1])
            elif key == "kv_memory":
                out.kv_cache_gib = _f(g[0])
            elif key == "kv_tokens":
                out.kv_cache_tokens = int(_f(g[0]))
            elif key == "concurrency":
                out.max_model_len, out.max_concurrency = int(_f(g[0])), _f(g[1])
            elif key == "engine":
                out.engine_init_s = _f(g[0])
    return out


def _pct(pred: float, actual: float) -> str:
    return f"{(pred - actual) / actual * 100:+.1f}%" if actual else "n/a"


def comparison_lines(report: FitReport, seen: StartupFigures) -> list[str]:
    """Predicted vs actual, one line per figure vLLM reported."""
    rows: list[tuple[str, float, float | None, str]] = [
        ("weights", report.weights_gib, seen.weights_gib, "GiB"),
        ("KV cache memory", report.kv_cache_gib / max(report.request.gpu_count, 1), seen.kv_cache_gib, "GiB"),
        ("GPU KV cache size", float(report.kv_cache_tokens), seen.kv_cache_tokens, "tokens"),
        ("max concurrency", report.max_concurrency, seen.max_concurrency, "x"),
    ]
    out = []
    for label, pred, actual, unit in rows:
        if actual is None:
            continue
        fmt = (lambda v: f"{v:,.0f}") if unit == "tokens" else (lambda v: f"{v:,.2f}")
        out.append(f"{label}: predicted {fmt(pred)} {unit}, vLLM {fmt(actual)} {unit} ({_pct(pred, actual)})")
    if seen.max_model_len and seen.max_model_len != report.request.max_model_len:
        out.append(
            f"vLLM ran with max-model-len {seen.max_model_len:,}, the plan assumed {report.request.max_model_len:,}"
        )
    return out


def cold_start_lines(report: FitReport, seen: StartupFigures, probe_budget_s: int) -> list[str]:
    """The cold start as it happened, phase by phase, against the startup probe's budget."""
    parts = [
        ("weights load", seen.load_s),
        ("torch.compile", seen.compile_s),
        ("CUDA graphs", seen.graph_s),
        ("engine init (profile + KV + compile + graphs + warm-up)", seen.engine_init_s),
    ]
    out = [f"{name}: {v:.0f} s" for name, v in parts if v is not None]
    total = seen.ready_after_s
    if total is None and seen.load_s is not None:
        total = seen.load_s + (seen.engine_init_s or 0.0)
    if total is not None:
        share = total / probe_budget_s * 100 if probe_budget_s else 0.0
        out.append(
            f"cold start {total:.0f} s (predicted {report.cold_start_s:.0f} s) = {share:.0f}% of the "
            f"{probe_budget_s} s startup-probe budget"
        )
        if share > 80:
            out.append(":warning: less than 20% headroom: raise the probe's failure threshold before the next deploy")
    return out


def kv_settings(request: FitRequest) -> str:
    """The settings a KV-cache figure depends on besides model and GPU, as flags (one wording for save and compare)."""
    return (
        f"--max-model-len {request.max_model_len} --kv-cache-dtype {request.kv_cache_dtype} "
        f"--gpu-memory-utilization {request.gpu_memory_utilization:g}"
        + (f" --cpu-offload-gb {request.cpu_offload_gb:g}" if request.cpu_offload_gb else "")
        + (" --enforce-eager" if request.enforce_eager else "")
    )


def _key(prefix: str, service: str, model: str, gpu: str, image: str) -> str:
    return f"{prefix}:svc:{service}:{model}:{gpu}:{image}"


async def save_figures(
    r: Store, prefix: str, service: str, model: str, gpu: str, image: str, seen: StartupFigures
) -> None:
    """Keep the figures per service/model/GPU/image, and which was last for the service."""
    seen = seen.model_copy(
        update={"measured_at": seen.measured_at or time.time(), "model": model, "gpu": gpu, "image": image}
    )
    key = _key(prefix, service, model, gpu, image)
    await r.set(key, seen.model_dump_json())
    await r.set(f"{prefix}:last:{service}", key)


async def load_figures(r: Store, prefix: str, service: str, model: str, gpu: str, image: str) -> StartupFigures | None:
    raw = await r.get(_key(prefix, service, model, gpu, image))
    return StartupFigures.model_validate_json(raw) if raw else None


async def last_figures(r: Store, prefix: str, service: str) -> StartupFigures | None:
    """The figures last measured on a service (with the model, GPU and image they were measured with)."""
    key = await r.get(f"{prefix}:last:{service}")
    if not key:
        return None
    raw = await r.get(key.decode() if isinstance(key, bytes) else str(key))
    return StartupFigures.model_validate_json(raw) if raw else None

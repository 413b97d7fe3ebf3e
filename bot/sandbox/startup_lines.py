# ruff: noqa: E501  (log lines are quoted as the programs print them)
"""What a vLLM container on Cloud Run prints while it starts, and how it dies: the simulated revision's log.

Sources of the wording:
- vLLM's start-up and failure lines (platform detection, non-default args, engine config, "Starting to load
  model", the safetensors tqdm bar, "Model loading took", "Available KV cache memory", "GPU KV cache size",
  the KV-cache ValueError, the CUDA-graph OutOfMemoryError traceback, "EngineCore failed to start") and
  Cloud Run's system lines ("Starting new instance. Reason: DEPLOYMENT_ROLLOUT ...", "STARTUP HTTP probe
  failed N times consecutively ...", "Container called exit(1).") are copied from the bundled example
  scenarios, bot/sandbox/data/scenarios/*.jsonl (modelled on real vLLM 0.12 output on Cloud Run; see their
  README), with only the numbers changed.
- Cloud Run's memory-limit line: "Memory limit of N MiB exceeded with M MiB used. Consider increasing the
  memory limit, see https://cloud.google.com/run/docs/configuring/memory-limits" (field notes: 'Memory limit of
  16384 MiB exceeded').
- FUSE: Python's PermissionError for a file under the mount (field notes: Permission denied under
  /mnt/models when the mount lacks uid=1001;gid=1001).
- An image too old for the model: Transformers' unknown-architecture ValueError (transformers
  models/auto/configuration_auto.py AutoConfig.from_pretrained: "The checkpoint you are trying to load has model
  type `X` but Transformers does not recognize this architecture ..."; field: vllm-project/vllm#14696 in
  tests/data/field_logs).
- An image too new for the GPU's driver: PyTorch's "The NVIDIA driver on your system is too old (found version
  N)" (c10/cuda/CUDAFunctions.cpp, raised from torch/cuda/__init__.py _lazy_init; N is the driver's CUDA
  version as 1000 x major + 10 x minor), then vLLM's "EngineCore failed to start".
- Gated model: huggingface_hub's GatedRepoError for an unauthenticated (401) download, as quoted in public
  reports: "401 Client Error. Cannot access gated repo for url https://huggingface.co/<repo>/resolve/main/
  config.json. Access to model <repo> is restricted. You must have access to it and be authenticated to
  access it."
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

VLLM_VERSION = "0.12.0"  # what the example scenarios print; used when the image tag names no version
INSTANCE_START = (
    "Starting new instance. Reason: DEPLOYMENT_ROLLOUT - Instance started due to traffic shifting between "
    "revisions due to deployment, traffic split adjustment, or deployment health check."
)
CONTAINER_FAILED = (
    "Revision '{rev}' is not ready and cannot serve traffic. The user-provided container failed to start and "
    "listen on the port defined provided by the PORT=8080 environment variable within the allocated timeout."
)
PROBE_FAILED = (
    "Revision '{rev}' is not ready and cannot serve traffic. The user-provided container failed the configured "
    "startup probe checks. Logs for this revision might contain more information."
)
_VENV = "/usr/local/lib/python3.12/dist-packages"


@dataclass
class Line:
    at: float  # simulated seconds after the revision was created
    text: str
    severity: str = "INFO"
    log: str = "stderr"  # or "varlog/system" (Cloud Run's own lines)
    vllm: str = ""  # "INFO" / "ERROR" / "WARNING": vLLM's logger prefix with its timestamp, added when written


def image_version(image: str) -> str:
    """vLLM's version from an image tag such as vllm/vllm-openai:v0.12.0 (or -cu129 builds)."""
    m = re.search(r":v?(\d+\.\d+\.\d+)", image or "")
    return m.group(1) if m else VLLM_VERSION


def engine_config_lines(at: float, cfg: dict[str, Any]) -> list[Line]:
    """From platform detection to "Starting to load model" (about 3 s, as in the examples)."""
    model, mml = cfg["model"], cfg["max_model_len"]
    version = image_version(cfg.get("image", ""))
    args = {
        "model": model,
        "max_model_len": mml,
        "gpu_memory_utilization": cfg["gpu_memory_utilization"],
        "kv_cache_dtype": cfg["kv_cache_dtype"],
        "enable_auto_tool_choice": True,
        "tool_call_parser": "gemma4",
        "host": "0.0.0.0",
        "port": 8080,
    }
    if cfg.get("enforce_eager"):
        args["enforce_eager"] = True
    return [
        Line(at, "[__init__.py:235] Automatically detected platform cuda.", vllm="INFO"),
        Line(at + 0.4, f"[api_server.py:1090] vLLM API server version {version}", vllm="INFO"),
        Line(at + 0.8, f"[utils.py:326] non-default args: {args!r}", vllm="INFO"),
        Line(at + 1.2, "[model.py:631] Resolved architecture: Gemma4ForConditionalGeneration", vllm="INFO"),
        Line(at + 1.6, f"[model.py:1780] Using max model len {mml}", vllm="INFO"),
        Line(
            at + 2.0,
            f"[core.py:77] Initializing a V1 LLM engine (v{version}) with config: model='{model}', "
            f"dtype=torch.bfloat16, max_seq_len={mml}, tensor_parallel_size={cfg.get('gpu_count', 1)}, "
            f"quantization=compressed-tensors, enforce_eager={bool(cfg.get('enforce_eager'))}, "
            f"kv_cache_dtype={cfg['kv_cache_dtype']}, seed=0",
            vllm="INFO",
        ),
        Line(
            at + 2.4,
            "[parallel_state.py:1208] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0, EP rank 0",
            vllm="INFO",
        ),
        Line(at + 2.8, f"[gpu_model_runner.py:2338] Starting to load model {model}...", vllm="INFO"),
    ]


def _clock(s: float) -> str:
    s = int(s)
    return f"{s // 60:02d}:{s % 60:02d}"


def shard_lines(at: float, load_s: float, shards: int, upto: int | None = None) -> list[Line]:
    """vLLM's tqdm bar over the checkpoint shards, one line per shard (`upto` stops early)."""
    per = load_s / shards
    out = []
    for i in range(1, (upto or shards) + 1):
        pct = int(100 * i / shards)
        out.append(
            Line(
                at + i * per,
                f"Loading safetensors checkpoint shards: {pct:3d}% Completed | {i}/{shards} "
                f"[{_clock(i * per)}<{_clock((shards - i) * per)}, {per:.2f}s/it]",
            )
        )
    return out


def loaded_line(at: float, weights_gib: float, load_s: float) -> Line:
    return Line(
        at, f"[gpu_model_runner.py:2392] Model loading took {weights_gib:.2f} GiB and {load_s:.2f} seconds", vllm="INFO"
    )


def ready_lines(at: float, kv_gib: float, kv_tokens: int) -> list[Line]:
    return [
        Line(at, f"[gpu_worker.py:298] Available KV cache memory: {kv_gib:.2f} GiB", vllm="INFO"),
        Line(at + 0.5, f"[kv_cache_utils.py:1087] GPU KV cache size: {kv_tokens:,} tokens", vllm="INFO"),
        Line(at + 1.0, "[api_server.py:1885] Starting vLLM API server 0 on http://0.0.0.0:8080", vllm="INFO"),
        Line(at + 1.5, "INFO:     Started server process [1]"),
        Line(at + 2.0, "INFO:     Application startup complete."),
    ]


# The CUDA device name torch reports, where vLLM's bf16 refusal names it ("Your Tesla T4 GPU has compute capability
# 7.5": the refusal as quoted in skills/data/aca.yaml sources.vllm_bf16); else the catalog GPU's name.
CUDA_DEVICE = {"t4": "Tesla T4"}


def bf16_lines(at: float, gpu: str, compute_capability: float) -> list[Line]:
    """vLLM refusing bfloat16 on a GPU below compute capability 8.0 (the model's dtype, with no `--dtype half`)."""
    text = (
        "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your "
        f"{CUDA_DEVICE.get(gpu, gpu)} GPU has compute capability {compute_capability:g}. You can use float16 instead "
        "by explicitly setting the `dtype` flag in CLI, for example: --dtype=half."
    )
    return [Line(at, text, severity="ERROR"), *engine_dies(at + 0.5)]


def engine_dies(at: float) -> list[Line]:
    return [
        Line(at, "[core.py:708] EngineCore failed to start.", severity="ERROR", vllm="ERROR"),
        Line(
            at + 0.4,
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
            severity="ERROR",
        ),
        Line(at + 1.4, "Container called exit(1).", log="varlog/system"),
    ]


def kv_failure_lines(at: float, mml: int, needed_gib: float, free_gib: float, fits: int) -> list[Line]:
    return [
        Line(at, f"[gpu_worker.py:298] Available KV cache memory: {free_gib:.2f} GiB", vllm="INFO"),
        Line(at + 0.4, "Traceback (most recent call last):", severity="ERROR"),
        Line(
            at + 0.4,
            f'  File "{_VENV}/vllm/v1/core/kv_cache_utils.py", line 702, in check_enough_kv_cache_memory',
            severity="ERROR",
        ),
        Line(
            at + 0.5,
            f"ValueError: To serve at least one request with the models's max seq len ({mml}), ({needed_gib:.2f} GiB "
            f"KV cache is needed, which is larger than the available KV cache memory ({free_gib:.2f} GiB). Based on "
            f"the available memory, the estimated maximum model length is {fits}. Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
            severity="ERROR",
        ),
        *engine_dies(at + 0.6),
    ]


def cuda_oom_lines(at: float, tried_gib: float, total_gib: float, free_gib: float, in_graphs: bool) -> list[Line]:
    """torch's OutOfMemoryError, while capturing CUDA graphs (warm-up) or while loading the weights."""
    used = max(total_gib - free_gib, 0.0)
    where = (
        [
            Line(
                at,
                "[backends.py:548] Using cache directory: /root/.cache/vllm/torch_compile_cache/3f2a/rank_0_0/backbone for vLLM's torch.compile",
                vllm="INFO",
            ),
            Line(at + 0.4, "Traceback (most recent call last):", severity="ERROR"),
            Line(
                at + 0.4,
                f'  File "{_VENV}/vllm/v1/worker/gpu_model_runner.py", line 3120, in capture_model',
                severity="ERROR",
            ),
            Line(at + 0.4, "    self._capture_cudagraphs(", severity="ERROR"),
        ]
        if in_graphs
        else [
            Line(at + 0.4, "Traceback (most recent call last):", severity="ERROR"),
            Line(
                at + 0.4,
                f'  File "{_VENV}/vllm/v1/worker/gpu_model_runner.py", line 2340, in load_model',
                severity="ERROR",
            ),
        ]
    )
    return [
        *where,
        Line(at + 0.4, f'  File "{_VENV}/torch/_ops.py", line 1243, in __call__', severity="ERROR"),
        Line(
            at + 0.5,
            f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried_gib:.2f} GiB. GPU 0 has a total "
            f"capacity of {total_gib:.2f} GiB of which {free_gib:.2f} GiB is free. Process 1148 has {used:.2f} GiB "
            f"memory in use. Of the allocated memory {max(used - 0.8, 0):.2f} GiB is allocated by PyTorch, and "
            "412.33 MiB is reserved by PyTorch but unallocated.",
            severity="ERROR",
        ),
        *engine_dies(at + 0.6),
    ]


def host_memory_lines(at: float, limit_mib: int, used_mib: int) -> list[Line]:
    return [
        Line(
            at,
            f"Memory limit of {limit_mib} MiB exceeded with {used_mib} MiB used. Consider increasing the memory "
            "limit, see https://cloud.google.com/run/docs/configuring/memory-limits",
            severity="ERROR",
            log="varlog/system",
        ),
        Line(at + 1.0, "Container called exit(137).", log="varlog/system"),
    ]


def probe_lines(initial_s: float, period_s: float, threshold: int) -> list[Line]:
    """Cloud Run's startup probe giving up: one warning per failed check, then the terminal error."""
    tail = 'for container "vllm-1" on port 8080 path "/health".'
    out = [
        Line(
            initial_s + n * period_s,
            f"STARTUP HTTP probe failed {n} time{'s' if n > 1 else ''} consecutively {tail} The instance has not yet started.",
            severity="WARNING",
            log="varlog/system",
        )
        for n in range(1, threshold + 1)
    ]
    end = initial_s + threshold * period_s
    out.append(
        Line(
            end + 1,
            f"STARTUP HTTP probe failed {threshold} times consecutively {tail} The instance was not started.",
            severity="ERROR",
            log="varlog/system",
        )
    )
    out.append(Line(end + 2, "Container called exit(0).", log="varlog/system"))
    return out


def fuse_denied_lines(at: float, model_path: str) -> list[Line]:
    return [
        Line(at, "Traceback (most recent call last):", severity="ERROR"),
        Line(at + 0.1, f"PermissionError: [Errno 13] Permission denied: '{model_path}/config.json'", severity="ERROR"),
        Line(at + 1.0, "Container called exit(1).", log="varlog/system"),
    ]


def gated_lines(at: float, repo: str) -> list[Line]:
    return [
        Line(at, "Traceback (most recent call last):", severity="ERROR"),
        Line(
            at + 0.1,
            f"huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url "
            f"https://huggingface.co/{repo}/resolve/main/config.json. Access to model {repo} is restricted. "
            "You must have access to it and be authenticated to access it.",
            severity="ERROR",
        ),
        Line(at + 1.0, "Container called exit(1).", log="varlog/system"),
    ]


def unknown_architecture_lines(at: float, model_type: str) -> list[Line]:
    """An image whose Transformers predates the model: AutoConfig refuses the checkpoint's model type."""
    return [
        Line(at, "Traceback (most recent call last):", severity="ERROR"),
        Line(
            at + 0.1,
            f"ValueError: The checkpoint you are trying to load has model type `{model_type}` but Transformers does "
            "not recognize this architecture. This could be because of an issue with the checkpoint, or because your "
            "version of Transformers is out of date.",
            severity="ERROR",
        ),
        Line(at + 1.0, "Container called exit(1).", log="varlog/system"),
    ]


def driver_too_old_lines(at: float, driver_cuda: str) -> list[Line]:
    """An image whose CUDA build needs a newer driver: torch fails to initialise CUDA in the engine core."""
    major, minor = (int(x) for x in driver_cuda.split(".")[:2])
    return [
        Line(at, "[core.py:708] EngineCore failed to start.", severity="ERROR", vllm="ERROR"),
        Line(at + 0.1, "Traceback (most recent call last):", severity="ERROR"),
        Line(at + 0.1, f'  File "{_VENV}/torch/cuda/__init__.py", line 372, in _lazy_init', severity="ERROR"),
        Line(
            at + 0.2,
            f"RuntimeError: The NVIDIA driver on your system is too old (found version {major * 1000 + minor * 10}). "
            "Please update your GPU driver by downloading and installing a new version from the URL: "
            "http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch "
            "version that has been compiled with your version of the CUDA driver.",
            severity="ERROR",
        ),
        *engine_dies(at + 0.3)[1:],
    ]

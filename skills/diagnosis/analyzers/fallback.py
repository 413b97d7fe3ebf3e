# ruff: noqa: E501  (remediation prose and log wordings read better unbroken)
"""The start-up fatal fallback: a traceback or fatal error before the server is ready that no kind explains.

vLLM's own summary ("EngineCore failed to start." in vllm/v1/engine/core.py run_engine_core, "Engine core
initialization failed. See root cause above." in vllm/v1/engine/utils.py wait_for_engine_startup) is not
always in what people paste: a worker's traceback (V1 multiproc_executor.py "WorkerProc hit an exception" /
"WorkerProc failed to start", the older engine's worker_base.py "Error executing method ..." and
multiproc_worker_utils.py lines), the older engine's `engine.py:389]` format (vllm/engine/multiprocessing/
engine.py run_mp_engine), or a bare exception (a model's NotImplementedError, a kernel's shape check,
vLLM's own ValueError after argparse) may be all there is. Such a log still gets a finding, quoting its first
decisive line: `engine_startup_failed` when the engine had started (its lines or frames are there),
`container_exited_at_start` when the process died before it (import time, argument validation).

`run_all` calls this only when no start-up kind applied: a specific kind always wins, and what it explains
stays its consequence (causes.py).

Two refinements from issue 52's real logs:
- A server stopped from outside during start-up (interrupted.py) prints its SIGTERM handler's traceback; that
  traceback is not an error. Only the lines before it are read, and only a real exception line there counts: with
  none, the stop itself is the finding (`startup_interrupted`).
- A quantized layer whose size on each GPU does not divide by its kernel's tile or block fails while the engine
  builds or loads the model, so it is `engine_startup_failed` even when the paste shows no engine line, and the
  finding says what does not divide and what changes it (`kernel_shape`).
"""

from __future__ import annotations

import re

from skills.diagnosis.analyzers.base import Line, LogView, first_seen
from skills.diagnosis.analyzers.interrupted import stopped_at, traceback_start
from skills.diagnosis.analyzers.lines import before_ready, body
from skills.diagnosis.findings import Finding, Remediation
from skills.text import shorten

# A Python exception line: `RuntimeError: ...`, `torch.OutOfMemoryError: ...`, a bare `AssertionError`.
_EXC = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?::\s|:?$)")
# Standing alone (no traceback pasted with it), only Python's and torch's own exception types count: other
# systems' logs (Java, gRPC clients) name exceptions too (tests/data/loghub).
_BUILTIN = re.compile(
    r"^(?:torch\.(?:\w+\.)*\w+Error|RuntimeError|ValueError|ImportError|ModuleNotFoundError|NotImplementedError|"
    r"AssertionError|KeyError|TypeError|AttributeError|OSError|FileNotFoundError|IndexError|ZeroDivisionError)(?::\s|:?$)"
)
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\)|^File \"[^\"]+\", line \d+, in \S")
# Workers' own error lines (vllm/v1/executor/multiproc_executor.py, vllm/worker/worker_base.py,
# vllm/executor/multiproc_worker_utils.py "Exception in worker ... while processing method ...").
_WORKER = re.compile(
    r"WorkerProc hit an exception|WorkerProc failed to start|Error executing method|Exception in worker \S+ while processing method"
)
# Frames of a running server's step (not start-up): a crash while serving is not a start-up failure.
_STEP = re.compile(
    r", in (?:execute_model|worker_busy_loop|step|step_async|run_busy_loop|_process_engine_step)\b|WorkerProc hit an exception"
)
_START = re.compile(
    r", in (?:run_engine_core|run_mp_engine|\w*initialize\w*|determine_\w+|profile_run|_dummy_run|load_model|init_worker|"
    r"init_device|capture_model|compile_or_warm_up_model|_init_executor|wait_for_ready|from_engine_args|from_vllm_config|"
    r"_init_engine|__init__|<module>)\b"
)
# The engine had started: its processes, its loading lines, or frames inside vLLM's engine, worker, executor or
# model code (import-time `<module>` frames do not count: importing vllm.engine is not starting it).
_ENGINE = re.compile(
    r"EngineCore|LLM engine|LLMEngine|VllmWorker|Worker_TP|WorkerProc|RayWorkerWrapper|_AsyncLLMEngine|Model loading took|"
    r"Loading (?:model )?weights took|\b(?:core|gpu_model_runner|gpu_worker|model_runner|worker|multiproc_executor|"
    r"multiproc_worker_utils|worker_base|engine|llm_engine|async_llm_engine|default_loader|kv_cache_utils|parallel_state|"
    r"ray_utils)\.py:\d+\]|File \"[^\"]*/vllm/(?:v1/)?(?:engine|worker|executor|model_executor|attention|distributed|core)/[^\"]*\", line \d+, in (?!<module>)"
)
# A traceback cut before its exception says something about vLLM only through vLLM's own error lines or frames
# (a bare multiprocessing frame does not: tests/data/field_logs_heldout vllm7655 stays silent).
_VLLM_ERROR = re.compile(
    r"^(?:ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d|File \"[^\"]*/vllm/[^\"]*\", line \d+, in (?!<module>)"
)
# vLLM's summaries and re-raises say that it failed, not why.
_NOT_DECISIVE = re.compile(
    r"Engine core initialization failed|EngineCore failed to start|Engine process failed|^raise "
)


def _decisive(lines: list[Line]) -> tuple[Line | None, bool]:
    """(the first decisive line, whether it is an exception line) of the part before the server was ready."""
    for line in lines:
        b = body(line)
        if _EXC.match(b) and not _NOT_DECISIVE.search(b):
            return line, True
    for line in lines:
        if _TRACEBACK.match(body(line)) or _WORKER.search(line.text) or line.severity in ("ERROR", "CRITICAL"):
            return line, False
    return None, False


# Shape checks of quantized kernels: a layer's size on each GPU that does not divide by the kernel's tile or block.
# Sources: vLLM's FP8 block quantization (vllm/model_executor/layers/quantization/fp8.py create_weights: "The
# output_size of gate's and up's weight = N is not divisible by weight quantization block_n = M."; fp8_utils.py:
# "Weight output_partition_size = N is not divisible by weight quantization block_n = M."), Marlin's
# (quantization/utils/marlin_utils.py verify_marlin_supports_shape: "Weight input_size_per_partition = N is not
# divisible by min_thread_k = M."), and the kernels' own TORCH_CHECKs (csrc/quantization/gptq_marlin/
# gptq_marlin_repack.cu: "size_n = N is not divisible by tile_n_size = M"; csrc/moe/marlin_moe_wna16/ops.cu:
# "size_k = N, is not divisible by b_scales.size(1) = M").
_KERNEL_SHAPE = re.compile(
    r"(?P<what>(?:[\w'.()\[\]]+ ){0,6}?[\w'.()\[\]]+) = (?P<size>\d+),? is not divisible by "
    r"(?P<by>(?:[\w.()\[\]]+ ){0,3}?[\w.()\[\]]+) = (?P<tile>\d+)"
)


def kernel_shape(lines: list[Line]) -> tuple[Line, re.Match[str]] | None:
    """The first line where a quantized kernel refuses a layer's shape, with its match."""
    for line in lines:
        if m := _KERNEL_SHAPE.search(line.text):
            return line, m
    return None


def kernel_shape_steps(m: re.Match[str]) -> list[str]:
    """What changes a layer's size on each GPU: the parallelism, or the checkpoint."""
    return [
        f"A quantized layer's size on each GPU is not a multiple of what its kernel works in: {m.group(0).strip()}. "
        f"That size is the layer's size divided by --tensor-parallel-size: choose a --tensor-parallel-size that leaves a multiple of {m.group('tile')} "
        "(vLLM's Marlin check itself advises reducing tensor_parallel_size).",
        "For a mixture-of-experts model, --enable-expert-parallel keeps each expert whole on one GPU instead of splitting it "
        "(the vLLM recipes' fix for FP8 MoE checkpoints at tensor-parallel-size 8).",
        "Or serve a checkpoint quantized another way (another method or block size) that divides at this parallelism.",
    ]


def startup_fatal(view: LogView) -> Finding | None:
    lines = before_ready(view)
    stopped = stopped_at(view)
    if stopped is not None:
        # Stopped from outside (SIGTERM): its traceback is not an error; read what came before it, exceptions only.
        lines = lines[: traceback_start(view, stopped)]
    texts = [body(line) for line in lines]
    traceback = any(_TRACEBACK.match(t) for t in texts) or any(_WORKER.search(line.text) for line in lines)
    line, is_exception = _decisive(lines)
    if line is None or (stopped is not None and not is_exception):
        return None
    shape = kernel_shape(lines)
    if not traceback and not (is_exception and _BUILTIN.match(body(line))) and shape is None:
        return None
    joined = "\n".join(line.text for line in lines)
    if not is_exception and not any(_VLLM_ERROR.search(t) for t in [*texts, *(x.text for x in lines)]):
        return None
    if _STEP.search(joined) and not _START.search(joined.replace(", in __init__", "")):
        return None  # a worker crashed while serving a step: not a start-up failure
    quote = body(line)
    if shape is not None:
        shape_line, m = shape
        evidence = list(dict.fromkeys([shape_line.evidence(), line.evidence()]))
        return Finding(
            kind="engine_startup_failed",
            title=f"vLLM engine failed to start: a quantized layer does not fit its kernel ({shorten(m.group(0).strip(), 160)})",
            severity="critical",
            evidence=evidence,
            remediation=Remediation(
                summary="vLLM's engine refused a quantized layer's shape while it built or loaded the model, so it never listened.",
                steps=kernel_shape_steps(m),
            ),
            first_seen=first_seen([(shape_line, None)]),
            count=1,
        )
    engine = bool(_ENGINE.search(joined))
    what = quote if is_exception else "its own error line is not in these logs; the first error line is quoted"
    if engine:
        return Finding(
            kind="engine_startup_failed",
            title=f"vLLM engine failed to start: {quote[:160]}",
            severity="critical",
            evidence=[line.evidence()],
            remediation=Remediation(
                summary="vLLM's engine died before the server was ready, so it never listened.",
                steps=[
                    f"Fix the first error, which is the cause: {what[:300]}",
                    "When it is cut off, widen the log window to the worker / EngineCore lines before it, or redeploy with VLLM_LOGGING_LEVEL=DEBUG.",
                ],
            ),
            first_seen=first_seen([(line, None)]),
            count=1,
        )
    return Finding(
        kind="container_exited_at_start",
        title=f"Container exited at start: {quote[:160]}",
        severity="critical",
        evidence=[line.evidence()],
        remediation=Remediation(
            summary=f"The first decisive error, before vLLM's engine started: {quote[:300]}",
            steps=[
                "Fix what it names: an argument vLLM validates after parsing (a --chat-template path, a value out of range), or a broken install in the image.",
                "A longer startup probe cannot help: the process exits before it ever listens.",
            ],
        ),
        first_seen=first_seen([(line, None)]),
        count=1,
    )

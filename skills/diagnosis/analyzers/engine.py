# ruff: noqa: E501  (remediation prose and log wordings read better unbroken)
"""The vLLM engine itself: hung (NCCL watchdog, no progress), torch.compile failed, failed to start, or a
--max-model-len above what the model supports."""

from __future__ import annotations

import re

from skills.diagnosis.analyzers.base import Line, LogView, analyzer, evidence_of, first_seen, rx
from skills.diagnosis.analyzers.fallback import kernel_shape, kernel_shape_steps
from skills.diagnosis.analyzers.interrupted import stopped_at
from skills.diagnosis.analyzers.lines import body
from skills.diagnosis.findings import Finding, ProposedAction, Remediation
from skills.text import shorten

# vLLM logs its own prefix ("ERROR 05-27 11:47:57 [core.py:396] ", the older engine's "... engine.py:389] ") inside
# the text, under compose / torch rank prefixes; exception lines follow it (lines.body strips them all).
_EXC = re.compile(r"^(?:[\w]+\.)*\w*(?:Error|Exception|Failed)(?::|$)")


def _body(line: Line) -> str:
    return body(line)


# Sources: PyTorch's NCCL process group (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp: "Watchdog caught collective
# operation timeout: WorkNCCL(... Timeout(ms)=N)"), the older engine's loop (vllm/engine/async_llm_engine.py
# run_engine_loop: "Engine iteration timed out. This should never happen!"), V1's RPC timeout.
_HANG = rx(
    r"Watchdog caught collective operation timeout",
    r"[Ww]atchdog thread terminated with exception",
    r"ProcessGroupNCCL.{0,120}(?:[Tt]imeout at NCCL work|timed out)",
    r"NCCL operations have failed or timed out",
    r"Engine iteration timed out",
    r"RPC call to [\w.]+ timed out",
)
# A stall: requests running, nothing prefilled or generated, interval after interval.
_STATS = re.compile(
    r"Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: ([\d.]+) tokens/s, Running: (\d+) reqs?"
)
STALLED_INTERVALS = 3


def _stalled(view: LogView) -> list[tuple[Line, re.Match[str]]]:
    run: list[tuple[Line, re.Match[str]]] = []
    for line in view.lines:
        m = _STATS.search(line.text)
        if not m:
            continue
        if int(m.group(3)) > 0 and float(m.group(1)) == 0 and float(m.group(2)) == 0:
            run.append((line, m))
            if len(run) >= STALLED_INTERVALS:
                return run
        else:
            run = []
    return []


@analyzer("engine_hung")
def engine_hung(view: LogView) -> Finding | None:
    hits = view.grep(*_HANG)
    stalled = _stalled(view)
    if not hits and not stalled:
        return None
    timeout = next((m.group(1) for h, _ in hits if (m := re.search(r"Timeout\(ms\)=(\d+)", h.text))), None)
    detail = f" (a collective timed out after {int(timeout) // 1000} s)" if timeout else ""
    evidence = evidence_of(stalled[:1] + hits, 3)
    return Finding(
        kind="engine_hung",
        title="vLLM engine hung: no progress" + detail,
        severity="critical",
        evidence=evidence,
        remediation=Remediation(
            summary="The engine stopped making progress: a GPU collective (NCCL) or the engine loop never completed, so requests wait until they time out.",
            steps=[
                "Restart onto a fresh instance (deploy a new revision); a hung engine does not recover by itself.",
                "If it recurs, redeploy with NCCL_DEBUG=INFO to see which rank stalls; one GPU per instance (tensor-parallel-size 1) needs no NCCL at all.",
            ],
        ),
        first_seen=first_seen(stalled[:1] + hits),
        count=len(hits) + len(stalled),
    )


# torch.compile failing, decided by the exception and by what the engine was doing, never by a frame's path alone
# (issue 52):
# - the exception: torch's compile errors (torch/_dynamo/exc.py BackendCompilerFailed and the other torch._dynamo.exc
#   classes; torch/_inductor/exc.py InductorError and the other torch._inductor.exc classes), wherever they occur;
# - or, when that line is not in the log, the compiler at work: a frame of torch._inductor's or torch._dynamo's
#   compile-time modules, or a vLLM compilation function that compiles (`compile*`, `call_module` of the piecewise
#   backend), called from a running function, not an import (`in <module>`).
# Not evidence: vllm/compilation's wrappers that *run* an already compiled graph (caching.py / cuda_graph.py
# `__call__`, a decorator's `__call__`), or any frame on the import path of another error; and frames at all when
# nothing was compiled (--enforce-eager: vllm/config/vllm.py warns "Enforce eager set, disabling torch.compile") or
# when the process was stopped from outside while compiling (interrupted.py: the traceback is the interrupt's).
_COMPILE_EXC_LINE = rx(
    r"BackendCompilerFailed",
    r"\bInductorError\b",
    r"torch\._inductor\.exc\.\w+",
    r"torch\._dynamo\.exc\.\w+",
)
_COMPILER_FRAME = rx(
    r'File "[^"]*[/\\]torch[/\\]_inductor[/\\](?:compile_fx|graph|scheduler|codegen|pattern_matcher|fx_passes|runtime[/\\]compile_tasks)[^"]*", line \d+, in (?!<module>)',
    r'File "[^"]*[/\\]torch[/\\]_inductor[/\\]codecache[^"]*", line \d+, in (?!<module>|__call__\b)',
    r'File "[^"]*[/\\]torch[/\\]_dynamo[/\\](?:output_graph|symbolic_convert|convert_frame)[^"]*", line \d+, in (?!<module>)',
    r'File "[^"]*[/\\]vllm[/\\]compilation[/\\][^"]*", line \d+, in (?:\w*compile\w*|call_module)\b',
)
_COMPILE_EXC = re.compile(
    r"(?:BackendCompilerFailed|InductorError|torch\._inductor\.exc\.\w+|torch\._dynamo\.exc\.\w+)[^\n]{0,200}"
)
_EAGER = re.compile(r"Enforce eager set, disabling torch\.compile")


def _nothing_compiled(view: LogView) -> bool:
    """--enforce-eager: the config vLLM logged says so, or its warning that torch.compile is off."""
    return any(cfg.get("enforce_eager") is True for _, cfg in view.configs) or bool(view.grep(_EAGER))


@analyzer("torch_compile_failed")
def torch_compile(view: LogView) -> Finding | None:
    hits = view.grep(*_COMPILE_EXC_LINE)
    if not hits and not _nothing_compiled(view) and stopped_at(view) is None:
        hits = view.grep(*_COMPILER_FRAME)
    if not hits:
        return None
    exc = next((m.group(0).strip() for h, _ in hits if (m := _COMPILE_EXC.search(h.text))), "")
    cfg = view.config_at(hits[0][0].idx)
    actions = []
    steps = []
    if cfg.get("enforce_eager") is not True:
        actions.append(ProposedAction(action="redeploy", params={"enforce_eager": True}, reason="skip torch.compile"))
        steps.append(
            "Add `--enforce-eager`: vLLM skips torch.compile and CUDA graphs (slower decoding, but it starts)."
        )
    steps.append(
        "Then pin a vLLM image whose torch build supports this GPU, and drop `--enforce-eager` again once it compiles."
    )
    return Finding(
        kind="torch_compile_failed",
        title="torch.compile failed while vLLM compiled the model" + (f" ({shorten(exc, 120)})" if exc else ""),
        severity="critical",
        evidence=evidence_of(sorted(hits, key=lambda h: -int(bool(_COMPILE_EXC.search(h[0].text))))),
        remediation=Remediation(
            summary="vLLM's compilation of the model (torch.compile / Inductor) raised, so the engine never started.",
            steps=steps,
            actions=actions,
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )


# Sources: vllm/v1/engine/core.py run_engine_core ("EngineCore failed to start."), vllm/v1/engine/utils.py
# wait_for_engine_startup ("Engine core initialization failed. See root cause above."), the older multiprocessing
# engine ("Engine process failed to start"). Without them, fallback.py still reports a fatal start.
_ENGINE_FAIL = rx(
    r"Engine core initialization failed",
    r"EngineCore failed to start",
    r"Engine process failed to start",
    r"RuntimeError: Engine process (?:failed|died)",
)
_ATTEMPT = re.compile(r"Initializing a V\d LLM engine|non-default args:|API server version|args: Namespace\(")
TRACEBACK_LINES = 200
_NOT_CAUSE = re.compile(r"Engine core initialization failed|EngineCore failed to start|Engine process failed|^raise ")


@analyzer("engine_startup_failed")
def engine_startup(view: LogView) -> Finding | None:
    hits = view.grep(*_ENGINE_FAIL)
    if not hits:
        return None
    failed_at = hits[0][0].idx
    # This start attempt: from the last engine start before the failure to the next one (vLLM prints "EngineCore
    # failed to start." and then the traceback that holds the error).
    start = max((x.idx for x in view.lines[:failed_at] if _ATTEMPT.search(x.text)), default=0)
    end = next((x.idx for x in view.lines[failed_at + 1 :] if _ATTEMPT.search(x.text)), len(view.lines))
    first_error = next(
        (
            line
            for line in view.lines[start : min(end, failed_at + TRACEBACK_LINES)]
            if _EXC.match(_body(line)) and not _NOT_CAUSE.search(_body(line))
        ),
        None,
    )
    evidence = ([first_error.evidence()] if first_error else []) + evidence_of(hits, 1)
    shape = kernel_shape(view.lines[start : min(end, failed_at + TRACEBACK_LINES)])
    if shape is not None:  # a quantized layer's shape its kernel refuses (fallback.py): say what does not divide
        title = f"vLLM engine failed to start: a quantized layer does not fit its kernel ({shape[1].group(0).strip()})"
        steps = kernel_shape_steps(shape[1])
        evidence = [shape[0].evidence(), *[e for e in evidence if e != shape[0].evidence()]][:3]
    elif first_error:
        title = f"vLLM engine failed to start: {shorten(_body(first_error), 160)}"
        steps = [f"Fix the first error, which is the cause: {_body(first_error)[:300]}"]
    else:
        title = "vLLM engine failed to start (its own error is not in these logs)"
        steps = [
            "The engine's first error is missing here: widen the log window to the EngineCore / worker lines before this one, or redeploy with VLLM_LOGGING_LEVEL=DEBUG."
        ]
    return Finding(
        kind="engine_startup_failed",
        title=title,
        severity="critical",
        evidence=evidence,
        remediation=Remediation(summary="vLLM's engine core did not start, so the server never listened.", steps=steps),
        first_seen=first_seen(hits),
        count=len(hits),
    )


# Source: vLLM's config validation (vllm/config/model.py _get_and_verify_max_len: "User-specified max_model_len (N)
# is greater than the derived max_model_len (max_position_embeddings=M ...)"), a ValueError / pydantic error.
_MML = re.compile(r"User-specified max_model_len \((\d+)\) is greater than (?:the )?derived max_model_len \(([^)]*)")
_NUM = re.compile(r"=(\d{3,})|(\d{3,})")
MIN_MAX_MODEL_LEN = 256  # RedeployParams' floor


@analyzer("max_model_len_exceeds_model")
def max_model_len_exceeds(view: LogView) -> Finding | None:
    hits = [(h, m) for h in view.lines if (m := _MML.search(h.text))]
    if not hits:
        return None
    asked = int(hits[0][1].group(1))
    d = _NUM.search(hits[0][1].group(2))
    derived = int(d.group(1) or d.group(2)) if d else None
    actions = []
    steps = []
    if derived and derived >= MIN_MAX_MODEL_LEN:
        actions.append(
            ProposedAction(action="redeploy", params={"max_model_len": derived}, reason="the model's context length")
        )
        steps.append(
            f"Set `--max-model-len` to {derived} or less: that is the model's context length from its config.json."
        )
    steps.append(
        "Do not set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 to force it: positions past the trained context give wrong outputs or CUDA errors (vLLM PR #20904)."
    )
    return Finding(
        kind="max_model_len_exceeds_model",
        title=f"--max-model-len {asked} is above the model's context length" + (f" ({derived})" if derived else ""),
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary="vLLM refused to start: the requested context is longer than the model supports.",
            steps=steps,
            actions=actions,
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )

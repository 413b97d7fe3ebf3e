"""Serving-time problems: prompts over max-model-len, tool calling not enabled, queueing, CPU offload."""

from __future__ import annotations

import math
import re

from skills.diagnosis.analyzers.base import Line, LogView, analyzer, evidence_of, first_seen, rx
from skills.diagnosis.findings import Finding, ProposedAction, Remediation

# Sources: vLLM's OpenAI server (vllm/entrypoints/openai/serving_engine.py _validate_input: "This model's maximum
# context length is N tokens. However, you requested M tokens ..."), the engine's input check
# (vllm/v1/engine/processor.py: "The decoder prompt (length M) is longer than the maximum model length of N").
_CTX = rx(
    r"maximum context length is (\d+) tokens",
    r"is longer than the maximum model length of (\d+)",
    r"is too long and exceeds limit of (\d+)",
    r"exceeds the (?:model's )?max(?:imum)?[ _]model[ _]len(?:gth)?(?: of)? \(?(\d+)",
)
_REQUESTED = re.compile(
    r"you requested (\d+) tokens|your request has (\d+) input tokens|\(length (\d+)\)|"
    r"Input prompt \((\d+) tokens\)|Prompt length of (\d+)"
)


@analyzer("context_length_exceeded")
def context_length(view: LogView) -> Finding | None:
    hits = view.grep(*_CTX)
    if not hits:
        return None
    limit = int(hits[0][1].group(1)) if hits[0][1].group(1) else None
    requested = 0
    for h, _ in hits:
        if m := _REQUESTED.search(h.text):
            requested = max(requested, int(next(g for g in m.groups() if g)))
    steps = ["Cap prompt + max_tokens in the client (trim history, lower max_tokens)."]
    actions = []
    if limit and requested > limit:
        new = int(math.ceil(requested * 1.1 / 1024) * 1024)
        actions.append(
            ProposedAction(action="redeploy", params={"max_model_len": new}, reason="fit the longest request")
        )
        steps.insert(
            0,
            f"Or raise `--max-model-len` from {limit} to {new} (costs KV cache capacity; check with the fit planner).",
        )
    return Finding(
        kind="context_length_exceeded",
        title=f"Requests longer than the model's context ({limit} tokens)" if limit else "Requests over max-model-len",
        severity="warning",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary="vLLM rejected requests (HTTP 400) whose prompt plus output exceed --max-model-len.",
            steps=steps,
            actions=actions,
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )


# Source: vLLM's chat completion validation (vllm/entrypoints/openai/serving_chat.py: '"auto" tool choice requires
# --enable-auto-tool-choice and --tool-call-parser to be set'), and the tool-parser registry's lookup error.
_TOOLS = rx(
    r"tool choice requires --enable-auto-tool-choice",
    r"tool[_ ]choice.{0,40}requires.{0,40}--tool-call-parser",
    r"[Tt]ool (?:call )?parser '?([\w-]+)'? (?:is )?not (?:registered|found|supported)",
)
_BAD_PARSER = re.compile(r"invalid tool call parser: (\S+)|parser '?([\w-]+)'? (?:is )?not")


@analyzer("tool_parser_missing")
def tool_parser(view: LogView) -> Finding | None:
    hits = view.grep(*_TOOLS)
    if not hits:
        return None
    bad = next((m.group(1) or m.group(2) for h, _ in hits if (m := _BAD_PARSER.search(h.text))), None)
    actions = []
    if bad:
        steps = [
            f"This vLLM image has no tool parser `{bad}`: pin a vLLM release that ships it (Gemma 4 needs a "
            "recent vllm/vllm-openai), then keep `--tool-call-parser gemma4`.",
        ]
        title = f"Tool call parser {bad!r} is not available in this vLLM"
    else:
        steps = [
            "Start vLLM with `--enable-auto-tool-choice --tool-call-parser gemma4 --reasoning-parser gemma4`; "
            "without them every request with `tools` gets HTTP 400.",
        ]
        title = "Tool calling is not enabled on the server"
        actions.append(
            ProposedAction(
                action="redeploy", params={"enable_tool_calling": True}, reason="the gemma4 tool and reasoning parsers"
            )
        )
    return Finding(
        kind="tool_parser_missing",
        title=title,
        severity="error",
        evidence=evidence_of(hits),
        remediation=Remediation(summary="Requests that use tools fail.", steps=steps, actions=actions),
        first_seen=first_seen(hits),
        count=len(hits),
    )


_STATS = re.compile(
    r"generation throughput: ([\d.]+) tokens/s, Running: (\d+) reqs?(?:, Swapped: \d+ reqs?)?, "
    r"(?:Waiting|Pending): (\d+) reqs?"
)
# Cloud Run turning a request away when no instance has room ("The request was aborted because there was no
# available instance", answered 429 or 503: https://cloud.google.com/run/docs/known-issues and /troubleshooting).
_NO_INSTANCE = rx(
    r"no available instance",
    r"Rate exceeded\.?",
    r"[Rr]equest was aborted because there was no available instance",
)
# vLLM's preemption warning (docs, Optimization and Tuning > Preemption: "Sequence group 0 is preempted by
# PreemptionMode.SWAP mode because there is not enough KV cache space ..."): KV cache pressure. On its own it is
# not saturation (the preempted requests are recomputed and answered); beside a queue that stays it says why.
_PREEMPT = rx(r"is preempted by PreemptionMode", r"preempted due to (?:insufficient|not enough) KV cache")


# Saturation is a queue that stays: requests waiting in SATURATED_INTERVALS consecutive stats lines (vLLM logs
# them every 10 s: vllm/v1/metrics/loggers.py, "Running: N reqs, Waiting: M reqs"; the older engine's
# "Pending: M reqs") that the log does not see drain to zero. A burst that drains, or one waiting request on a
# busy server, is not saturation. Nor is it only a queue: requests that time out (Cloud Run answers 504 when a
# request outlives the service's timeout, https://cloud.google.com/run/docs/configuring/request-timeout).
SATURATED_INTERVALS = 3
TIMED_OUT_REQUESTS = 2


def _persisting_queue(view: LogView) -> list[tuple[Line, re.Match[str]]]:
    """The stats lines of the queue still waiting at the log's end, when it spans enough intervals."""
    run: list[tuple[Line, re.Match[str]]] = []
    for line in view.lines:
        m = _STATS.search(line.text)
        if m:
            run = [*run, (line, m)] if int(m.group(3)) > 0 else []  # drained: what queued before was served
    return run if len(run) >= SATURATED_INTERVALS else []


@analyzer("request_queue_saturated")
def queue(view: LogView) -> Finding | None:
    aborted = view.grep(*_NO_INSTANCE)
    too_many = [(line, None) for line in view.lines if line.http_status == 429]
    timed_out = [(line, None) for line in view.lines if line.http_status == 504]
    waiting = _persisting_queue(view)
    preempted = view.grep(*_PREEMPT)
    if not (aborted or len(too_many) >= 3 or waiting or len(timed_out) >= TIMED_OUT_REQUESTS):
        return None
    hits = aborted + too_many + timed_out + waiting + preempted
    hits.sort(key=lambda h: h[0].idx)
    peak = max((int(m.group(3)) for _, m in waiting), default=0)
    svc = view.service
    steps = []
    actions = []
    if aborted or too_many:
        steps.append(
            f"Cloud Run turned requests away with 429 ({len(aborted) + len(too_many)} seen): no instance had room."
        )
    if waiting:
        steps.append(
            f"vLLM kept requests waiting across {len(waiting)} stats intervals (up to {peak}) without draining."
        )
    if len(timed_out) >= TIMED_OUT_REQUESTS:
        steps.append(f"{len(timed_out)} requests timed out (HTTP 504): they waited longer than the service's timeout.")
    current_max = svc.max_instances if svc and svc.max_instances else None
    new_max = (current_max + 1) if current_max else 2
    current_min = svc.min_instances if svc else 0
    actions.append(
        ProposedAction(
            action="scale",
            params={"min_instances": current_min, "max_instances": new_max},
            reason="more capacity",
        )
    )
    steps.append(f"Raise max instances to {new_max} (each instance is one more GPU while busy).")
    cfg = view.config_at(len(view.lines))
    seqs = cfg.get("max_num_seqs")
    if svc and isinstance(seqs, int) and svc.concurrency and svc.concurrency != seqs:
        actions.append(ProposedAction(action="redeploy", params={"concurrency": seqs}, reason="match max-num-seqs"))
        steps.append(f"Make Cloud Run concurrency ({svc.concurrency}) match vLLM `--max-num-seqs` ({seqs}).")
    if preempted:
        steps.append("vLLM preempted sequences for lack of KV cache: `--kv-cache-dtype fp8` or fewer `--max-num-seqs`.")
    return Finding(
        kind="request_queue_saturated",
        title="Requests are queueing" + (" and being rejected with 429" if aborted or too_many else ""),
        severity="warning",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary="Demand exceeds what the running instances can serve.", steps=steps, actions=actions
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )


SLOW_TOK_S = 5.0


@analyzer("cpu_offload_slow")
def cpu_offload(view: LogView) -> Finding | None:
    slow = []
    for line in view.lines:
        m = _STATS.search(line.text)
        if m and int(m.group(2)) > 0 and float(m.group(1)) < SLOW_TOK_S:
            offload = view.config_at(line.idx).get("cpu_offload_gb")
            if isinstance(offload, int | float) and offload > 0:
                slow.append((line, m))
    if not slow:
        return None
    gb = view.config_at(slow[0][0].idx).get("cpu_offload_gb")
    rate = min(float(m.group(1)) for _, m in slow)
    cfg_line = next((line for at, _ in view.configs if (line := view.lines[at]) and at <= slow[0][0].idx), None)
    evidence = ([cfg_line.evidence()] if cfg_line else []) + evidence_of(slow, 2)
    return Finding(
        kind="cpu_offload_slow",
        title=f"Generation at {rate:g} tok/s with --cpu-offload-gb {gb}",
        severity="warning",
        evidence=evidence,
        remediation=Remediation(
            summary="Offloading weights to CPU makes every token cross PCIe: 1-2 tok/s is expected, not a bug.",
            steps=[
                "Remove `--cpu-offload-gb` and serve a model that fits the GPU (e.g. 12B or 26B-A4B QAT on an L4).",
                "Or move to a bigger GPU (RTX Pro 6000 / A100) where the model runs fully in VRAM.",
            ],
            actions=[ProposedAction(action="redeploy", params={"cpu_offload_gb": 0}, reason="no offload")],
        ),
        first_seen=first_seen(slow),
        count=len(slow),
    )

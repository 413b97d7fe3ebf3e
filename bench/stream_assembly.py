"""Assembling a streamed chat completion: the openai SDK's ChatCompletionStreamState against the hand-written
accumulator it replaced (bot/agent/client.py before issue 18), on the same parsed chunks.

The stream is what a long agent step looks like: an answer of N content deltas, then three tool calls whose
arguments arrive in 5-character pieces (vLLM streams about a token per delta). Only assembly is timed (the
chunks are parsed once, up front, as the SDK's stream iterator would hand them over). Prints the median ms per
stream for each and, for scale, the generation time of the same stream at 30 tokens/s (one L4 serving a 12B
model is in that range).

    .venv/bin/python bench/stream_assembly.py [--content 1500] [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk


def chunks(n_content: int) -> list[ChatCompletionChunk]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> ChatCompletionChunk:
        return ChatCompletionChunk.model_validate(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "google/gemma-4-12b-it",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": " word"}) for _ in range(n_content)]
    for idx in range(3):
        args = json.dumps({"service": "vllm-gemma4", "filter": "severity>=ERROR " * 20, "minutes": 30})
        out.append(
            chunk({"tool_calls": [{"index": idx, "id": f"c{idx}", "type": "function", "function": {"name": "t"}}]})
        )
        out += [
            chunk({"tool_calls": [{"index": idx, "function": {"arguments": args[i : i + 5]}}]})
            for i in range(0, len(args), 5)
        ]
    out.append(chunk({}, "tool_calls"))
    return out


def hand_written(stream: list[ChatCompletionChunk]) -> tuple[str, list[dict[str, str]]]:
    content: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    for ch in stream:
        for choice in ch.choices:
            delta = choice.delta
            if delta.content:
                content.append(delta.content)
            for tc in delta.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                if tc.id:
                    slot["id"] = tc.id
                if tc.function is not None:
                    slot["name"] += tc.function.name or ""
                    slot["arguments"] += tc.function.arguments or ""
    return "".join(content), [calls[i] for i in sorted(calls)]


def sdk_state(stream: list[ChatCompletionChunk]) -> tuple[str, list[dict[str, str]]]:
    state = ChatCompletionStreamState()
    for ch in stream:
        state.handle_chunk(ch)
    msg = state.current_completion_snapshot.choices[0].message
    calls = [{"id": t.id, "name": t.function.name, "arguments": t.function.arguments} for t in msg.tool_calls or []]
    return msg.content or "", calls


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--content", type=int, default=1500)
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    stream = chunks(a.content)
    assert hand_written(stream) == sdk_state(stream), "the two assemblies disagree"
    print(
        f"{len(stream)} chunks ({a.content} content deltas, 3 tool calls); generation at 30 tok/s: "
        f"{len(stream) / 30 * 1000:,.0f} ms"
    )
    for name, fn in (("hand-written", hand_written), ("ChatCompletionStreamState", sdk_state)):
        times = []
        for _ in range(a.runs):
            t0 = time.perf_counter()
            fn(stream)
            times.append((time.perf_counter() - t0) * 1000)
        print(f"{name:>26}: median {statistics.median(times):8.2f} ms per stream")


if __name__ == "__main__":
    main()

"""An OpenAI-compatible model server playing scripted turns, to test the agent loop with the real client.

Serves /v1/models, /v1/chat/completions (JSON, or SSE `data: {...}` chunks ending `data: [DONE]` when the
request asks to stream), /health and /metrics (Prometheus text, like vLLM). Each chat request consumes the
next scripted turn: an assistant message (content, structured tool calls, reasoning) or an HTTP error (400
tool-choice, 503/429 cold start). Every request body is recorded so tests can check what the bot sent.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

TOOL_CHOICE_400 = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'

METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="google/gemma-4-12b-it"} 1.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="google/gemma-4-12b-it"} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="google/gemma-4-12b-it"} 0.42
"""


@dataclass
class Turn:
    content: str = ""
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, raw arguments text)
    reasoning: str = ""
    status: int = 200
    error: str = ""
    delay_s: float = 0.0  # before answering (time-budget tests)


def say(content: str, reasoning: str = "") -> Turn:
    return Turn(content=content, reasoning=reasoning)


def call(name: str, args: dict[str, Any] | str | None = None, *more: tuple[str, dict[str, Any] | str]) -> Turn:
    """Structured tool call(s): call("a", {...}) or call("a", {...}, ("b", {...})) for parallel calls."""
    pairs = [(name, args or {}), *more]
    return Turn(tool_calls=[(n, a if isinstance(a, str) else json.dumps(a)) for n, a in pairs])


def fail(status: int, message: str) -> Turn:
    return Turn(status=status, error=message)


class OpenAIScript:
    def __init__(self, *turns: Turn, model_id: str = "google/gemma-4-12b-it") -> None:
        self.model_id = model_id
        self.turns: deque[Turn] = deque(turns)
        self.requests: list[dict[str, Any]] = []
        self.metrics_text = METRICS
        # When the script runs out: a function of the request body giving the next turn (None: HTTP 500).
        self.otherwise: Callable[[dict[str, Any]], Turn] | None = None
        self._lock = threading.Lock()
        self.app = Starlette(
            routes=[
                Route("/v1/models", self._models),
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/health", self._health),
                Route("/metrics", self._metrics),
            ]
        )

    def push(self, *turns: Turn) -> None:
        with self._lock:
            self.turns.extend(turns)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if "messages" in r]

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": self.model_id, "object": "model", "owned_by": "vllm"}]})

    async def _health(self, request: Request) -> Response:
        return Response(status_code=200)

    async def _metrics(self, request: Request) -> Response:
        return Response(self.metrics_text, media_type="text/plain; version=0.0.4")

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        with self._lock:
            self.requests.append(body)
            turn = self.turns.popleft() if self.turns else None
        if turn is None:
            turn = self.otherwise(body) if self.otherwise else fail(500, "script exhausted")
        if turn.delay_s:
            import asyncio

            await asyncio.sleep(turn.delay_s)
        if turn.status != 200:
            return JSONResponse(
                {
                    "object": "error",
                    "message": turn.error,
                    "type": "BadRequestError",
                    "param": None,
                    "code": turn.status,
                },
                status_code=turn.status,
            )
        if body.get("stream"):
            return StreamingResponse(self._sse(turn), media_type="text/event-stream")
        return JSONResponse(self._completion(turn))

    def _calls(self, turn: Turn) -> list[dict[str, Any]]:
        return [
            {
                "id": f"chatcmpl-tool-{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": n, "arguments": a},
            }
            for n, a in turn.tool_calls
        ]

    def _completion(self, turn: Turn) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": turn.content or None}
        if turn.reasoning:
            message["reasoning"] = turn.reasoning  # vLLM's field name since the Gemma 4 releases
        if turn.tool_calls:
            message["tool_calls"] = self._calls(turn)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_id,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if turn.tool_calls else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    def _sse(self, turn: Turn) -> Any:
        cid = f"chatcmpl-{uuid.uuid4().hex}"

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            obj = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": self.model_id,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }
            return f"data: {json.dumps(obj)}\n\n".encode()

        async def events() -> Any:
            yield chunk({"role": "assistant", "content": ""})
            for i in range(0, len(turn.reasoning), 12):
                yield chunk({"reasoning": turn.reasoning[i : i + 12]})
            for i in range(0, len(turn.content), 16):
                yield chunk({"content": turn.content[i : i + 16]})
            for idx, tc in enumerate(self._calls(turn)):
                args = tc["function"]["arguments"]
                yield chunk(
                    {
                        "tool_calls": [
                            {
                                "index": idx,
                                "id": tc["id"],
                                "type": "function",
                                "function": {"name": tc["function"]["name"], "arguments": ""},
                            }
                        ]
                    }
                )
                half = len(args) // 2
                for piece in (args[:half], args[half:]):
                    if piece:
                        yield chunk({"tool_calls": [{"index": idx, "function": {"arguments": piece}}]})
            yield chunk({}, "tool_calls" if turn.tool_calls else "stop")
            yield b"data: [DONE]\n\n"

        return events()

"""An OpenAI-compatible model server playing scripted turns, to test the agent loop with the real client.

Serves /v1/models, /v1/chat/completions (JSON, or SSE `data: {...}` chunks ending `data: [DONE]` when the
request asks to stream), /health and /metrics (Prometheus text, like vLLM). Each chat request consumes the
next scripted turn: an assistant message (content, structured tool calls, reasoning) or an HTTP error (400
tool-choice, 503/429 cold start). Every request body is recorded so tests can check what the bot sent.

With `max_model_len` set it also behaves like a vLLM server started with `--max-model-len`: the model card
advertises it (vLLM's ModelCard.max_model_len, vllm/entrypoints/openai/protocol.py), POST /tokenize counts a
chat request's tokens, and a chat request whose prompt plus max_tokens exceeds it gets vLLM's HTTP 400
("This model's maximum context length is N tokens. However, you requested M tokens (P in the messages, C in
the completion). Please reduce ..."; vllm/entrypoints/openai/serving_engine.py, v0.10.0, as quoted by a
public vLLM test fixture). Its tokenizer counts one token per 3 characters of the JSON of the messages and
tools: deliberately more than the bot's 4-characters estimate, so only /tokenize is exact.
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

ARG_PIECE = 5  # characters of tool-call arguments per streamed delta (vLLM sends about a token each)

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
    # vLLM renamed `reasoning_content` to `reasoning` (vllm-project/vllm PR #27752, Oct 2025) and later removed
    # the old name (PR #33402, Jan 2026): servers in the field send either.
    reasoning_key: str = "reasoning"  # the current name; tests set the old one explicitly

    def response(self) -> JSONResponse:
        """This turn's HTTP error, in vLLM's ErrorResponse shape."""
        body = {"object": "error", "message": self.error, "type": "BadRequestError", "param": None, "code": self.status}
        return JSONResponse(body, status_code=self.status)


def say(content: str, reasoning: str = "") -> Turn:
    return Turn(content=content, reasoning=reasoning)


def call(name: str, args: dict[str, Any] | str | None = None, *more: tuple[str, dict[str, Any] | str]) -> Turn:
    """Structured tool call(s): call("a", {...}) or call("a", {...}, ("b", {...})) for parallel calls."""
    pairs = [(name, args or {}), *more]
    return Turn(tool_calls=[(n, a if isinstance(a, str) else json.dumps(a)) for n, a in pairs])


def fail(status: int, message: str) -> Turn:
    return Turn(status=status, error=message)


class OpenAIScript:
    def __init__(self, *turns: Turn, model_id: str = "google/gemma-4-12b-it", max_model_len: int | None = None) -> None:
        self.model_id = model_id
        self.max_model_len = max_model_len
        self.tokenize_calls = 0
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
                Route("/tokenize", self._tokenize, methods=["POST"]),
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
        card: dict[str, Any] = {"id": self.model_id, "object": "model", "owned_by": "vllm"}
        if self.max_model_len:
            card["max_model_len"] = self.max_model_len
        return JSONResponse({"object": "list", "data": [card]})

    @staticmethod
    def count_tokens(body: dict[str, Any]) -> int:
        text = json.dumps(body.get("messages") or []) + json.dumps(body.get("tools") or [])
        return (len(text) + 2) // 3

    async def _tokenize(self, request: Request) -> Response:
        body = await request.json()
        unknown = set(body) - {"model", "messages", "tools", "prompt", "add_generation_prompt"}
        if unknown or not isinstance(body.get("messages", body.get("prompt")), list | str):
            return JSONResponse(
                {
                    "object": "error",
                    "message": f"bad /tokenize body: {sorted(unknown)}",
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                },
                status_code=400,
            )
        self.tokenize_calls += 1
        n = self.count_tokens(body) if "messages" in body else (len(str(body["prompt"])) + 2) // 3
        return JSONResponse({"count": n, "max_model_len": self.max_model_len or 0, "tokens": list(range(n))})

    async def _health(self, request: Request) -> Response:
        return Response(status_code=200)

    async def _metrics(self, request: Request) -> Response:
        return Response(self.metrics_text, media_type="text/plain; version=0.0.4")

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        with self._lock:
            self.requests.append(body)
            turn = self.turns.popleft() if self.turns else None
        if self.max_model_len:
            prompt = self.count_tokens(body)
            completion = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
            if prompt + completion > self.max_model_len:
                if turn is not None:
                    with self._lock:
                        self.turns.appendleft(turn)  # a rejected request does not consume its turn
                return fail(
                    400,
                    f"This model's maximum context length is {self.max_model_len} tokens. However, you requested "
                    f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the completion). "
                    "Please reduce the length of the messages or completion.",
                ).response()
        if turn is None:
            turn = self.otherwise(body) if self.otherwise else fail(500, "script exhausted")
        if turn.delay_s:
            import asyncio

            await asyncio.sleep(turn.delay_s)
        if turn.status != 200:
            return turn.response()
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
            message[turn.reasoning_key] = turn.reasoning
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
                yield chunk({turn.reasoning_key: turn.reasoning[i : i + 12]})
            for i in range(0, len(turn.content), 16):
                yield chunk({"content": turn.content[i : i + 16]})
            # As vLLM's tool parsers stream a call: a first delta with index, id, type and the name only (their
            # DeltaFunctionCall(name=...).model_dump(exclude_none=True): no "arguments" key), then the
            # arguments in token-sized pieces carrying only the index.
            for idx, tc in enumerate(self._calls(turn)):
                args = tc["function"]["arguments"]
                yield chunk(
                    {
                        "tool_calls": [
                            {
                                "index": idx,
                                "id": tc["id"],
                                "type": "function",
                                "function": {"name": tc["function"]["name"]},
                            }
                        ]
                    }
                )
                for i in range(0, len(args), ARG_PIECE):
                    yield chunk({"tool_calls": [{"index": idx, "function": {"arguments": args[i : i + ARG_PIECE]}}]})
            yield chunk({}, "tool_calls" if turn.tool_calls else "stop")
            yield b"data: [DONE]\n\n"

        return events()

"""A vLLM-like OpenAI-compatible stand-in with controllable timing, for the observe/bench features.

Speaks the real wire protocol: `/v1/chat/completions` and `/v1/completions` stream as SSE (`data: {...}`
lines, `data: [DONE]`), honour `stream_options.include_usage` (a final chunk with empty choices and usage),
and the first chat chunk carries only the role (no text) as vLLM's does. Timing is injected on an absolute
schedule: token i is due `ttft_s + i * token_delay_s` after the request arrives (a late wake-up does not push
the later tokens back, so lag never accumulates). Each streamed request's server-side span (arrival, first
token written, last byte written; time.perf_counter, i.e. CLOCK_MONOTONIC, comparable across processes on
Linux) is kept in `state.spans` and served at `/sim/spans`, so a benchmark can tell its client's overhead
from the stand-in's own lag. `/metrics` is Prometheus text
with vLLM's metric names (histograms, counters, `vllm:cache_config_info`), rendered by prometheus-client;
`/tokenize` counts whitespace-separated words as tokens (plus a BOS token), so prompt sizes are exact.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

TOOL_CHOICE_ERROR = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
_WORDS = "the quick brown fox jumps over a lazy dog while gemma serves tokens on one small gpu".split()
_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
_ITL_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.04,
    0.05,
    0.075,
    0.1,
    0.2,
    0.3,
    0.5,
    1.0,
)
SPAN_KEY_CHARS = 120  # spans are keyed by the prompt's start (the bench's prompts differ in their first words)
_E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0)


@dataclass
class SimConfig:
    model_id: str = "google/gemma-4-12b-it"
    max_model_len: int = 8192
    ttft_s: float = 0.05
    token_delay_s: float = 0.005
    tokens_per_chunk: int = 1  # >1 packs tokens into chunks (chunks are not tokens)
    crlf: bool = False  # frame SSE with CRLF line endings (legal SSE; some proxies rewrite to it)
    usage_in_stream: bool = True  # False: an older server that ignores stream_options.include_usage
    default_output_tokens: int = 12  # without ignore_eos the "answer" ends here (or at max_tokens)
    tools_enabled: bool = True
    legacy_kv_metric: bool = False  # old servers: vllm:gpu_cache_usage_perc
    num_gpu_blocks: int = 7097
    block_size: int = 16
    # Newer servers label cache_config_info with kv_cache_size_tokens (vLLM get_kv_cache_capacity: max
    # concurrency x max-model-len). 31,240 is what 7,097 blocks hold for Gemma 4 26B-A4B with fp8 KV at
    # max-model-len 8192 (6 KV-cache groups share the pool; skills/capacity/kv_accounting.py). None: an older server.
    kv_cache_size_tokens: int | None = 31240
    cache_dtype: str = "fp8"
    gpu_memory_utilization: float = 0.9
    fail_status: int | None = None  # answer every completion with this HTTP status
    fail_every: int = 0  # >0: every Nth completion fails with HTTP 500
    stream_error_after: int = 0  # >0: streams fail after this many tokens with vLLM's in-stream error event
    uptime_s: float = 3600.0  # process_start_time_seconds = now - uptime_s


@dataclass
class SimState:
    requests: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    authorization: list[str] = field(default_factory=list)  # the Authorization header of each completion
    peers: list[int] = field(default_factory=list)  # the client port of each completion (one per connection)
    spans: list[tuple[str, float, float, float]] = field(default_factory=list)  # (prompt[:KEY], arrival,
    # first token written, end)


class VllmSim:
    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config or SimConfig()
        self.state = SimState()
        # Called before /v1/models and /metrics answer: the sandbox makes the server the one that serves now
        self.before_answer: Callable[[], None] = lambda: None
        self.registry = CollectorRegistry()
        labels = ["model_name", "engine"]
        r = self.registry
        self.running = Gauge("vllm:num_requests_running", "Running requests", labels, registry=r)
        self.waiting = Gauge("vllm:num_requests_waiting", "Waiting requests", labels, registry=r)
        kv_name = "vllm:gpu_cache_usage_perc" if self.config.legacy_kv_metric else "vllm:kv_cache_usage_perc"
        self.kv_usage = Gauge(kv_name, "KV-cache usage (1 = 100%)", labels, registry=r)
        self.preemptions = Counter("vllm:num_preemptions", "Preemptions", labels, registry=r)
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Prefill tokens", labels, registry=r)
        self.generation_tokens = Counter("vllm:generation_tokens", "Generated tokens", labels, registry=r)
        self.prefix_queries = Counter("vllm:prefix_cache_queries", "Prefix-cache queried tokens", labels, registry=r)
        self.prefix_hits = Counter("vllm:prefix_cache_hits", "Prefix-cache hit tokens", labels, registry=r)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "TTFT", labels, buckets=_TTFT_BUCKETS, registry=r)
        self.itl = Histogram("vllm:inter_token_latency_seconds", "ITL", labels, buckets=_ITL_BUCKETS, registry=r)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "E2E", labels, buckets=_E2E_BUCKETS, registry=r)
        cache_labels = [
            "block_size",
            "cache_dtype",
            "gpu_memory_utilization",
            "num_gpu_blocks",
            "enable_prefix_caching",
        ]
        c = self.config
        if c.kv_cache_size_tokens is not None:
            cache_labels.append("kv_cache_size_tokens")
        self._cache_labels = cache_labels
        self.cache_info = Gauge("vllm:cache_config_info", "Cache config", cache_labels, registry=r)
        self.start_time = Gauge("process_start_time_seconds", "Start time", registry=r)
        self._reset(c)
        self.app = Starlette(
            routes=[
                Route("/health", self._health),
                Route("/v1/models", self._models),
                Route("/metrics", self._metrics),
                Route("/tokenize", self._tokenize, methods=["POST"]),
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/completions", self._completions, methods=["POST"]),
                Route("/sim/stats", self._stats),
                Route("/sim/spans", self._spans),
            ]
        )

    # --- test controls -------------------------------------------------------------------------------
    def serve(self, config: SimConfig) -> None:
        """Answer as a server just started with `config` (the sandbox: the revision that now serves is a new vLLM
        process): its model id and context on /v1/models, its KV-cache figures on cache_config_info, counters and
        histograms from zero, a new process start time."""
        self.config = config
        self._reset(config)

    def _reset(self, c: SimConfig) -> None:
        values = [str(c.block_size), c.cache_dtype, f"{c.gpu_memory_utilization:g}", str(c.num_gpu_blocks), "True"]
        if "kv_cache_size_tokens" in self._cache_labels:  # the label set is fixed when the gauge is made
            values.append(str(c.kv_cache_size_tokens or 0))
        self.cache_info.clear()
        self.cache_info.labels(*values).set(1)
        self.process_start = time.time() - c.uptime_s
        self.start_time.set(self.process_start)
        self._lab = {"model_name": c.model_id, "engine": "0"}
        for g in (self.running, self.waiting, self.kv_usage):
            g.clear()
            g.labels(**self._lab).set(0)
        for m in (
            self.preemptions,
            self.prompt_tokens,
            self.generation_tokens,
            self.prefix_queries,
            self.prefix_hits,
            self.ttft,
            self.itl,
            self.e2e,
        ):
            m.clear()
        for m in (self.preemptions, self.prompt_tokens, self.generation_tokens, self.prefix_queries, self.prefix_hits):
            m.labels(**self._lab)  # present (at 0) from the start, as in vLLM

    def set_gauges(self, *, running: float = 0, waiting: float = 0, kv_usage: float = 0) -> None:
        self.running.labels(**self._lab).set(running)
        self.waiting.labels(**self._lab).set(waiting)
        self.kv_usage.labels(**self._lab).set(kv_usage)

    def observe(
        self,
        *,
        ttft: list[float] = (),  # type: ignore[assignment]
        itl: list[float] = (),  # type: ignore[assignment]
        e2e: list[float] = (),  # type: ignore[assignment]
        preemptions: int = 0,
        prefix: tuple[int, int] = (0, 0),
        prompt_tokens: int = 0,
        generation_tokens: int = 0,
    ) -> None:
        for v in ttft:
            self.ttft.labels(**self._lab).observe(v)
        for v in itl:
            self.itl.labels(**self._lab).observe(v)
        for v in e2e:
            self.e2e.labels(**self._lab).observe(v)
        self.preemptions.labels(**self._lab).inc(preemptions)
        self.prefix_queries.labels(**self._lab).inc(prefix[0])
        self.prefix_hits.labels(**self._lab).inc(prefix[1])
        self.prompt_tokens.labels(**self._lab).inc(prompt_tokens)
        self.generation_tokens.labels(**self._lab).inc(generation_tokens)

    # --- endpoints -----------------------------------------------------------------------------------
    async def _stats(self, request: Request) -> JSONResponse:
        st = self.state
        return JSONResponse({"requests": st.requests, "in_flight": st.in_flight, "max_in_flight": st.max_in_flight})

    async def _spans(self, request: Request) -> JSONResponse:
        return JSONResponse({"spans": self.state.spans})

    async def _health(self, request: Request) -> Response:
        return Response(status_code=200)

    async def _models(self, request: Request) -> JSONResponse:
        self.before_answer()
        c = self.config
        card = {"id": c.model_id, "object": "model", "owned_by": "vllm", "max_model_len": c.max_model_len}
        return JSONResponse({"object": "list", "data": [card]})

    async def _metrics(self, request: Request) -> Response:
        self.before_answer()
        return Response(generate_latest(self.registry), media_type="text/plain; version=0.0.4")

    @staticmethod
    def count_tokens(text: str) -> int:
        return 1 + len(text.split())  # BOS + one token per word

    async def _tokenize(self, request: Request) -> JSONResponse:
        body = await self._json_body(request, "TokenizeCompletionRequest")
        if isinstance(body, JSONResponse):
            return body
        if "messages" in body:
            text = " ".join(str(m.get("content", "")) for m in body["messages"])
        else:
            text = str(body.get("prompt", ""))
        n = self.count_tokens(text)
        return JSONResponse({"count": n, "max_model_len": self.config.max_model_len, "tokens": list(range(n))})

    async def _json_body(self, request: Request, model: str) -> dict[str, Any] | JSONResponse:
        """The request's JSON object, or vLLM's answer to a body that is not one: 400 with its validation error.

        vLLM's routes take a pydantic request model through FastAPI, so a body that is not JSON fails FastAPI's
        parsing with a `json_invalid` error (fastapi/routing.py: loc ("body", the decoder's position), msg "JSON
        decode error", ctx the decoder's message), and JSON that is not an object fails the model (pydantic's
        `model_type`). vLLM's RequestValidationError handler answers either with 400 and its ErrorResponse,
        `{"error": {"message": "1 validation error:\n  {...}", "type": "Bad Request", "param": "body...",
        "code": 400}}` (vllm/entrypoints/serve/utils/server_utils.py `validation_exception_handler`; ErrorInfo
        in vllm/entrypoints/openai/engine/protocol.py). /tokenize's model is a union upstream; named by its
        completion variant here."""
        raw = await request.body()
        try:
            body = json.loads(raw)
        except json.JSONDecodeError as exc:
            return self._validation_error(
                {
                    "type": "json_invalid",
                    "loc": ("body", exc.pos),
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": exc.msg},
                }
            )
        except UnicodeDecodeError as exc:
            return self._validation_error(
                {
                    "type": "json_invalid",
                    "loc": ("body", 0),
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": str(exc)},
                }
            )
        if not isinstance(body, dict):
            return self._validation_error(
                {
                    "type": "model_type",
                    "loc": ("body",),
                    "msg": f"Input should be a valid dictionary or instance of {model}",
                    "input": body,
                    "ctx": {"class_name": model},
                }
            )
        return body

    @staticmethod
    def _validation_error(error: dict[str, Any]) -> JSONResponse:
        message = f"1 validation error:\n  {error}"
        param = ".".join(str(part) for part in error["loc"])
        return JSONResponse(
            {"error": {"message": message, "type": "Bad Request", "param": param, "code": 400}}, status_code=400
        )

    def _error(self, status: int, message: str) -> JSONResponse:
        kind = "BadRequestError" if status == 400 else "InternalServerError"
        return JSONResponse(
            {"object": "error", "message": message, "type": kind, "param": None, "code": status},
            status_code=status,
        )

    def _admit(self, request: Request, body: dict[str, Any], prompt_tokens: int) -> JSONResponse | None:
        c = self.config
        self.state.requests += 1
        self.state.bodies.append(body)
        self.state.authorization.append(request.headers.get("authorization", ""))
        self.state.peers.append(request.client.port if request.client else 0)
        if c.fail_status:
            return self._error(c.fail_status, f"simulated HTTP {c.fail_status}")
        if c.fail_every and self.state.requests % c.fail_every == 0:
            return self._error(500, "simulated engine error")
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        if prompt_tokens + max_tokens > c.max_model_len:
            return self._error(
                400,
                f"This model's maximum context length is {c.max_model_len} tokens. However, you requested "
                f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in the "
                "completion). Please reduce the length of the messages or completion.",
            )
        return None

    async def _chat(self, request: Request) -> Response:
        arrival = time.perf_counter()
        body = await self._json_body(request, "ChatCompletionRequest")
        if isinstance(body, JSONResponse):
            return body
        prompt = " ".join(str(m.get("content") or "") for m in body.get("messages", []))
        prompt_tokens = self.count_tokens(prompt)
        if (err := self._admit(request, body, prompt_tokens)) is not None:
            return err
        if body.get("tools"):
            if not self.config.tools_enabled:
                return self._error(400, TOOL_CHOICE_ERROR)
            return await self._tool_call(body, prompt_tokens)
        return await self._generate(body, prompt, prompt_tokens, arrival, chat=True)

    async def _completions(self, request: Request) -> Response:
        arrival = time.perf_counter()
        body = await self._json_body(request, "CompletionRequest")
        if isinstance(body, JSONResponse):
            return body
        prompt = str(body.get("prompt", ""))
        prompt_tokens = self.count_tokens(prompt)
        if (err := self._admit(request, body, prompt_tokens)) is not None:
            return err
        return await self._generate(body, prompt, prompt_tokens, arrival, chat=False)

    async def _tool_call(self, body: dict[str, Any], prompt_tokens: int) -> JSONResponse:
        await asyncio.sleep(self.config.ttft_s)
        name = body["tools"][0]["function"]["name"]
        call = {"id": "chatcmpl-tool-1", "type": "function", "function": {"name": name, "arguments": "{}"}}
        return JSONResponse(
            {
                "id": "chatcmpl-sim",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self.config.model_id,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                        "finish_reason": "tool_calls",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": 8,
                    "total_tokens": prompt_tokens + 8,
                },
            }
        )

    def _n_output(self, body: dict[str, Any]) -> int:
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        return max_tokens if body.get("ignore_eos") else min(max_tokens, self.config.default_output_tokens)

    async def _generate(
        self, body: dict[str, Any], prompt: str, prompt_tokens: int, t0: float, *, chat: bool
    ) -> Response:
        n_out = self._n_output(body)
        words = [_WORDS[i % len(_WORDS)] for i in range(n_out)]
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": n_out,
            "total_tokens": prompt_tokens + n_out,
        }
        finish = "length" if n_out == int(body.get("max_tokens") or 16) else "stop"
        base = {"id": "cmpl-sim", "created": int(time.time()), "model": self.config.model_id}
        obj = "chat.completion.chunk" if chat else "text_completion"
        self.state.in_flight += 1
        self.state.max_in_flight = max(self.state.max_in_flight, self.state.in_flight)

        def choice(text: str, finish_reason: str | None = None) -> dict[str, Any]:
            if chat:
                return {
                    "index": 0,
                    "delta": {"content": text},
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}

        if not body.get("stream"):
            try:
                await asyncio.sleep(self.config.ttft_s + self.config.token_delay_s * max(0, n_out - 1))
            finally:
                self.state.in_flight -= 1
            self._record(prompt_tokens, n_out, time.perf_counter() - t0, None)
            text = " ".join(words)
            ch = (
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
                if chat
                else {"index": 0, "text": text, "finish_reason": finish}
            )
            return JSONResponse({**base, "object": obj.replace(".chunk", ""), "choices": [ch], "usage": usage})

        include_usage = self.config.usage_in_stream and bool((body.get("stream_options") or {}).get("include_usage"))
        per = max(1, self.config.tokens_per_chunk)
        ttft_s, delay_s = self.config.ttft_s, self.config.token_delay_s
        fail_after = self.config.stream_error_after
        # Every chunk shares its id/created/model/object fields: serialize them once per request.
        head = json.dumps({**base, "object": obj}, separators=(",", ":"))[:-1].encode() + b',"choices":'

        end_of_event = b"\r\n\r\n" if self.config.crlf else b"\n\n"

        def chunk(choices: list[dict[str, Any]], extra: bytes = b"") -> bytes:
            return b"data: " + head + json.dumps(choices, separators=(",", ":")).encode() + extra + b"}" + end_of_event

        async def events() -> AsyncGenerator[bytes, None]:
            perf = time.perf_counter
            first_at: float | None = None
            end = 0.0
            try:
                if chat:  # vLLM's first chat chunk: the role, no text yet
                    role = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
                    yield chunk([role])
                for i in range(0, n_out, per):
                    if fail_after and i >= fail_after:  # as vLLM does: an error event, then [DONE]
                        err = {"message": "simulated engine failure", "type": "InternalServerError", "code": 500}
                        yield b"data: " + json.dumps({"error": err}).encode() + end_of_event
                        break
                    wait = t0 + ttft_s + i * delay_s - perf()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    last = i + per >= n_out
                    text = "".join(" " + w for w in words[i : i + per])
                    if first_at is None:
                        first_at = perf()
                    yield chunk([choice(text, finish if last else None)])
                if include_usage and not (fail_after and n_out > fail_after):
                    yield chunk([], b',"usage":' + json.dumps(usage, separators=(",", ":")).encode())
                end = perf()  # the last bytes are handed over now (taken before, so the client can't beat it)
                yield b"data: [DONE]" + end_of_event
            finally:
                end = end or perf()
                self.state.in_flight -= 1
                self.state.spans.append((prompt[:SPAN_KEY_CHARS], t0, first_at or end, end))
                self._record(prompt_tokens, n_out, end - t0, (first_at or t0) - t0)

        return _SSEResponse(events())

    def _record(self, prompt_tokens: int, n_out: int, e2e: float, ttft: float | None) -> None:
        self.prompt_tokens.labels(**self._lab).inc(prompt_tokens)
        self.generation_tokens.labels(**self._lab).inc(n_out)
        self.e2e.labels(**self._lab).observe(e2e)
        if ttft is not None:
            self.ttft.labels(**self._lab).observe(ttft)


class _SSEResponse(Response):
    """A lean StreamingResponse: one task per request watches for the client going away (uvicorn drops
    writes to a closed connection silently) and stops the stream, instead of an anyio task group per request,
    so the stand-in stays cheap next to a load generator at 1,000 streams."""

    media_type = "text/event-stream"

    def __init__(self, events: AsyncGenerator[bytes, None]) -> None:
        self.events = events
        self.status_code = 200
        self.background = None
        self.init_headers(None)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        me = asyncio.current_task()
        finished = False

        async def client_gone() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            if not finished and me is not None:
                me.cancel()  # stop generating (and sleeping) for nobody

        gone = asyncio.ensure_future(client_gone())
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for data in self.events:
                await send({"type": "http.response.body", "body": data, "more_body": True})
            finished = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not gone.done() or me is None:
                raise  # cancelled by the server (shutdown), not because the client left
            me.uncancel()
        finally:
            finished = True
            gone.cancel()
            await self.events.aclose()

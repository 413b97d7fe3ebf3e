"""Ports: what the skills need from the outside world, as Protocols, with the domain types they speak.

Adapters live in bot/adapters (real) and bot/sandbox (wire-level stand-ins the real adapters talk to).
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field


class Condition(BaseModel):
    type: str
    state: str = ""  # CONDITION_SUCCEEDED / CONDITION_FAILED / CONDITION_RECONCILING / CONDITION_PENDING
    reason: str = ""
    message: str = ""


class TrafficTarget(BaseModel):
    revision: str = ""  # empty with latest=True
    latest: bool = False
    percent: int = 0
    tag: str = ""  # a traffic tag: the target also answers at its own URL (canaries)
    uri: str = ""  # that tagged URL (Cloud Run's TrafficTargetStatus.uri)


class ServiceInfo(BaseModel):
    """The parts of a Cloud Run service an operator looks at; `spec` keeps the full v2 JSON for diffs."""

    name: str
    uri: str = ""
    ready: bool | None = None  # None: still reconciling
    terminal_condition: Condition | None = None
    conditions: list[Condition] = Field(default_factory=list)
    latest_created_revision: str = ""
    latest_ready_revision: str = ""
    min_instances: int = 0
    max_instances: int = 0
    gpu_type: str = ""
    gpu_count: int = 0
    # How a target other than Cloud Run names its accelerator (a TPU slice is not "N x GPU"); empty: the GPU line.
    accelerator: str = ""
    cpu: str = ""
    memory: str = ""
    image: str = ""
    concurrency: int = 0
    args: list[str] = Field(default_factory=list)
    traffic: list[TrafficTarget] = Field(default_factory=list)
    requires_auth: bool = True
    update_time: datetime | None = None
    # What the target scales, as replies name it: Cloud Run's instances, ACA's replicas ("" : nothing scales, a
    # TPU slice is one node).
    scaling_unit: str = "instance"
    spec: dict[str, Any] = Field(default_factory=dict)


class RevisionInfo(BaseModel):
    name: str
    ready: bool | None = None
    reason: str = ""
    message: str = ""
    create_time: datetime | None = None
    ready_at: datetime | None = None  # a ready revision: when its Ready condition last changed (it became ready)
    image: str = ""
    traffic_percent: int = 0
    # Traffic tags naming this revision (a canary's `stable` / `canary`), each with the URL it answers at ('' when
    # not known): Cloud Run's TrafficTargetStatus tag and uri.
    tags: dict[str, str] = Field(default_factory=dict)
    # The configuration the revision runs, as v2 RevisionTemplate JSON (the template fields a Revision carries;
    # empty when the runtime does not say): what a write builds on when this revision is the one serving.
    template: dict[str, Any] = Field(default_factory=dict)


class OperationProgress(BaseModel):
    """One observation of a long-running write, reported while it runs."""

    done: bool
    phase: str
    error: str = ""


class Runtime(Protocol):
    """Where the model service runs (Cloud Run v2 today; a TPU/GKE runtime can be added behind this)."""

    async def get_service(self, name: str) -> ServiceInfo: ...

    async def list_revisions(self, service: str, limit: int = 10) -> list[RevisionInfo]: ...

    async def get_revision(self, service: str, revision: str) -> RevisionInfo: ...

    async def get_service_spec(self, name: str) -> dict[str, Any] | None:
        """The service as Cloud Run v2 JSON (None when it does not exist)."""
        ...

    async def apply_service(self, name: str, spec: dict[str, Any], *, create: bool) -> str:
        """Create or update from v2 JSON; returns the long-running operation's name."""
        ...

    async def wait_operation(self, operation: str, timeout_s: float) -> OperationProgress: ...

    async def delete_service(self, name: str) -> str: ...


class ProbeResult(BaseModel):
    ok: bool
    status_code: int | None = None
    latency_ms: float = 0.0
    error: str = ""


class ModelServer(Protocol):
    """The vLLM server's plain HTTP surface (not the chat API): /health, /v1/models, /metrics, /tokenize."""

    async def health(self, base_url: str) -> ProbeResult: ...

    async def models(self, base_url: str) -> tuple[list[str], ProbeResult]: ...

    async def metrics_text(self, base_url: str) -> str: ...

    async def tokenize(self, base_url: str, model: str, prompt: str) -> list[int]: ...


class LogEntry(BaseModel):
    """One log line with the metadata diagnosis needs (Cloud Logging entry, or a plain text line)."""

    timestamp: datetime | None = None
    severity: str = "DEFAULT"
    text: str
    log_name: str = ""
    revision: str = ""
    http_status: int | None = None


class LogQuery(BaseModel):
    service: str
    since: datetime
    until: datetime | None = None
    revision: str | None = None
    min_severity: str = "DEFAULT"
    max_entries: int = 20000
    max_bytes: int = 20_000_000


class LogBatch(BaseModel):
    entries: list[LogEntry]
    truncated: str = ""  # non-empty: why the fetch stopped early (cap on entries or bytes)


class Logs(Protocol):
    async def fetch(self, query: LogQuery) -> LogBatch: ...


class MetricPoint(BaseModel):
    at: datetime
    value: float


class MetricSeries(BaseModel):
    metric: str
    labels: dict[str, str] = Field(default_factory=dict)
    points: list[MetricPoint] = Field(default_factory=list)


class Metrics(Protocol):
    """Cloud Monitoring time series for the service."""

    async def series(
        self, service: str, metric: str, minutes: int, *, revision: str | None = None
    ) -> list[MetricSeries]:
        """`revision`: only that revision's series (a canary beside the revision it is compared with)."""
        ...


@dataclass(slots=True)
class RequestRecord:
    """One streamed benchmark request, filled in by a StreamExchange as the response arrives (a plain slotted
    dataclass, not pydantic: it is written on every streamed token)."""

    ok: bool
    error: str = ""
    start: float = 0.0  # time.perf_counter() (CLOCK_MONOTONIC on Linux, comparable across processes)
    end: float = 0.0
    ttft: float | None = None
    itls: list[float] = field(default_factory=list)
    output_tokens: int = 0
    prompt_tokens: int = 0
    usage_missing: bool = False
    index: int = -1  # the prompt index (PromptSet.prompt(index)) this request sent
    sent: float = 0.0  # when the request was handed to the socket
    last_text: float = 0.0  # arrival of the latest text-bearing chunk (for the next ITL)

    @property
    def e2e(self) -> float:
        return self.end - self.start


class StreamExchange(Protocol):
    """A pool of streaming connections to the model's `/v1/completions` (the bench's load generator)."""

    async def exchange(self, body: bytes, rec: RequestRecord) -> str:
        """Send one JSON request body and read its SSE stream into `rec` (TTFT, ITLs, usage, `sent`, `end` on
        `[DONE]`). Returns '' or an error label: "HTTP 500", "connection", "stream error: ...", "empty stream"."""
        ...

    async def aclose(self) -> None: ...


class StreamClients(Protocol):
    """Opens a StreamExchange to the model endpoint (its URL and auth resolved now), sized for a concurrency."""

    async def open(self, max_concurrency: int) -> StreamExchange: ...


# --- The key-value store (Redis) ---------------------------------------------------------------------------
# Exactly the commands the skills use, with redis-py's asyncio signatures (redis.asyncio.Redis satisfies these
# structurally; bot/wiring.py checks it where the real client is handed over). Values come back as bytes or
# str depending on the client's decode_responses.


StoreValue = bytes | bytearray | memoryview | str | int | float  # what a stream entry's fields may hold


class StoreScript(Protocol):
    """A server-side Lua script registered once and run by its hash (EVALSHA, loading it when missing)."""

    def __call__(
        self, keys: Sequence[str] | None = None, args: Sequence[str | int | float] | None = None
    ) -> Awaitable[Any]: ...


class StorePipeline(Protocol):
    """A WATCH/MULTI transaction: reads run at once until multi(), then writes are queued for EXEC."""

    async def watch(self, *names: str) -> None: ...

    def multi(self) -> None: ...

    # Before multi() these return the value; after, they queue and return the pipeline (awaited only before).
    def get(self, name: str) -> Any: ...

    def hget(self, name: str, key: str) -> Any: ...

    def set(self, name: str, value: str, *, ex: int | None = None) -> Any: ...

    def zadd(self, name: str, mapping: Mapping[str, float]) -> Any: ...

    def zremrangebyscore(self, name: str, min: float | str, max: float | str) -> Any: ...


class StoreBatch(Protocol):
    """A pipeline without a transaction: commands are queued, then sent in one round trip by execute()."""

    async def __aenter__(self) -> StoreBatch: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> object: ...

    def get(self, name: str) -> Any: ...

    def hgetall(self, name: str) -> Any: ...

    def hlen(self, name: str) -> Any: ...

    async def execute(self) -> list[Any]: ...


class Store(Protocol):
    """The shared store: plans, confirmations, leases, locks, incidents, audit stream, caches.

    Outages surface as the client's own exceptions; a skill that must ride one out (a lease's renewer) treats
    any failed call as "the store is away" rather than naming a client library's exception classes."""

    def get(self, name: str) -> Awaitable[bytes | str | None]: ...

    def set(
        self, name: str, value: str, *, ex: int | None = None, px: int | None = None, nx: bool = False, xx: bool = False
    ) -> Awaitable[bool | str | bytes | None]: ...

    def delete(self, *names: str) -> Awaitable[int]: ...

    def expire(self, name: str, time: int) -> Awaitable[bool]: ...

    def hgetall(self, name: str) -> Awaitable[dict[bytes | str, bytes | str]]: ...

    def hsetnx(self, name: str, key: str, value: str) -> Awaitable[int]: ...

    def lpush(self, name: str, *values: str) -> Awaitable[int]: ...

    def ltrim(self, name: str, start: int, end: int) -> Awaitable[bool]: ...

    def lrange(self, name: str, start: int, end: int) -> Awaitable[list[Any]]: ...

    def xadd(
        self, name: str, fields: dict[StoreValue, StoreValue], *, maxlen: int | None = None, approximate: bool = True
    ) -> Awaitable[bytes | str]: ...

    def xrevrange(
        self, name: str, *, count: int | None = None
    ) -> Awaitable[list[tuple[bytes | str | None, dict[bytes | str, bytes | str] | None]] | None]: ...

    def getdel(self, name: str) -> Awaitable[bytes | str | None]: ...

    def exists(self, *names: str) -> Awaitable[int]: ...

    def incr(self, name: str, amount: int = 1) -> Awaitable[int]: ...

    def hget(self, name: str, key: str) -> Awaitable[bytes | str | None]: ...

    def hincrby(self, name: str, key: str, amount: int = 1) -> Awaitable[int]: ...

    def hdel(self, name: str, *keys: str) -> Awaitable[int]: ...

    def hset(self, name: str, key: str, value: str) -> Awaitable[int]: ...

    def smembers(self, name: str) -> Awaitable[builtins.set[Any]]: ...

    def zcard(self, name: str) -> Awaitable[int]: ...

    def zcount(self, name: str, min: float | str, max: float | str) -> Awaitable[int]: ...

    def zrange(self, name: str, start: int, end: int, *, withscores: bool = False) -> Awaitable[list[Any]]: ...

    def zrangebyscore(self, name: str, min: float | str, max: float | str) -> Awaitable[list[Any]]: ...

    def zadd(self, name: str, mapping: Mapping[str, float]) -> Awaitable[Any]: ...

    def zrem(self, name: str, *values: str) -> Awaitable[Any]: ...

    def pipeline(self, transaction: bool = True) -> StoreBatch: ...

    def eval(self, script: str, numkeys: int, *keys_and_args: str | int | float) -> Awaitable[Any]: ...

    def register_script(self, script: str) -> StoreScript: ...

    async def transaction(
        self,
        func: Callable[[StorePipeline], Awaitable[Any]],
        *watches: str,
        value_from_callable: bool = False,
    ) -> Any:
        """Run `func` on a pipeline watching `watches` (func may watch more), then EXEC; rerun from the start
        whenever a watched key changed before EXEC. Returns func's value with value_from_callable."""
        ...


# --- The model's OpenAI-compatible API (vLLM's /v1/chat/completions and /v1/models) -------------------------


class ModelAPIError(Exception):
    """A failed call to the model's API; str() is the client's own description."""


class ModelTimeout(ModelAPIError):
    """The server did not answer in time."""


class ModelUnreachable(ModelAPIError):
    """No connection to the server."""


class ModelHTTPError(ModelAPIError):
    """The server answered with an error status; `message` is its own error message, when it sent one."""

    def __init__(self, text: str, status_code: int, message: str) -> None:
        super().__init__(text)
        self.status_code = status_code
        self.message = message


class ChatReply(BaseModel):
    content: str = ""
    tool_calls: int = 0  # how many tool calls the model answered with


@dataclass(slots=True)
class ChatChunk:
    """One piece of a streamed chat completion: a choice's delta, or the closing usage (text empty)."""

    content: str = ""
    reasoning: str = ""  # reasoning text (vLLM's reasoning parser), kept apart from the answer
    tool_call: bool = False
    finish_reason: str | None = None
    prompt_tokens: int | None = None  # set on the usage chunk only (stream_options.include_usage)
    completion_tokens: int | None = None


class ModelCard(BaseModel):
    id: str
    max_model_len: int | None = None  # vLLM lists it on each card of /v1/models


class ModelAPI(Protocol):
    """Chat completions and the model list; failures raise ModelAPIError (or a subclass)."""

    async def chat(
        self, model: str, messages: list[dict[str, Any]], *, max_tokens: int, tools: list[dict[str, Any]] | None = None
    ) -> ChatReply:
        """One completion; with `tools`, tool_choice is "auto"."""
        ...

    def chat_stream(self, model: str, messages: list[dict[str, Any]], *, max_tokens: int) -> AsyncIterator[ChatChunk]:
        """A streamed completion that ends with a usage chunk (when the server sends one)."""
        ...

    async def models(self) -> list[ModelCard]: ...


class ModelEndpoint(Protocol):
    """Where the model is (VLLM_BASE_URL or the Cloud Run service's URL) and its chat API, with auth."""

    async def base_url(self) -> str:
        """The server root (no /v1)."""
        ...

    async def model_id(self) -> str: ...

    async def client(self, *, timeout_s: float | None = None) -> ModelAPI: ...


# --- Preflight: what a deploy needs to exist before Confirm (skills/deploy/preflight.py) --------------------


class PreflightUnavailable(Exception):
    """A preflight source could not be asked (unreachable, refused the bot's own credentials, answered in a way
    that says nothing about the deploy); str() says why, fit for the plan."""


class HubAccess(BaseModel):
    """What the model hub says of a checkpoint, asked with the bot's copy of the service's HF token."""

    state: Literal["ok", "missing", "gated", "token_rejected", "forbidden"]
    gated: bool = False  # the repo asks users to accept its licence before downloading
    with_token: bool = False  # the question was asked with a token (False: anonymously)
    detail: str = ""  # the hub's own words, when it gave some (redacted by the adapter)


class ImageLookup(BaseModel):
    """A registry's answer to a manifest request for one image reference."""

    state: Literal["ok", "missing", "denied"]
    digest: str = ""  # Docker-Content-Digest of the manifest (or index) found
    detail: str = ""


class WeightsListing(BaseModel):
    """Object names under a prefix of a bucket (at most the adapter's limit)."""

    state: Literal["ok", "no_bucket", "denied"]
    names: list[str] = Field(default_factory=list)
    detail: str = ""


class ModelHub(Protocol):
    async def access(self, repo_id: str) -> HubAccess: ...


class ImageRegistry(Protocol):
    async def lookup(self, image: str) -> ImageLookup: ...


class WeightStore(Protocol):
    async def list_prefix(self, bucket: str, prefix: str) -> WeightsListing: ...


class QuotaRequest(BaseModel):
    """A quota preference: someone asked for a value (an increase request), and what Google granted so far."""

    region: str = ""  # "" when the preference has no region dimension
    preferred: int
    granted: int | None = None
    pending: bool = False  # still awaiting Google's approval and fulfilment (the API's `reconciling`)
    detail: str = ""


class QuotaReader(Protocol):
    async def quota_value(self, service: str, quota_id: str, region: str) -> int | None:
        """The quota's value in `region` (None: the API gives no value there); -1 means unlimited."""
        ...

    async def quota_requests(self, service: str, quota_id: str) -> list[QuotaRequest]:
        """The project's quota preferences for that quota (increase requests and their state)."""
        ...

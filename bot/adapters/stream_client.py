"""The bench load generator's HTTP client: raw HTTP/1.1 streaming POSTs to the model's `/v1/completions`.

Implements skills.ports.StreamExchange / StreamClients. Requests go out on keep-alive connections, each an
asyncio.Protocol whose response is parsed by httptools (the parser uvicorn uses) and whose SSE events are parsed
as bytes arrive: a streamed token costs one callback, not a task wake-up. Measured against the stand-in
(bench/loadgen_capacity.py), the openai SDK spends ~5x the client CPU per streamed request and aiohttp ~2x, and
both queue requests in the client at high concurrency, inflating the latencies the bench reports.
Times are taken when a read from the socket reaches the client (SSE events in one read share its time).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import httptools

from skills.errors import InvalidInput
from skills.ports import RequestRecord


@dataclass(frozen=True, slots=True)
class StreamTarget:
    """Where the generator sends requests: the OpenAI API root (`.../v1`) and the headers that authenticate."""

    base_url: str
    headers: dict[str, str] = field(default_factory=dict)


# Headers the generator sets itself (an endpoint's values for these are not the generator's).
_OWN_HEADERS = {"user-agent", "accept", "accept-encoding", "content-type", "content-length", "host", "connection"}


class _Connection(asyncio.Protocol):
    """One keep-alive connection. Each exchange fills a RequestRecord from the response as it streams in."""

    def __init__(self, pool: set[_Connection]) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.rec: RequestRecord | None = None
        self.fut: asyncio.Future[str] | None = None
        self.status = 0
        self.buf = b""
        self.now = 0.0
        self.done = False  # saw `data: [DONE]`
        self.got_bytes = False
        self.keep_alive = False

    def begin(self, rec: RequestRecord, fut: asyncio.Future[str]) -> None:
        self.rec, self.fut = rec, fut
        self.status, self.buf, self.done, self.got_bytes, self.keep_alive = 0, b"", False, False, False

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.pool.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool.discard(self)
        self._finish("connection")

    def data_received(self, data: bytes) -> None:
        self.now = time.perf_counter()  # every event in this read arrived now
        self.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._finish("bad HTTP response")
            self.abort()

    # httptools callbacks
    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.keep_alive = self.parser.should_keep_alive()  # only meaningful while parsing this message

    def on_body(self, body: bytes) -> None:
        rec = self.rec
        if rec is None or self.status != 200 or self.done or rec.error:
            return
        buf = self.buf + body if self.buf else body
        if b"\r" in buf:  # CRLF framing is legal SSE
            buf = buf.replace(b"\r\n", b"\n")
        if b"\n\n" not in buf:
            self.buf = buf
            return
        *events, self.buf = buf.split(b"\n\n")
        now = self.now
        for event in events:
            for line in event.split(b"\n"):
                if not line.startswith(b"data:"):
                    continue  # comments, event:/id: fields
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    self.done = True
                    rec.end = now
                    return
                try:
                    self._event(rec, json.loads(payload), now)
                except (ValueError, TypeError, AttributeError):  # not JSON, or not a completion chunk
                    rec.error, rec.end = "bad SSE data", now
                if rec.error:
                    return

    @staticmethod
    def _event(rec: RequestRecord, obj: dict[str, Any], now: float) -> None:
        if "error" in obj or obj.get("object") == "error":
            err = obj.get("error", obj)
            msg = err.get("message", err) if isinstance(err, dict) else err
            rec.error, rec.end = f"stream error: {str(msg)[:80]}", now
            return
        for ch in obj.get("choices") or ():
            if ch.get("text"):
                if rec.ttft is None:
                    rec.ttft = now - rec.start
                else:
                    rec.itls.append(now - rec.last_text)
                rec.last_text = now
        usage = obj.get("usage")
        if usage:
            rec.output_tokens = int(usage.get("completion_tokens") or 0)
            rec.prompt_tokens = int(usage.get("prompt_tokens") or 0)

    def on_message_complete(self) -> None:
        self._finish("")

    def _finish(self, error: str) -> None:
        if self.fut is not None and not self.fut.done():
            self.fut.set_result(error)


class StreamClient:
    """Keep-alive connections to the endpoint (one per concurrent request, reused; no queueing in the client)
    and the streamed-request exchange. Use as `async with`; closing drops every connection."""

    def __init__(self, target: StreamTarget, max_concurrency: int = 0, timeout_s: float = 300.0) -> None:
        url = urlsplit(target.base_url.rstrip("/"))
        if url.scheme not in ("http", "https") or not url.hostname:
            raise InvalidInput(f"The model endpoint `{url.scheme}://{url.hostname}` is not an http(s) URL.")
        self.target = target
        self.host = url.hostname
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if url.scheme == "https" else None
        host = url.hostname if url.port is None else f"{url.hostname}:{url.port}"
        if ":" in url.hostname:  # IPv6 literal
            host = f"[{url.hostname}]" + (f":{url.port}" if url.port else "")
        headers = {
            "Host": host,
            "User-Agent": "gemma-sre-loadgen",
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            # A compressing proxy would buffer the stream and distort TTFT/ITL: ask for it as sent.
            "Accept-Encoding": "identity",
            **{k: v for k, v in target.headers.items() if k.lower() not in _OWN_HEADERS},
        }
        if any(c in k + v for k, v in headers.items() for c in "\r\n"):
            raise InvalidInput("A header for the model endpoint contains a line break.")
        head = f"POST {url.path}/completions HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self._head = head.encode("latin-1", "replace")
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self.max_concurrency = max_concurrency
        self.timeout_s = timeout_s

    async def __aenter__(self) -> StreamClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for conn in list(self._open):
            conn.abort()
        self._idle.clear()

    async def _connection(self) -> tuple[_Connection, bool]:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn, True
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(
            lambda: _Connection(self._open),
            self.host,
            self.port,
            ssl=self._ssl,
            server_hostname=self.host if self._ssl else None,
        )
        return conn, False

    async def exchange(self, body: bytes, rec: RequestRecord) -> str:
        """Send one request and read its streamed response into `rec`: '' or a transport-level error."""
        try:
            return await self._exchange(body, rec)
        except OSError as exc:  # refused, reset, unreachable, TLS failures (ssl.SSLError is an OSError)
            return _error_type(exc)

    async def _exchange(self, body: bytes, rec: RequestRecord) -> str:
        for attempt in (0, 1):
            conn, reused = await self._connection()
            fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            conn.begin(rec, fut)
            assert conn.transport is not None
            conn.transport.write(self._head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
            rec.sent = time.perf_counter()
            try:
                error = await fut
            except BaseException:  # timed out or cancelled mid-response: the connection can't be reused
                conn.abort()
                raise
            if error and reused and not conn.got_bytes and attempt == 0:
                continue  # the server had closed the idle connection: not the request's failure, send again
            if error or conn.closed or not conn.keep_alive:
                conn.abort()
            else:
                self._idle.append(conn)  # the response is complete: the connection is free for the next one
            if conn.status and conn.status != 200:
                return f"HTTP {conn.status}"
            if rec.error:  # the server reported an error in the stream, or sent something that isn't SSE
                return rec.error
            if conn.done:  # complete, whatever happened to the connection after [DONE]
                return "" if rec.ttft is not None else "empty stream"
            return error or ("incomplete stream" if rec.ttft is not None else "empty stream")
        return "connection"


def _error_type(exc: OSError) -> str:
    # A connect that timed out at the OS level is a timeout, like the request's own deadline.
    return "timeout" if isinstance(exc, TimeoutError) else "connection"


class _Endpoint(Protocol):
    """What the factory needs from bot.adapters.llm.LLMEndpoint."""

    async def base_url(self) -> str: ...

    async def auth_headers(self) -> dict[str, str]: ...


class EndpointStreams:
    """skills.ports.StreamClients over the model endpoint: its URL and auth (API key or identity token),
    resolved when a sweep opens its connection pool."""

    def __init__(self, endpoint: _Endpoint) -> None:
        self._endpoint = endpoint

    async def target(self) -> StreamTarget:
        return StreamTarget(await self._endpoint.base_url() + "/v1", await self._endpoint.auth_headers())

    async def open(self, max_concurrency: int) -> StreamClient:
        return StreamClient(await self.target(), max_concurrency)

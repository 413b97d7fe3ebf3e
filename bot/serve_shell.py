"""The ASGI app `gemma-sre serve` binds first: it answers /healthz at once while the real app (Slack, Redis,
Google clients; ~1-2 s of imports) is imported and wired in a worker thread, then hands every request to it.

Cloud Run and load balancers probe liveness from the first second; readiness (/readyz) answers 503 until the
real app is wired and its start-up (lifespan) has run, and every other request waits for that (a Slack
request arriving this early still gets its ack within Slack's 3 s). If wiring fails, the process stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Any]
Send = Callable[[dict[str, Any]], Any]


async def _json(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


class ServeShell:
    """`build` runs in a worker thread (imports and wiring, nothing bound to the event loop) and returns the
    real app, a Starlette app whose lifespan this shell runs; `on_failure` is told when that goes wrong."""

    def __init__(self, build: Callable[[], Any], on_failure: Callable[[BaseException], None]) -> None:
        self.build = build
        self.on_failure = on_failure
        self.app: Any = None
        self.failed = False
        self.ready = asyncio.Event()
        self._stack = contextlib.AsyncExitStack()
        self._wiring: asyncio.Task[None] | None = None

    async def _wire(self) -> None:
        try:
            app = await asyncio.to_thread(self.build)
            await self._stack.enter_async_context(app.router.lifespan_context(app))
        except Exception as exc:  # reported, and the process stops: nothing could serve
            log.error("gemma-sre serve could not start: %s: %s", type(exc).__name__, exc, exc_info=exc)
            self.failed = True
            self.ready.set()  # requests waiting for the app answer 503 instead of hanging
            self.on_failure(exc)
            return
        self.app = app
        self.ready.set()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._wiring = asyncio.create_task(self._wire())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._wiring is not None:
                    await self._wiring  # a half-wired app still gets its shutdown (Redis, sessions, workers)
                await self._stack.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if self.app is None and scope["type"] == "http":
            if scope["path"] == "/healthz":
                await _json(send, 200, {"ok": True})
                return
            if scope["path"] == "/readyz":
                await _json(send, 503, {"ok": False, "starting": True})
                return
        await self.ready.wait()
        if self.app is None:
            if scope["type"] == "http":
                await _json(send, 503, {"ok": False, "error": "start-up failed"})
            return
        await self.app(scope, receive, send)

"""`gemma-sre serve` answers /healthz while the real app is still being imported and wired (issue 18: /healthz
within 1 s of start; bench/startup.py measures it): readiness says 503 until then, other requests wait for the
real app, and a failed wiring stops the process instead of serving 503s forever. The shell is driven through
its ASGI interface, the real app being a Starlette app whose wiring a test holds back."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.sandbox.slack_api import SlackStandIn
from bot.serve_shell import ServeShell
from tests.conftest import REDIS_URL
from tests.eventually import eventually

ROOT = Path(__file__).resolve().parent.parent


class Lifespan:
    """Drives an ASGI app's lifespan protocol as uvicorn does."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.sent: list[str] = []
        self.task: asyncio.Task[None] | None = None

    async def _send(self, message: dict[str, Any]) -> None:
        self.sent.append(message["type"])

    async def startup(self) -> None:
        self.task = asyncio.create_task(self.app({"type": "lifespan"}, self.inbox.get, self._send))
        await self.inbox.put({"type": "lifespan.startup"})
        assert await eventually(lambda: "lifespan.startup.complete" in self.sent, timeout=5)

    async def shutdown(self) -> None:
        await self.inbox.put({"type": "lifespan.shutdown"})
        assert self.task is not None
        await asyncio.wait_for(self.task, 10)


def real_app(events: list[str]) -> Starlette:
    async def readyz(request: Request) -> Response:
        return JSONResponse({"ok": True, "redis": "ok"})

    async def slack(request: Request) -> Response:
        return JSONResponse({"acked": True})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        events.append("started")
        yield
        events.append("stopped")

    return Starlette(
        routes=[Route("/readyz", readyz), Route("/slack/events", slack, methods=["POST"])], lifespan=lifespan
    )


async def test_healthz_answers_while_the_app_is_wired_and_requests_wait_for_it() -> None:
    release = threading.Event()
    events: list[str] = []

    def build() -> Starlette:
        assert release.wait(10)  # the imports and wiring, held back by the test
        return real_app(events)

    failures: list[BaseException] = []
    shell = ServeShell(build, failures.append)
    life = Lifespan(shell)
    await life.startup()  # start-up completes without waiting for the build: uvicorn binds at once
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=shell), base_url="http://bot")
    try:
        health = await client.get("/healthz")
        assert (health.status_code, health.json()) == (200, {"ok": True})
        ready = await client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["starting"] is True
        early = asyncio.create_task(client.post("/slack/events", content=b"x"))
        for _ in range(20):  # yield to it: it reaches the shell, which must hold it for the real app
            await asyncio.sleep(0)
        assert not early.done() and events == []

        release.set()
        answer = await asyncio.wait_for(early, 10)
        assert answer.json() == {"acked": True}
        assert events == ["started"]  # the real app's lifespan ran before it served
        ready = await client.get("/readyz")
        assert (ready.status_code, ready.json()) == (200, {"ok": True, "redis": "ok"})
    finally:
        release.set()
        await client.aclose()
        await life.shutdown()
    assert events == ["started", "stopped"] and failures == []
    assert life.sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


async def test_a_failed_wiring_stops_the_process_and_waiting_requests_get_503() -> None:
    release = threading.Event()

    def build() -> Starlette:
        assert release.wait(10)
        raise RuntimeError("redis url is not a url")

    failures: list[BaseException] = []
    shell = ServeShell(build, failures.append)
    life = Lifespan(shell)
    await life.startup()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=shell), base_url="http://bot")
    try:
        waiting = asyncio.create_task(client.post("/slack/events", content=b"x"))
        for _ in range(20):
            await asyncio.sleep(0)
        release.set()
        answer = await asyncio.wait_for(waiting, 10)
        assert answer.status_code == 503
        assert [str(f) for f in failures] == ["redis url is not a url"]  # serve sets should_exit on this
    finally:
        await client.aclose()
        await life.shutdown()


def test_serve_exits_3_when_its_port_is_taken(slack: SlackStandIn, key_prefix: str) -> None:
    # As uvicorn.run did before serve ran its own server: an unbindable port is a failed start, not exit 0.
    env = dict(
        os.environ,
        SLACK_BOT_TOKEN="xoxb-test",
        SLACK_SIGNING_SECRET="s3cret",
        REDIS_URL=REDIS_URL,
        KEY_PREFIX=key_prefix,
        SLACK_API_URL=slack.base_url + "/api/",
        PYTHONPATH=str(ROOT),
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = subprocess.run(
            [sys.executable, "-m", "bot.cli", "serve", "--host", "127.0.0.1", "--port", port],
            env=env,
            cwd=ROOT / "tests",
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 3, done.stdout + done.stderr

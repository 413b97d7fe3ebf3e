"""Run an ASGI app on 127.0.0.1 (random port) in a background thread, for wire-level stand-ins."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


class _Server(uvicorn.Server):
    """A uvicorn server that stops at once when asked from another thread.

    uvicorn notices `should_exit` on a 0.1 s tick and then waits for open connections in 0.1 s steps; a test
    suite starting hundreds of stand-ins paid that on every teardown. `stop()` closes the listening socket
    from the server's own loop (new connections are refused from then on) and lets the rest finish in the
    background."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.loop: asyncio.AbstractEventLoop | None = None

    def install_signal_handlers(self) -> None:  # not the main thread
        pass

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        await super().startup(sockets=sockets)

    def stop(self, thread: threading.Thread) -> None:
        self.should_exit = True
        self.force_exit = True  # stand-ins have no lifespan work; open keep-alive connections need no grace
        loop = self.loop
        if loop is None or loop.is_closed() or not thread.is_alive():
            return
        closed = threading.Event()

        def close_listeners() -> None:
            for s in self.servers:
                s.close()
            closed.set()

        try:
            loop.call_soon_threadsafe(close_listeners)
        except RuntimeError:  # the loop closed meanwhile
            return
        closed.wait(timeout=2)


@contextmanager
def serve(app: Any, *, ws_max: int | None = None, ssl: tuple[str, str] | None = None) -> Iterator[str]:
    """Yield the base URL (http://127.0.0.1:PORT) while the app is served.

    `ssl` (certificate file, key file) serves it over TLS instead (https://127.0.0.1:PORT): clients that refuse to
    send a bearer token over plain HTTP (azure-core) need it.

    On exit the port stops accepting connections before this returns; the server thread (a daemon)
    finishes its in-flight work on its own."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="off",  # no stand-in app has startup/shutdown work
        access_log=False,
        backlog=2048,
        ws_max_size=ws_max or 16 * 1024 * 1024,
        timeout_graceful_shutdown=1,
        ssl_certfile=ssl[0] if ssl else None,
        ssl_keyfile=ssl[1] if ssl else None,
    )
    server = _Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("stand-in server did not start")
        time.sleep(0.005)
    try:
        yield f"{'https' if ssl else 'http'}://127.0.0.1:{port}"
    finally:
        server.stop(thread)
        sock.close()


async def hold(seconds: float) -> None:
    """A slow service: hold the answer. A stand-in stopped meanwhile drops the held request quietly."""
    if seconds > 0:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(seconds)

"""The Redis client the bot builds from REDIS_URL: it talks to the real server, and a server that accepts the
connection but never answers (a half-open path after a failover) fails the call within REDIS_TIMEOUT_S instead of
hanging the handler."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest
import redis.exceptions

from bot.settings import Settings
from bot.state import make_redis


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP listener that accepts and then never writes a byte."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            held.append(conn)

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()


async def test_the_client_talks_to_the_real_server(key_prefix: str) -> None:
    client = make_redis(Settings(redis_url="redis://127.0.0.1:6379/0"))
    try:
        await client.set(f"{key_prefix}:probe", "1", px=5000)
        assert await client.get(f"{key_prefix}:probe") == "1"
    finally:
        await client.delete(f"{key_prefix}:probe")
        await client.aclose()


async def test_a_server_that_never_answers_fails_the_call_instead_of_hanging(silent_server: int) -> None:
    client = make_redis(Settings(redis_url=f"redis://127.0.0.1:{silent_server}/0", redis_timeout_s=1.5))
    try:
        # The outer wait_for is only the test's own guard: without the client's timeout the call would hang.
        with pytest.raises((redis.exceptions.TimeoutError, redis.exceptions.ConnectionError)):
            await asyncio.wait_for(client.get("anything"), timeout=20)
    finally:
        await client.aclose()


def test_the_timeout_stays_above_the_queues_blocking_read() -> None:
    with pytest.raises(ValueError, match="redis_timeout_s"):
        Settings(redis_timeout_s=0.5)

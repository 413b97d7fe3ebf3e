"""Fixtures for the observe/bench tests: the vLLM simulator served on 127.0.0.1, Deps wired to it, and a
responder that records what a chat surface would show (posts, edits in place, uploads)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from bot.deps import Deps
from bot.sandbox.server import serve
from bot.sandbox.vllm_sim import SimConfig, VllmSim
from bot.settings import Settings
from bot.wiring import build_deps, close_deps
from handlers.render_text import to_text
from handlers.reply import FileOut, Reply


@contextmanager
def running_sim(**config: Any) -> Iterator[tuple[VllmSim, str]]:
    sim = VllmSim(SimConfig(**config))
    with serve(sim.app) as url:
        yield sim, url


@pytest.fixture
def sim() -> Iterator[tuple[VllmSim, str]]:
    with running_sim() as pair:
        yield pair


@pytest.fixture
async def deps_for(settings: Settings) -> AsyncIterator[Callable[..., Deps]]:
    """deps_for(base_url, **setting_overrides) -> Deps wired by bot.wiring against the given model server."""
    made: list[Deps] = []

    def make(base_url: str, **overrides: Any) -> Deps:
        d = build_deps(settings.model_copy(update={"vllm_base_url": base_url, **overrides}))
        made.append(d)
        return d

    yield make
    for d in made:
        await close_deps(d)


class RecordingResponder:
    """A chat surface that keeps every message, edit and upload, with Slack-like ts values."""

    channel = "C1"

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.posts: dict[str, Reply] = {}
        self.threads: list[tuple[str | None, Reply]] = []
        self.updates: list[tuple[str, Reply]] = []
        self.uploads: list[tuple[FileOut, str | None]] = []
        self._ts = itertools.count(1)

    async def reply(self, reply: Reply) -> None:
        self.replies.append(reply)

    async def post(self, reply: Reply, thread_ts: str | None = None) -> str:
        ts = f"1700000000.{next(self._ts):06d}"
        self.posts[ts] = reply
        self.threads.append((thread_ts, reply))
        for f in reply.files:
            await self.upload(f, thread_ts or ts)
        return ts

    async def update(self, ts: str, reply: Reply) -> None:
        self.updates.append((ts, reply))
        self.posts[ts] = reply

    async def upload(self, file: FileOut, thread_ts: str | None = None) -> None:
        self.uploads.append((file, thread_ts))

    async def open_modal(self, view: dict[str, Any]) -> None:
        raise AssertionError("no modal expected")


def reply_text(reply: Reply) -> str:
    return to_text(reply)

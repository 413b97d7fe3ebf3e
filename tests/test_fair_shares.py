"""Fair shares of background work: one user's burst of model questions against a slow model does not starve
a deployer's write plan or another user's command, and long runs (a benchmark, a deploy's watch) are counted
apart. Through the real ASGI app, Bolt and Redis, with signed slash commands."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bot.deps import Deps
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.server import serve
from bot.sandbox.slack_api import SlackStandIn
from bot.sandbox.slack_signing import command_body, signed_headers
from bot.settings import Settings
from bot.web import create_app
from bot.wiring import build_deps
from tests.conftest import SIGNING_SECRET
from tests.eventually import eventually


class SlowModel:
    """A model server that holds every request until released (then answers 503): a model under load."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.waiting = 0
        self._gate: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

        async def hold(request: Request) -> JSONResponse:
            self.waiting += 1
            if self._gate is None:
                self._gate = (asyncio.get_running_loop(), asyncio.Event())
            if not self.released.is_set():
                await self._gate[1].wait()
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=503)

        self.app = Starlette(  # every path: /v1/models, /health, /v1/chat/completions
            routes=[Route("/{path:path}", hold, methods=["GET", "POST"])],
        )

    def release(self) -> None:
        self.released.set()
        if self._gate is not None:
            loop, event = self._gate
            loop.call_soon_threadsafe(event.set)


@pytest.fixture
def slow_model() -> Iterator[tuple[SlowModel, str]]:
    model = SlowModel()
    with serve(model.app) as url:
        try:
            yield model, url
        finally:
            model.release()


@pytest.fixture
async def bot(
    settings: Settings, redis_client: object, slow_model: tuple[SlowModel, str]
) -> AsyncIterator[tuple[httpx.AsyncClient, Deps]]:
    model, url = slow_model
    deps = build_deps(settings.model_copy(update={"vllm_base_url": url, "vllm_model_id": "google/gemma-4-12b-it"}))
    app = create_app(deps)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test") as client:
        yield client, deps
    model.release()
    await deps.drain(timeout_s=60)
    await deps.redis.aclose()


async def _command(
    client: httpx.AsyncClient, text: str, user: str, trigger: str, response_url: str, channel: str = "C1"
) -> None:
    body = command_body(text, response_url, trigger_id=trigger, user_id=user, channel_id=channel)
    resp = await client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
    assert resp.status_code == 200, resp.text


async def test_a_burst_of_questions_from_one_user_does_not_starve_a_write_plan_or_other_users(
    bot: tuple[httpx.AsyncClient, Deps],
    slack: SlackStandIn,
    cloud_run: CloudRunStandIn,
    slow_model: tuple[SlowModel, str],
) -> None:
    client, _deps = bot
    model, _ = slow_model
    cloud_run.seed_service("vllm-gemma4", min_instances=0, max_instances=1)
    for i in range(24):
        # each in its own channel: Slack's per-channel pacing is not what this test is about
        await _command(client, f"ask is it up? {i}", "UBUSY", f"trig-ask-{i}", slack.response_url(f"a{i}"), f"CA{i}")
    assert await eventually(lambda: model.waiting >= 1)

    await _command(client, "scale 0 2", "UDEPLOYER", "trig-scale", slack.response_url("scale"))
    await _command(client, "models", "UOTHER", "trig-models", slack.response_url("models"))

    plan = await eventually(lambda: [r for r in slack.responses if "Confirm" in json.dumps(r)])
    assert plan, "the deployer's scale plan waited behind one user's questions"
    assert await eventually(lambda: [r for r in slack.responses if "Models and GPUs" in json.dumps(r)]), (
        "another user's command waited behind one user's questions"
    )
    assert not model.released.is_set() and model.waiting < 24  # one user's share of the model, not all of it

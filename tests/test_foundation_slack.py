"""End to end through the real ASGI app, Bolt, slack-sdk, google-cloud-run and Redis, against stand-ins."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from bot.deps import Deps
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.model_server import ModelServerStandIn
from bot.sandbox.slack_api import SlackStandIn
from bot.sandbox.slack_signing import command_body, signed_headers
from bot.settings import Settings
from bot.web import create_app
from bot.wiring import build_deps
from tests.conftest import SIGNING_SECRET
from tests.eventually import eventually


@pytest.fixture
async def app_client(settings: Settings, redis_client: object) -> AsyncIterator[tuple[httpx.AsyncClient, Deps]]:
    deps = build_deps(settings)
    app = create_app(deps)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bot.test") as client:
        yield client, deps
    await deps.drain()
    await deps.redis.aclose()


async def _post_command(
    client: httpx.AsyncClient,
    text: str,
    response_url: str,
    trigger: str,
    extra_headers: dict[str, str] | None = None,
) -> httpx.Response:
    body = command_body(text, response_url, trigger_id=trigger)
    headers = signed_headers(SIGNING_SECRET, body) | (extra_headers or {})
    return await client.post("/slack/events", content=body, headers=headers)


def _blocks_text(resp: dict) -> str:
    return json.dumps(resp.get("blocks", [])) + resp.get("text", "")


async def test_signed_status_command_acks_then_posts_status(
    app_client, slack: SlackStandIn, cloud_run: CloudRunStandIn, model_server: ModelServerStandIn
) -> None:
    client, _ = app_client
    cloud_run.seed_service("vllm-gemma4", ready=True, min_instances=0, max_instances=2)
    resp = await _post_command(client, "status", slack.response_url("r1"), "trig-status-1")
    assert resp.status_code == 200  # the ack; how fast it comes is a bench figure (bench/ack_latency.py)
    assert "Checking" in resp.text
    answered = await eventually(lambda: slack.responses)
    assert answered, "the status never reached the response URL"
    text = _blocks_text(slack.responses[0])
    assert "vllm-gemma4: ready" in text
    assert "google/gemma-4-12b-it" in text  # served model id from /v1/models
    assert "min 0 / max 2" in text
    assert "1 x nvidia-l4" in text
    assert slack.responses[0]["response_type"] == "in_channel"


async def test_second_status_within_ttl_is_served_from_redis(app_client, slack, cloud_run, model_server) -> None:
    client, _ = app_client
    cloud_run.seed_service("vllm-gemma4")
    await _post_command(client, "status", slack.response_url("a"), "trig-c1")
    assert await eventually(lambda: len(slack.responses) == 1)
    calls_after_first = len(cloud_run.requests)
    await _post_command(client, "status", slack.response_url("b"), "trig-c2")
    assert await eventually(lambda: len(slack.responses) == 2)
    assert len(cloud_run.requests) == calls_after_first, "second call went to Cloud Run despite the cache"
    assert "(cached)" in _blocks_text(slack.responses[1])
    # --fresh bypasses the cache
    await _post_command(client, "status --fresh", slack.response_url("c"), "trig-c3")
    assert await eventually(lambda: len(slack.responses) == 3)
    assert len(cloud_run.requests) > calls_after_first


async def test_not_ready_service_shows_reason(app_client, slack, cloud_run) -> None:
    client, _ = app_client
    cloud_run.seed_service("vllm-gemma4", ready=False)
    await _post_command(client, "status", slack.response_url(), "trig-nr")
    assert await eventually(lambda: slack.responses)
    text = _blocks_text(slack.responses[0])
    assert "NOT ready" in text
    assert "REVISION_FAILED" in text
    assert "failed the configured startup probe" in text


async def test_cold_service_says_so(app_client, slack, cloud_run, model_server) -> None:
    client, _ = app_client
    cloud_run.seed_service("vllm-gemma4", min_instances=0)
    model_server.health_status = 503
    await _post_command(client, "status", slack.response_url(), "trig-cold")
    assert await eventually(lambda: slack.responses)
    text = _blocks_text(slack.responses[0])
    assert "scaled to zero" in text and "cold" in text


@pytest.mark.parametrize(
    "mangle",
    [
        lambda h: h | {"X-Slack-Signature": "v0=" + "0" * 64},  # forged
        lambda h: h | {"X-Slack-Request-Timestamp": str(int(time.time()) - 3600)},  # stale (sig over old ts)
        lambda h: {k: v for k, v in h.items() if not k.startswith("X-Slack")},  # unsigned
    ],
    ids=["forged", "stale", "unsigned"],
)
async def test_bad_signatures_get_401_and_do_nothing(app_client, slack, cloud_run, mangle) -> None:
    client, deps = app_client
    cloud_run.seed_service("vllm-gemma4")
    body = command_body("status", slack.response_url(), trigger_id="trig-forged")
    headers = mangle(signed_headers(SIGNING_SECRET, body))
    resp = await client.post("/slack/events", content=body, headers=headers)
    assert resp.status_code == 401
    await deps.drain()
    assert slack.responses == []
    assert not [r for r in cloud_run.requests if r[0] == "GET" and r[1].endswith("/services/vllm-gemma4")]


async def test_stale_but_correctly_signed_request_is_refused(app_client, slack) -> None:
    client, _ = app_client
    body = command_body("status", slack.response_url(), trigger_id="trig-stale")
    old = int(time.time()) - 600
    resp = await client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body, ts=old))
    assert resp.status_code == 401


async def test_slack_retry_does_not_run_the_command_twice(app_client, slack, cloud_run) -> None:
    client, deps = app_client
    cloud_run.seed_service("vllm-gemma4")
    await _post_command(client, "status --fresh", slack.response_url(), "trig-retry")
    resp = await _post_command(
        client,
        "status --fresh",
        slack.response_url(),
        "trig-retry",
        {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"},
    )
    assert resp.status_code == 200
    await deps.drain()
    assert await eventually(lambda: slack.responses)
    assert len(slack.responses) == 1


async def test_unknown_subcommand_gets_ephemeral_help(app_client, slack) -> None:
    client, _ = app_client
    resp = await _post_command(client, "frobnicate", slack.response_url(), "trig-unknown")
    assert resp.status_code == 200
    data = resp.json()
    assert data["response_type"] == "ephemeral"
    assert "Unknown command `frobnicate`" in data["text"]
    assert "/gemma status" in json.dumps(data["blocks"])


async def test_command_help_is_the_ack_and_runs_nothing(app_client, slack) -> None:
    client, deps = app_client
    for text, trig in (("status --help", "trig-help-1"), ("help scale", "trig-help-2")):
        resp = await _post_command(client, text, slack.response_url(), trig)
        assert resp.status_code == 200
        data = resp.json()
        assert data["response_type"] == "ephemeral"
        name = text.replace("help ", "").split()[0]
        assert f"usage: /gemma {name}" in json.dumps(data["blocks"]), data
    await deps.drain()
    assert slack.responses == []  # answered in the ack: no handler ran, nothing went to the response URL


async def test_missing_credentials_error_reaches_user_without_traceback(
    settings: Settings, redis_client, slack
) -> None:
    broken = settings.model_copy(update={"google_cloud_project": None})
    deps = build_deps(broken)
    app = create_app(deps)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test") as client:
        await _post_command(client, "status", slack.response_url(), "trig-nocreds")
        assert await eventually(lambda: slack.responses)
    await deps.drain()
    text = _blocks_text(slack.responses[0])
    assert "GOOGLE_CLOUD_PROJECT" in text
    assert "Traceback" not in text
    await deps.redis.aclose()


async def test_health_ready_and_metrics_endpoints(app_client, slack) -> None:
    client, _ = app_client
    assert (await client.get("/healthz")).json() == {"ok": True}
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["redis"] == "ok"
    await _post_command(client, "nope", slack.response_url(), "trig-m")
    metrics = (await client.get("/metrics")).text
    assert 'gemma_sre_http_requests_total{method="POST",route="/slack/events",status="200"}' in metrics
    assert "gemma_sre_http_request_seconds_bucket" in metrics


async def test_readyz_fails_when_redis_is_unreachable(settings: Settings) -> None:
    deps = build_deps(settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"}))
    app = create_app(deps)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test") as client:
        resp = await client.get("/readyz")
    assert resp.status_code == 503 and resp.json()["ok"] is False


async def test_oversized_bodies_get_413_whether_declared_or_streamed(app_client, slack, cloud_run) -> None:
    client, deps = app_client
    cloud_run.seed_service("vllm-gemma4")
    body = command_body("status " + "x" * (1024 * 1024 + 10), slack.response_url(), trigger_id="trig-big")
    declared = await client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
    assert declared.status_code == 413

    async def chunks():  # no Content-Length: the server must count while it reads
        for i in range(0, len(body), 64 * 1024):
            yield body[i : i + 64 * 1024].encode()

    streamed = await client.post("/slack/events", content=chunks(), headers=signed_headers(SIGNING_SECRET, body))
    assert streamed.status_code == 413
    await deps.drain()
    assert slack.responses == [] and not [r for r in cloud_run.requests if r[1].endswith("/services/vllm-gemma4")]

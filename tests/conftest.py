"""Shared fixtures: real Redis (per-test key prefix, never FLUSHDB), settings, and wire-level stand-ins."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import redis.asyncio as redis

from bot.alert_queue import AlertQueue
from bot.sandbox.cloud_logging_api import CloudLoggingStandIn
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.model_server import ModelServerStandIn
from bot.sandbox.preflight_standins import PreflightStandIns
from bot.sandbox.server import serve
from bot.sandbox.slack_api import SlackStandIn
from bot.settings import Settings, load_settings
from bot.web import create_app
from tests.alerts_fixtures import make_deps

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
SIGNING_SECRET = "test-signing-secret-0123456789"


@pytest.fixture
def key_prefix() -> str:
    return f"gemma-sre-test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def redis_client(key_prefix: str) -> AsyncIterator[redis.Redis]:
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        await client.ping()
    except redis.ConnectionError:
        pytest.fail(f"tests need a Redis server at {REDIS_URL} (.ci/run starts one)")
    yield client
    # Only our own keys: other test processes share this server.
    keys = [k async for k in client.scan_iter(match=f"{key_prefix}:*", count=1000)]
    if keys:
        await client.delete(*keys)
    await client.aclose()


@pytest.fixture
def slack() -> Iterator[SlackStandIn]:
    standin = SlackStandIn()
    with serve(standin.app) as url:
        standin.base_url = url
        yield standin


@pytest.fixture
def cloud_run() -> Iterator[CloudRunStandIn]:
    standin = CloudRunStandIn()
    with serve(standin.app) as url:
        standin.base_url = url  # type: ignore[attr-defined]
        yield standin


@pytest.fixture
def model_server() -> Iterator[ModelServerStandIn]:
    standin = ModelServerStandIn()
    with serve(standin.app) as url:
        standin.base_url = url  # type: ignore[attr-defined]
        yield standin


@pytest.fixture(scope="session")
def quiet_logging() -> Iterator[str]:
    """An empty Cloud Logging stand-in for tests not about logs: code that reads logs (the deploy watch, the
    start-up check) gets none from 127.0.0.1 instead of trying logging.googleapis.com. Nobody writes to it."""
    standin = CloudLoggingStandIn()
    with serve(standin.app()) as url:
        yield url


@pytest.fixture(scope="session")
def preflight_ok() -> Iterator[PreflightStandIns]:
    """The preflight stand-ins (Hub, registry, Cloud Storage, Cloud Quotas) of a healthy project, shared by the
    session: nobody changes them (a test of a failure starts its own)."""
    standins = PreflightStandIns().start()
    for bucket in ("weights", "w", "acme-weights"):  # the buckets the tests' services read their weights from
        standins.stock_bucket(bucket)
    yield standins
    standins.close()


@pytest.fixture
def settings(
    key_prefix: str,
    slack: SlackStandIn,
    cloud_run: CloudRunStandIn,
    model_server: ModelServerStandIn,
    quiet_logging: str,
    preflight_ok: PreflightStandIns,
) -> Settings:
    """Settings pointing every remote at a local stand-in."""
    return load_settings(
        slack_bot_token="xoxb-test-token",
        slack_signing_secret=SIGNING_SECRET,
        slack_api_url=slack.base_url + "/api/",
        redis_url=REDIS_URL,
        key_prefix=key_prefix,
        google_cloud_project="test-proj",
        google_cloud_location="us-central1",
        google_anonymous_credentials=True,
        cloud_run_api_endpoint=cloud_run.base_url,  # type: ignore[attr-defined]
        cloud_logging_api_endpoint=quiet_logging,
        cloud_tpu_api_endpoint="127.0.0.1:9",  # no TPU stand-in here: a call would be refused on this machine
        vllm_service_name="vllm-gemma4",
        vllm_base_url=model_server.base_url,  # type: ignore[attr-defined]
        deployer_user_ids="UDEPLOYER",
        alert_webhook_token="alert-token-123",
        alert_webhook_password="alert-pass-123",
        **preflight_ok.settings_update(),
    )


# The alert tests' shared fixtures: the queue behind the webhooks and Pub/Sub, and the webhooks in front of it.
@pytest.fixture
async def queue(settings: Settings, redis_client: redis.Redis) -> AsyncIterator[AlertQueue]:
    deps = make_deps(settings)
    yield AlertQueue(deps)
    await deps.redis.aclose()


@pytest.fixture
async def hook(settings: Settings, redis_client: redis.Redis) -> AsyncIterator[tuple[httpx.AsyncClient, AlertQueue]]:
    deps = make_deps(settings)
    queue = AlertQueue(deps)
    app = create_app(deps)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test") as client:
        yield client, queue
    await deps.redis.aclose()


@pytest.fixture
def new_york(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A local time zone that is not UTC, so a time shown "UTC" must really be converted to UTC."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()

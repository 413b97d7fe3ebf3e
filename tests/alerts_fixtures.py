"""Fixtures and helpers for the alert webhook / incident thread tests (real Redis, Slack stand-in)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import Response

from bot.alert_queue import AlertQueue
from bot.deps import Deps
from bot.sandbox.server import serve
from bot.sandbox.slack_api import SlackStandIn
from bot.settings import Settings
from bot.slack_app import make_web_client
from bot.wiring import build_deps
from skills.clock import REAL_CLOCK, Clock
from skills.incidents.model import Alert
from tests.eventually import eventually as eventually  # re-exported: alert tests import it from here
from tests.example_data import ALERTS

DATA = ALERTS

TOKEN = "alert-token-123"
PASSWORD = "alert-pass-123"


def payload(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text())


def basic(user: str = "gemma-sre", password: str = PASSWORD) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def bearer(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def tuned(settings: Settings, **overrides: Any) -> Settings:
    """Settings with fast reclaim/retry for tests (no waiting a minute for an idle entry)."""
    base: dict[str, Any] = {
        "alert_reclaim_idle_ms": 300,
        "alert_max_attempts": 3,
        # no debounce or coalescing unless a test asks for it (tests/test_incidents_storm.py does)
        "alert_header_debounce_s": 0,
        "alert_coalesce_interval_s": 0,
        "alert_channel_lease_ms": 1000,
    }
    base.update(overrides)
    return settings.model_copy(update=base)


def make_deps(settings: Settings, clock: Clock = REAL_CLOCK) -> Deps:
    deps = build_deps(settings)
    deps.chat = make_web_client(settings, clock)
    return deps


def gcp_alert(incident_id: str, service: str = "vllm-gemma4", state: str = "open", **extra: Any) -> dict[str, Any]:
    p = payload("gcp-monitoring-open.json")
    p["incident"]["incident_id"] = incident_id
    p["incident"]["state"] = state
    p["incident"]["resource"]["labels"]["service_name"] = service
    if state == "closed":
        p["incident"]["ended_at"] = p["incident"]["started_at"] + 1800
    p["incident"].update(extra)
    return p


def am_alert(
    fingerprint: str,
    service: str = "vllm-gemma4",
    status: str = "firing",
    alertname: str = "VLLMKVCacheNearlyFull",
) -> dict[str, Any]:
    p = payload("alertmanager-firing.json" if status == "firing" else "alertmanager-resolved.json")
    a = p["alerts"][0]
    a["fingerprint"] = fingerprint
    a["labels"]["service"] = service
    a["labels"]["alertname"] = alertname
    return p


class PostsSlack(SlackStandIn):
    """The Slack stand-in, also keeping the messages Slack accepted (with their ts): faulted calls are
    recorded in `calls` too, and a test about duplicates must count only what reached the channel."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.posted: list[dict[str, Any]] = []

    async def _api(self, request: Request) -> Response:
        resp = await super()._api(request)
        if request.path_params["method"] == "chat.postMessage" and resp.status_code == 200:
            answer = json.loads(bytes(resp.body))
            if answer.get("ok"):
                self.posted.append({**await self._payload(request), "ts": answer["ts"]})
        return resp


@pytest.fixture
def slack() -> Any:
    """Overrides conftest's `slack` in the alert tests (settings point at this one)."""
    standin = PostsSlack()
    with serve(standin.app) as url:
        standin.base_url = url
        yield standin


def headers_posted(slack: PostsSlack, channel: str | None = None) -> list[dict[str, Any]]:
    """Top-level messages Slack accepted (incident headers and channel notices), not thread replies."""
    return [p for p in slack.posted if not p.get("thread_ts") and (channel is None or p.get("channel") == channel)]


def thread_replies(slack: PostsSlack, ts: str) -> list[dict[str, Any]]:
    return [p for p in slack.posted if p.get("thread_ts") == ts]


def header_ts(slack: PostsSlack) -> str:
    return str(headers_posted(slack)[0]["ts"])


async def queued(queue: AlertQueue) -> list[Alert]:
    """The alerts waiting in the queue's stream, oldest first."""
    return [Alert.model_validate_json(f["alert"]) for _, f in await queue.deps.redis.xrange(queue.stream)]

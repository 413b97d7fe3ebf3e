"""Nothing answers 500: /slack/events checks the signature on the raw bytes before anything parses them (401),
a signed but malformed payload is a 400, and the alert webhooks bound their time fields. A seeded fuzz run
over all three endpoints finds no 5xx and no exception escaping the app."""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from bot.deps import Deps
from bot.sandbox.fuzz import KNOWN_BAD, alert_cases, slack_cases
from bot.sandbox.slack_api import SlackStandIn
from bot.sandbox.slack_signing import command_body, signed_headers
from bot.settings import Settings
from bot.web import create_app
from tests.alerts_fixtures import PASSWORD, TOKEN, basic, make_deps, payload
from tests.conftest import SIGNING_SECRET


@pytest.fixture
async def app(settings: Settings, redis_client: object) -> AsyncIterator[tuple[httpx.AsyncClient, Deps]]:
    deps = make_deps(settings)
    # raise_app_exceptions (the default): an exception escaping the app ("Exception in ASGI application"
    # under uvicorn) fails the test instead of turning into a 500.
    transport = httpx.ASGITransport(app=create_app(deps))
    async with httpx.AsyncClient(transport=transport, base_url="http://bot.test") as client:
        yield client, deps
    await deps.drain()
    await deps.redis.aclose()


def _signed(body: bytes, content_type: str = "application/x-www-form-urlencoded", ts: str | None = None) -> dict:
    h = signed_headers(SIGNING_SECRET, body.decode("latin-1"), ts=int(ts) if ts else None)
    # signed_headers signs text; sign the exact bytes so invalid UTF-8 is signed too.
    import hashlib
    import hmac

    stamp = h["X-Slack-Request-Timestamp"]
    mac = hmac.new(SIGNING_SECRET.encode(), b"v0:" + stamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    return h | {"X-Slack-Signature": "v0=" + mac, "Content-Type": content_type}


@pytest.mark.parametrize("body", [b"\xff\xfe", b"{not json", b"payload=%7Bbroken", b"[1,2,3]", b'{"team": 5}'])
@pytest.mark.parametrize("ctype", ["application/json", "application/x-www-form-urlencoded"])
async def test_unsigned_garbage_is_401_before_parsing(app, body: bytes, ctype: str) -> None:
    client, _ = app
    resp = await client.post("/slack/events", content=body, headers={"Content-Type": ctype})
    assert resp.status_code == 401
    forged = {"Content-Type": ctype, "X-Slack-Request-Timestamp": str(int(time.time())), "X-Slack-Signature": "v0=0"}
    assert (await client.post("/slack/events", content=body, headers=forged)).status_code == 401


@pytest.mark.parametrize("ts", ["abc", "", "1e9", "-5", "１２３".encode(), "99999999999999999999", " 1700000000"])
async def test_non_numeric_or_odd_timestamp_is_401(app, ts: str | bytes) -> None:
    client, _ = app
    body = command_body("status", "http://127.0.0.1:9/r").encode()
    headers = _signed(body) | {"X-Slack-Request-Timestamp": ts}
    assert (await client.post("/slack/events", content=body, headers=headers)).status_code == 401


@pytest.mark.parametrize(
    ("body", "ctype", "why"),
    [
        (b"\xff\xfe", "application/json", "not UTF-8"),
        (b"{not json", "application/json", "neither a JSON object"),
        (b"payload=%7Bbroken", "application/x-www-form-urlencoded", "neither a JSON object"),
        (b"[1,2,3]", "application/json", "expected a JSON object, got list"),
        (b'{"team": 5}', "application/json", "field 'team'"),
        (b'{"type": "event_callback", "event": "x"}', "application/json", "field 'event'"),
        (b'payload={"type":"block_actions","actions":"x"}', "application/x-www-form-urlencoded", "'actions'"),
        (
            b'{"type": "event_callback", "event": {"type": "message", "text": "a\\ud800"}}',
            "application/json",
            "surrogate",
        ),
    ],
)
async def test_signed_but_malformed_is_400_naming_the_problem(app, slack: SlackStandIn, body, ctype, why) -> None:
    client, deps = app
    resp = await client.post("/slack/events", content=body, headers=_signed(body, ctype))
    assert resp.status_code == 400, resp.text
    assert why in resp.text
    await deps.drain()
    assert slack.responses == [] and slack.calls == []


async def test_signed_well_formed_command_still_works(app, slack: SlackStandIn) -> None:
    client, _ = app
    body = command_body("help", slack.response_url()).encode()
    resp = await client.post("/slack/events", content=body, headers=_signed(body))
    assert resp.status_code == 200 and "what I can do" in resp.text


async def test_url_verification_challenge_still_answered(app) -> None:
    client, _ = app
    body = json.dumps({"type": "url_verification", "challenge": "abc123", "token": "t"}).encode()
    resp = await client.post("/slack/events", content=body, headers=_signed(body, "application/json"))
    assert resp.status_code == 200 and "abc123" in resp.text


def _gcp(started_at: object) -> dict:
    p = payload("gcp-monitoring-open.json")
    p["incident"]["started_at"] = started_at
    return p


@pytest.mark.parametrize("value", [10**20, -(10**20), -1, 2**63, 5_000_000_000])
async def test_gcp_out_of_range_times_are_400_naming_the_field(app, value: int) -> None:
    client, _ = app
    resp = await client.post("/alerts/gcp", json=_gcp(value), headers=basic())
    assert resp.status_code == 400
    assert "incident.started_at" in resp.json()["error"]


async def test_gcp_started_at_in_milliseconds_is_read_as_milliseconds(app) -> None:
    client, deps = app
    seconds = payload("gcp-monitoring-open.json")["incident"]["started_at"]
    resp = await client.post("/alerts/gcp", json=_gcp(seconds * 1000 + 123), headers=basic())
    assert resp.status_code == 202, resp.text
    entries = await deps.redis.xrange(deps.settings.key("alerts", "stream"))  # the queue's stream
    alert = json.loads(entries[0][1]["alert"])
    assert alert["started_at"].startswith(time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))


async def test_seeded_fuzz_of_all_endpoints_finds_no_5xx(app, slack: SlackStandIn, caplog) -> None:
    caplog.set_level(logging.WARNING)
    client, deps = app
    rng = random.Random(20)
    statuses: dict[int, int] = {}

    async def send(path: str, body: bytes, headers: dict[str, str]) -> None:
        resp = await client.post(path, content=body, headers=headers)  # raises if the app raised
        statuses[resp.status_code] = statuses.get(resp.status_code, 0) + 1
        assert resp.status_code < 500, (path, body[:200], headers, resp.text[:200])

    for body in KNOWN_BAD:
        await send("/slack/events", body, _signed(body, "application/json"))
        await send("/slack/events", body, _signed(body))
    for body, headers in slack_cases(rng, SIGNING_SECRET, 400, slack.response_url()):
        await send("/slack/events", body, headers)
    gcp, am = payload("gcp-monitoring-open.json"), payload("alertmanager-firing.json")
    for path, body, headers in alert_cases(rng, 300, gcp, am, ("gemma-sre", PASSWORD, TOKEN)):
        await send(path, body, headers)
    await deps.drain(timeout_s=30)
    assert statuses.get(401, 0) > 50 and statuses.get(400, 0) > 50, statuses
    # Nothing failed inside: no error logged, no traceback (Bolt logs one when a payload breaks a middleware).
    bad = [r.getMessage()[:200] for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert bad == []

"""Issue 45, item 2: a secret inside any text field of an alert -- a Cloud Monitoring incident, an Alertmanager v4
webhook, either one as a Pub/Sub message -- reaches nothing: not Slack (every call to the stand-in, every
response-URL answer, every uploaded file), not `/gemma incidents`, `/gemma handoff` or `/gemma postmortem`, not
Redis, not the log. Alerts are redacted when they are parsed (handlers/alerts/decode.py `redact_alert`), and their
identity (the fingerprint, the condition and service they group by) stays that of the raw alert: two alerts that
differ only by their secret stay two, and a retry of one stays a duplicate.

All real: the ASGI app with its lifespan (queue workers, publisher, Pub/Sub puller), signed requests, Redis.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import redis.asyncio as redis
from starlette.applications import Starlette

from bot.deps import Deps
from bot.sandbox.pubsub_grpc import PubSubStandIn, serve_pubsub
from bot.sandbox.slack_api import SlackStandIn
from bot.sandbox.slack_signing import command_body, signed_headers
from bot.settings import Settings
from bot.web import create_app
from skills.incidents.lifecycle_store import IncidentLifecycle
from skills.incidents.store import IncidentStore
from tests.alerts_fixtures import basic, bearer, gcp_alert, make_deps, payload, tuned
from tests.conftest import SIGNING_SECRET
from tests.eventually import eventually

SUB = "projects/test-proj/subscriptions/gemma-alerts"

# Shapes skills/logs/redact.py masks: a Slack bot token, a Google API key, a bearer token, a GitHub token, a GCS
# signed URL's signature. Their bodies are unlike anything else in the app, so any 12 characters of one found
# anywhere is a leak (a clipped or partly masked secret included).
SLACK = "xoxb-2718281828-3141592653589-Zq8WkR3vTn6YpL2mHd9sXc4B"
GKEY = "AIzaSyQ7vR2kLm9XpT4wBn6cHd8fJs3gKq1zYxE"
BEARER = "eHq3Rk9vTz2LmW8pYd5sNc7xBf4GjK6a"
GITHUB = "ghp_Vb7Nq2Lx9Tr4Kw6Zm1Pc8Hd3Js5Fg0Ya2QeR"
SIG = "9f3a7c1e5b2d8046af13c9e7b5d2f0a8c6e4b1d3"
SECRETS = (SLACK, GKEY, BEARER, GITHUB, SIG)


def fragments() -> set[str]:
    return {s[i : i + 12] for s in SECRETS for i in range(len(s) - 11)}


def laden(value: str) -> str:
    """`value` with secrets in it: a URL gets a signed parameter and a token parameter, anything else tokens."""
    if value.startswith("http"):
        sep = "&" if "?" in value else "?"
        return f"{value}{sep}X-Goog-Signature={SIG}&access={SLACK}"
    return f"{value} {SLACK} {GKEY} Bearer {BEARER}"


def salt(doc: Any, keep: frozenset[str]) -> Any:
    """Every string in `doc` (but the enums and times named in `keep`) with secrets in it, and one more key with
    a secret in its name beside the others in every map of strings (labels, annotations)."""
    if isinstance(doc, list):
        return [salt(v, keep) for v in doc]
    if not isinstance(doc, dict):
        return doc
    out = {k: v if k in keep else laden(v) if isinstance(v, str) else salt(v, keep) for k, v in doc.items()}
    if doc and all(isinstance(v, str) for v in doc.values()):
        out[f"note_{GITHUB}"] = f"token {GITHUB}"
    return out


GCP_KEEP = frozenset({"version", "state"})
AM_KEEP = frozenset({"version", "status", "startsAt", "endsAt"})


def gcp_laden(incident_id: str) -> dict[str, Any]:
    p = gcp_alert(incident_id)
    p["incident"]["metric"]["labels"] = {"revision_name": "vllm-gemma4-00007-abc"}
    return salt(p, GCP_KEEP)


def gcp_laden_other(incident_id: str) -> dict[str, Any]:
    """The other ways a Cloud Monitoring incident names things: no policy name (the condition names it), the
    service from the policy's user labels, the revision from the metric's labels, the documentation as summary."""
    p = gcp_alert(incident_id)
    inc = p["incident"]
    inc["policy_name"] = ""
    inc["summary"] = ""
    del inc["resource"]["labels"]["service_name"], inc["resource"]["labels"]["revision_name"]
    inc["policy_user_labels"]["service"] = "vllm-other"
    inc["metric"]["labels"] = {"revision_name": "vllm-other-00002-xyz"}
    return salt(p, GCP_KEEP)


def am_laden(fingerprints: tuple[str, ...], external: bool = True) -> dict[str, Any]:
    """An Alertmanager group, one alert per fingerprint; without the external URL the generator URL is the link."""
    p = payload("alertmanager-firing.json")
    first = p["alerts"][0]
    p["alerts"] = []
    for i, fp in enumerate(fingerprints):
        a = copy.deepcopy(first)
        a["fingerprint"] = fp
        a["labels"]["alertname"] = f"VLLMKVCacheNearlyFull{i}"
        a["labels"]["job"] = "vllm-job"
        if i % 2:
            del a["labels"]["service"]  # the service from `job`
        p["alerts"].append(a)
    if not external:
        p["externalURL"] = ""
    return salt(p, AM_KEEP)


@pytest.fixture
def pubsub(monkeypatch: pytest.MonkeyPatch) -> Iterator[PubSubStandIn]:
    standin = PubSubStandIn(pull_wait_s=0.2)
    standin.create_subscription(SUB, ack_deadline_s=10)
    with serve_pubsub(standin) as host:
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", host)
        yield standin


class App:
    def __init__(self, deps: Deps, app: Starlette, client: httpx.AsyncClient) -> None:
        self.deps, self.app, self.client = deps, app, client

    async def drained(self) -> bool:
        queue = self.app.state.alert_queue

        async def empty() -> bool:
            b = await queue.backlog()
            return not (b["queued"] or b["pending"] or (queue.publisher and await queue.publisher.pending()))

        await self.deps.drain()
        return bool(await eventually(empty, timeout=30))

    async def slash(self, slack: SlackStandIn, text: str, channel: str, rid: str) -> None:
        body = command_body(text, slack.response_url(rid), trigger_id=f"trig-{rid}", user_id="UDEPLOYER",
                            channel_id=channel)  # fmt: skip
        r = await self.client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
        assert r.status_code == 200, r.text
        await self.deps.drain()


@pytest.fixture
async def bot(settings: Settings, redis_client: redis.Redis, pubsub: PubSubStandIn) -> AsyncIterator[App]:
    deps = make_deps(tuned(settings, alert_pubsub_subscription="gemma-alerts"))
    app = create_app(deps)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test") as client,
    ):
        yield App(deps, app, client)


async def _redis_dump(r: redis.Redis, prefix: str) -> str:
    """Every key under the test's prefix, and everything stored in it, as one text."""
    out: list[str] = []
    async for key in r.scan_iter(match=f"{prefix}:*", count=1000):
        out.append(str(key))
        kind = await r.type(key)
        if kind == "string":
            out.append(str(await r.get(key)))
        elif kind == "hash":
            out.append(json.dumps(await r.hgetall(key)))
        elif kind == "list":
            out.append(json.dumps(await r.lrange(key, 0, -1)))
        elif kind == "set":
            out.append(json.dumps(sorted(await r.smembers(key))))
        elif kind == "zset":
            out.append(json.dumps(await r.zrange(key, 0, -1)))
        elif kind == "stream":
            out.append(json.dumps(await r.xrange(key)))
    return "\n".join(out)


def _slack_dump(slack: SlackStandIn) -> str:
    """Everything the bot sent Slack: every Web API call, every response-URL answer, every uploaded file."""
    calls = json.dumps([[c.method, c.payload] for c in list(slack.calls)], ensure_ascii=False)
    answers = json.dumps(slack.responses, ensure_ascii=False)
    files = "\n".join(b.decode("utf-8", "replace") for b in slack.uploads.values())
    shared = json.dumps([{k: v for k, v in s.items() if k != "content"} for s in slack.shared], ensure_ascii=False)
    return "\n".join([calls, answers, files, shared])


def _leaks(text: str) -> list[str]:
    return sorted(f for f in fragments() if f in text)


async def test_a_secret_in_every_alert_field_reaches_no_slack_message_list_file_record_or_log(
    bot: App, slack: SlackStandIn, pubsub: PubSubStandIn, redis_client: redis.Redis, key_prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.INFO)
    # Both webhook formats, signed in as each sender does, and both again as Pub/Sub messages (with attributes).
    r = await bot.client.post("/alerts/gcp", json=gcp_laden(f"0.hook-{SLACK}"), headers=basic())
    assert r.status_code == 202 and r.json()["new"] == 1, r.text
    r = await bot.client.post("/alerts/alertmanager", json=am_laden((f"fp1-{SLACK}", f"fp2-{GKEY}")), headers=bearer())
    assert r.status_code == 202 and r.json()["new"] == 2, r.text
    attrs = {"origin": f"relay {SLACK}", f"k_{GITHUB}": "v"}
    sent = [
        pubsub.publish(SUB, json.dumps(gcp_laden_other(f"0.ps-{GKEY}")).encode(), attrs),
        pubsub.publish(SUB, json.dumps(am_laden((f"fp3-{GITHUB}",), external=False)).encode(), attrs),
    ]
    assert await eventually(lambda: set(sent) <= set(pubsub.acked), timeout=30)
    assert await bot.drained()

    listed = await IncidentLifecycle(IncidentStore(bot.deps.redis, key_prefix)).listed()
    assert len(listed) >= 3, [i.incident.id for i in listed]  # the alerts did open incidents (nothing vacuous)
    headers = [c for c in slack.of("chat.postMessage") if not c.get("thread_ts") and "incident" in json.dumps(c)]
    assert len(headers) >= 3
    shown = json.dumps(headers)
    assert "[REDACTED:slack_token]" in shown and "vLLM p95 latency high" in shown  # masked, the rest still reads
    channel = str(headers[0]["channel"])

    await bot.slash(slack, "incidents", channel, "incidents")
    await bot.slash(slack, "handoff --since 2h", channel, "handoff")
    for i, item in enumerate(listed):
        await bot.slash(slack, f"postmortem {item.incident.id}", channel, f"pm{i}")
    assert await bot.drained()
    answered = {r["_rid"] for r in slack.responses}
    assert {"incidents", "handoff"} <= answered, answered
    assert [i.incident.id for i in listed if i.incident.id not in json.dumps(slack.responses)] == []
    assert len(slack.uploads) >= len(listed), "a postmortem file was not uploaded"

    assert _leaks(_slack_dump(slack)) == [], "a secret reached Slack"
    assert _leaks(await _redis_dump(redis_client, key_prefix)) == [], "a secret was stored in Redis"
    logged = "\n".join(
        f"{r.getMessage()} {r.exc_text or ''} {json.dumps(getattr(r, 'extra', None), default=str)}"
        for r in caplog.records
    )
    assert _leaks(logged) == [], "a secret was logged"


async def test_alerts_that_differ_only_by_their_secret_stay_two_and_a_retry_stays_one(
    bot: App, slack: SlackStandIn
) -> None:
    other = "xoxb-1618033988-7493421987113-Wq2ErT5yUi8OpA3sDf6GhJ9k"

    def alert(secret: str) -> dict[str, Any]:
        return gcp_alert(f"0.twin-{secret}", service="vllm-twin", policy_name=f"latency high {secret}")

    for body in (alert(SLACK), alert(other)):
        r = await bot.client.post("/alerts/gcp", json=body, headers=basic())
        assert r.status_code == 202 and r.json()["new"] == 1, r.text
    r = await bot.client.post("/alerts/gcp", json=alert(SLACK), headers=basic())  # the sender's retry
    assert r.json()["duplicates"] == 1, r.text
    assert await bot.drained()
    headers = [c for c in slack.of("chat.postMessage") if not c.get("thread_ts") and "latency high" in json.dumps(c)]
    assert len(headers) == 2, "two conditions that differ only by their secret were grouped into one incident"
    assert _leaks(_slack_dump(slack)) == []

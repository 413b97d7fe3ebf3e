"""The alert webhooks through the real ASGI app and real Redis: auth, limits, validation, dedup, 503."""

from __future__ import annotations

import json

import httpx
import pytest

from bot.alert_queue import AlertQueue
from bot.deps import Deps
from bot.settings import Settings
from bot.web import create_app
from skills.incidents.model import Alert
from tests.alerts_fixtures import TOKEN, am_alert, basic, bearer, gcp_alert, make_deps, payload


async def queued(queue: AlertQueue) -> list[Alert]:
    entries = await queue.deps.redis.xrange(queue.stream)
    return [Alert.model_validate_json(f["alert"]) for _, f in entries]


async def test_gcp_open_with_basic_auth_is_queued_once(hook) -> None:
    client, queue = hook
    resp = await client.post("/alerts/gcp", json=payload("gcp-monitoring-open.json"), headers=basic())
    assert resp.status_code == 202, resp.text
    assert resp.json()["new"] == 1
    [alert] = await queued(queue)
    assert alert.source == "gcp" and alert.fingerprint == "0.nq7ol5mhb4x1"
    assert alert.service == "vllm-gemma4" and alert.state == "firing" and alert.severity == "critical"
    assert alert.name == "vLLM p95 latency high" and alert.revision == "vllm-gemma4-00006-78w"
    assert alert.url.startswith("https://console.cloud.google.com/monitoring/alerting/incidents/")


async def test_gcp_token_in_query_and_closed_state(hook) -> None:
    client, queue = hook
    resp = await client.post(f"/alerts/gcp?auth_token={TOKEN}", json=payload("gcp-monitoring-closed.json"))
    assert resp.status_code == 202, resp.text
    [alert] = await queued(queue)
    assert alert.state == "resolved" and alert.ended_at is not None


async def test_replayed_payload_is_a_duplicate_not_a_second_entry(hook) -> None:
    client, queue = hook
    for _ in range(3):
        resp = await client.post("/alerts/gcp", json=payload("gcp-monitoring-open.json"), headers=basic())
        assert resp.status_code == 202
    assert resp.json() == {"status": "accepted", "alerts": 1, "new": 0, "duplicates": 1}
    assert len(await queued(queue)) == 1
    # the closing notification of the same incident is news
    resp = await client.post("/alerts/gcp", json=payload("gcp-monitoring-closed.json"), headers=basic())
    assert resp.json()["new"] == 1
    assert [a.state for a in await queued(queue)] == ["firing", "resolved"]


async def test_alertmanager_bearer_groups_each_alert_fingerprinted(hook) -> None:
    client, queue = hook
    body = am_alert("fp-1")
    second = json.loads(json.dumps(body["alerts"][0]))
    second["fingerprint"] = "fp-2"
    body["alerts"].append(second)
    resp = await client.post("/alerts/alertmanager", json=body, headers=bearer())
    assert resp.status_code == 202, resp.text
    assert resp.json()["new"] == 2
    alerts = await queued(queue)
    assert {a.fingerprint for a in alerts} == {"fp-1", "fp-2"}
    assert alerts[0].ended_at is None  # "0001-01-01" while firing is not an end time
    # resolved example parses, and Basic works for Alertmanager too
    resp = await client.post("/alerts/alertmanager", json=payload("alertmanager-resolved.json"), headers=basic())
    assert resp.status_code == 202


@pytest.mark.parametrize(
    "path,headers",
    [
        ("/alerts/gcp", {}),
        ("/alerts/gcp?auth_token=wrong", {}),
        ("/alerts/gcp", basic(password="wrong")),
        ("/alerts/gcp", basic(user="mallory")),
        ("/alerts/gcp", {"Authorization": "Basic !!notbase64"}),
        ("/alerts/gcp", bearer()),  # GCP does not send bearer tokens: not accepted there
        ("/alerts/alertmanager", bearer("alert-token-12")),
        ("/alerts/alertmanager", {}),
        (f"/alerts/alertmanager?auth_token={TOKEN}", {}),  # query tokens are for GCP only
    ],
)
async def test_forged_or_missing_auth_is_401_and_queues_nothing(hook, path: str, headers: dict[str, str]) -> None:
    client, queue = hook
    body = payload("gcp-monitoring-open.json") if "gcp" in path else am_alert("fp-x")
    resp = await client.post(path, json=body, headers=headers)
    assert resp.status_code == 401
    assert "error" in resp.json()
    assert await queued(queue) == []


async def test_no_credentials_configured_refuses_everything(settings: Settings, redis_client) -> None:
    deps = make_deps(settings.model_copy(update={"alert_webhook_password": None, "alert_webhook_token": None}))

    app = create_app(deps)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test") as client:
        resp = await client.post("/alerts/gcp", json=payload("gcp-monitoring-open.json"), headers=basic(password=""))
    await deps.redis.aclose()
    assert resp.status_code == 401 and "not configured" in resp.json()["error"]


@pytest.mark.parametrize(
    "body,expect",
    [
        (b"{not json", "malformed JSON"),
        (b"", "empty body"),
        (b'{"version": "1.2"}', "incident: Field required"),
        (b'{"version": "1.2", "incident": {"state": "open"}}', "incident.incident_id: Field required"),
        (b'{"version": "1.2", "incident": {"incident_id": "x", "state": "pending"}}', "incident.state"),
        (
            b'{"version": "9", "incident": {"incident_id": "x", "state": "open"}}',
            "unsupported schema version",
        ),
        (b"[]", "body: Input should be an object"),
    ],
)
async def test_gcp_bad_payload_is_400_naming_the_problem(hook, body: bytes, expect: str) -> None:
    client, queue = hook
    resp = await client.post("/alerts/gcp", content=body, headers=basic() | {"Content-Type": "application/json"})
    assert resp.status_code == 400
    assert expect in resp.json()["error"]
    assert await queued(queue) == []


async def test_alertmanager_missing_fingerprint_and_wrong_version_are_400(hook) -> None:
    client, queue = hook
    body = am_alert("fp")
    del body["alerts"][0]["fingerprint"]
    resp = await client.post("/alerts/alertmanager", json=body, headers=bearer())
    assert resp.status_code == 400 and "alerts.0.fingerprint: Field required" in resp.json()["error"]
    body = am_alert("fp")
    body["version"] = "3"
    resp = await client.post("/alerts/alertmanager", json=body, headers=bearer())
    assert resp.status_code == 400 and "unsupported webhook version" in resp.json()["error"]
    assert await queued(queue) == []


async def test_gcp_lenient_fields_test_notification_and_string_documentation(hook) -> None:
    client, queue = hook
    test_notice = {
        "version": "test",
        "incident": {
            "incident_id": "12345",
            "state": "OPEN",
            "started_at": 0,
            "ended_at": 0,
            "summary": "Test",
            "policy_name": "acme Test Policy",
            "url": "http://www.example.com",
            "documentation": "plain text docs",
            "some_future_field": {"x": 1},
        },
        "another_unknown": True,
    }
    resp = await client.post("/alerts/gcp", json=test_notice, headers=basic())
    assert resp.status_code == 202, resp.text
    assert "not a service this bot manages" in resp.json()["note"]
    [alert] = await queued(queue)
    assert alert.test and alert.state == "firing" and alert.started_at is None and alert.service == ""


async def test_unknown_service_is_accepted_with_a_note(hook) -> None:
    client, queue = hook
    resp = await client.post("/alerts/gcp", json=gcp_alert("inc-other", service="billing-api"), headers=basic())
    assert resp.status_code == 202
    assert "billing-api" in resp.json()["note"]
    assert (await queued(queue))[0].service == "billing-api"


async def test_oversized_body_is_413_by_content_length_and_by_counting(settings: Settings, redis_client) -> None:
    deps = make_deps(settings.model_copy(update={"alert_max_body_bytes": 4096}))
    queue = AlertQueue(deps)
    app = create_app(deps)
    big = payload("gcp-monitoring-open.json")
    big["incident"]["summary"] = "x" * 10_000
    raw = json.dumps(big).encode()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test") as client:
        resp = await client.post("/alerts/gcp", content=raw, headers=basic())
        assert resp.status_code == 413 and "4096" in resp.json()["error"]

        sent = []

        async def chunks():  # no Content-Length: the body is counted as it streams
            for i in range(0, len(raw), 1000):
                sent.append(i)
                yield raw[i : i + 1000]

        resp = await client.post("/alerts/gcp", content=chunks(), headers=basic())
        assert resp.status_code == 413
        # unauthenticated big bodies are refused before the body matters
        resp = await client.post("/alerts/gcp", content=raw)
        assert resp.status_code == 401
    assert await deps.redis.xlen(queue.stream) == 0
    await deps.redis.aclose()


async def test_redis_down_answers_503_so_the_sender_retries(settings: Settings, redis_client) -> None:
    deps: Deps = make_deps(settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"}))

    app = create_app(deps)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test") as client:
        resp = await client.post("/alerts/gcp", json=payload("gcp-monitoring-open.json"), headers=basic())
        assert resp.status_code == 503
        assert resp.headers["retry-after"] == "5"
        resp = await client.post("/alerts/alertmanager", json=am_alert("fp"), headers=bearer())
        assert resp.status_code == 503
    await deps.redis.aclose()


async def test_ten_thousand_identical_alerts_enqueue_one_entry(hook) -> None:
    client, queue = hook
    body = am_alert("storm-1")
    body["alerts"] = body["alerts"] * 250  # Alertmanager groups: 250 identical alerts per delivery
    raw = json.dumps(body).encode()
    new = dup = 0
    for _ in range(40):
        resp = await client.post("/alerts/alertmanager", content=raw, headers=bearer())
        assert resp.status_code == 202
        new += resp.json()["new"]
        dup += resp.json()["duplicates"]
    assert (new, dup) == (1, 9_999)
    assert await queue.deps.redis.xlen(queue.stream) == 1


async def test_a_vllm_series_incident_names_its_service_and_revision(hook) -> None:
    """A policy on vLLM's Prometheus series (setup-alerts' kv-cache-usage): the resource is the sidecar's
    prometheus_target, whose `namespace` is the Cloud Run service, and the revision is a metric label."""
    client, queue = hook
    body = {
        "version": "1.2",
        "incident": {
            "incident_id": "inc-kv-1",
            "state": "OPEN",
            "started_at": 1_700_000_000,
            "policy_name": "gemma-sre: vllm-gemma4: vLLM's KV cache is over 85% full",
            "condition_name": "vllm:kv_cache_usage_perc > 0.85",
            "resource": {
                "type": "prometheus_target",
                "labels": {"cluster": "__run__", "namespace": "vllm-gemma4", "job": "run-gmp-sidecar"},
            },
            "metric": {
                "type": "prometheus.googleapis.com/vllm:kv_cache_usage_perc/gauge",
                "labels": {"revision_name": "vllm-gemma4-00007-abc"},
            },
            "policy_user_labels": {"managed-by": "gemma-sre", "gemma-sre-policy": "kv-cache-usage"},
        },
    }
    resp = await client.post("/alerts/gcp", json=body, headers=basic())
    assert resp.status_code == 202, resp.text
    [alert] = await queued(queue)
    assert alert.service == "vllm-gemma4" and alert.revision == "vllm-gemma4-00007-abc"
    assert alert.condition.endswith("@ vllm-gemma4-00007-abc")

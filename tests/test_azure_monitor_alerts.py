"""Azure Monitor's common alert schema at `POST /alerts/azure` through the real ASGI app and real Redis: Microsoft's own
sample payloads (tests/data/azure_monitor/README.md names each), the same samples adapted to a Container Apps app,
Fired then Resolved of one alert instance, bodies that are not the schema (a clear 400, nothing queued), and the
webhook's authentication (as /alerts/gcp: Basic, or the `auth_token` query parameter)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.alerts_fixtures import TOKEN, basic, bearer, queued

DATA = Path(__file__).parent / "data" / "azure_monitor"
APP = "vllm-gemma4-aca"


def sample(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DATA / name).read_text())
    return doc


async def post(client: Any, body: Any, **kw: Any) -> Any:
    return await client.post(f"/alerts/azure?auth_token={TOKEN}", json=body, **kw)


# (file, state, service, severity, fired, ended) as Microsoft's samples say them
FIELD = [
    (
        "common_schema_sample_metric_resolved.json",
        "resolved",
        "wcus-r2-gen2",
        "info",  # Sev3
        datetime(2019, 3, 22, 13, 58, 24, 371321, tzinfo=UTC),
        datetime(2019, 3, 22, 14, 3, 16, 224631, tzinfo=UTC),
    ),
    ("test_action_metric_static_fired.json", "firing", "test-storageAccount", "info", None, None),
    ("test_action_log_alert_v2.json", "firing", "test-computer", "info", None, None),
    ("test_action_activity_log.json", "firing", "test-VM", "info", None, None),
]


@pytest.mark.parametrize(("name", "state", "service", "severity", "fired", "ended"), FIELD)
async def test_microsofts_sample_payloads_are_queued_as_one_alert_each(
    hook: Any, name: str, state: str, service: str, severity: str, fired: datetime | None, ended: datetime | None
) -> None:
    client, queue = hook
    body = sample(name)
    resp = await post(client, body)
    assert resp.status_code == 202, resp.text
    assert resp.json()["new"] == 1
    [alert] = await queued(queue)
    e = body["data"]["essentials"]
    assert alert.source == "azure" and alert.fingerprint == e["alertId"]
    assert alert.state == state and alert.service == service and alert.severity == severity
    assert alert.name == e["alertRule"]
    assert alert.started_at == (fired or datetime.fromisoformat(e["firedDateTime"].replace("Z", "+00:00")))
    assert alert.ended_at == ended
    assert alert.labels["monitoringService"] == e["monitoringService"]
    # none of these is a service this bot manages: accepted, with the note the other webhooks give
    assert "not a service this bot manages" in resp.json()["note"]


async def test_a_metric_alert_says_what_crossed_which_threshold() -> None:
    from handlers.alerts import azure_monitor

    [alert] = azure_monitor.to_alerts(azure_monitor.Notification.model_validate(sample("aca_metric_alert_fired.json")))
    assert alert.summary.splitlines()[-1] == "Total RestartCount = 5 (GreaterThan 3)"
    assert alert.labels["conditionType"] == "SingleResourceMultipleMetricCriteria"
    assert alert.labels["customKey1"] == "value1"  # customProperties are kept as labels


async def test_an_aca_alert_names_the_app_and_revision_and_its_resolve_is_the_same_instance(hook: Any) -> None:
    client, queue = hook
    fired, resolved = sample("aca_metric_alert_fired.json"), sample("aca_metric_alert_resolved.json")
    assert (await post(client, fired)).status_code == 202
    assert (await post(client, fired)).json()["duplicates"] == 1  # a re-send of one notification is not news
    assert (await post(client, resolved)).json()["new"] == 1  # its Resolved is
    first, second = await queued(queue)
    assert first.service == second.service == APP  # from the lower-cased Microsoft.App/containerApps ARM id
    assert first.revision == "vllm-gemma4-aca--t4bf16"  # the revisionName dimension
    assert first.condition == second.condition == "aca-replica-restarts on vllm-gemma4-aca @ vllm-gemma4-aca--t4bf16"
    assert first.fingerprint == second.fingerprint  # one alert instance: the resolve closes the same incident
    assert (first.state, second.state) == ("firing", "resolved")
    assert first.ended_at is None and second.ended_at == datetime(2025, 4, 15, 18, 27, 12, 851000, tzinfo=UTC)


async def test_a_log_search_alert_on_the_workspace_finds_the_app_in_its_dimensions(hook: Any) -> None:
    client, queue = hook
    resp = await post(client, sample("aca_log_alert_v2_fired.json"))
    assert resp.status_code == 202, resp.text
    [alert] = await queued(queue)
    assert alert.service == APP and alert.revision == "vllm-gemma4-aca--probe30"
    assert alert.severity == "info" and alert.labels["dimension.containerappname_s"] == APP
    assert "ContainerAppSystemLogs_CL" in alert.summary


async def test_an_activity_log_alert_on_a_refused_write_carries_arms_error(hook: Any) -> None:
    client, queue = hook
    resp = await post(client, sample("aca_activity_log_quota_failed.json"))
    assert resp.status_code == 202, resp.text
    [alert] = await queued(queue)
    assert alert.service == APP and alert.severity == "error"  # Sev1
    assert alert.labels["armError"].startswith("QuotaExceeded: Operation could not be completed as it results in")
    assert "Current Limit: 0" in alert.labels["armError"]
    assert "Microsoft.App/containerApps/write: Failed (BadRequest)" in alert.summary
    assert alert.condition == "aca-write-failed on vllm-gemma4-aca"


async def test_secrets_in_an_alert_are_masked_before_it_is_queued(hook: Any) -> None:
    client, queue = hook
    body = sample("test_action_metric_static_fired.json")
    body["data"]["essentials"]["description"] = "token hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 leaked"
    assert (await post(client, body)).status_code == 202
    [alert] = await queued(queue)
    assert "hf_AbCdEf" not in alert.model_dump_json() and "[REDACTED" in alert.summary


def _without(path: list[str]) -> dict[str, Any]:
    body = copy.deepcopy(sample("aca_metric_alert_fired.json"))
    node = body
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return body


def _with(path: list[str], value: Any) -> dict[str, Any]:
    body = copy.deepcopy(sample("aca_metric_alert_fired.json"))
    node = body
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return body


@pytest.mark.parametrize(
    ("body", "expect"),
    [
        (b"{not json", "malformed JSON"),
        (b"", "empty body"),
        (b"[]", "body: Input should be an object"),
        (json.dumps({"schemaId": "azureMonitorCommonAlertSchema"}).encode(), "data: Field required"),
        (json.dumps(_with(["schemaId"], "Microsoft.Insights/activityLogs")).encode(), "unsupported schemaId"),
        (json.dumps(_without(["data", "essentials"])).encode(), "data.essentials: Field required"),
        (json.dumps(_without(["data", "essentials", "alertId"])).encode(), "data.essentials.alertId: Field required"),
        (json.dumps(_with(["data", "essentials", "alertId"], "")).encode(), "data.essentials.alertId"),
        (json.dumps(_with(["data", "essentials", "monitorCondition"], "Pending")).encode(), "monitorCondition"),
        (json.dumps(_with(["data", "essentials", "firedDateTime"], "yesterday")).encode(), "firedDateTime"),
        (json.dumps(_with(["data", "alertContext"], ["not", "an", "object"])).encode(), "data.alertContext"),
    ],
)
async def test_a_body_that_is_not_the_common_schema_is_400_naming_the_problem(
    hook: Any, body: bytes, expect: str
) -> None:
    client, queue = hook
    resp = await client.post(
        f"/alerts/azure?auth_token={TOKEN}", content=body, headers={"Content-Type": "application/json"}
    )
    assert resp.status_code == 400, resp.text
    assert expect in resp.json()["error"]
    assert await queued(queue) == []


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/alerts/azure", {}),
        ("/alerts/azure?auth_token=alert-token-12", {}),
        ("/alerts/azure", basic(password="wrong")),
        ("/alerts/azure", bearer()),  # as for Cloud Monitoring: the token rides in the URL, not a bearer header
    ],
)
async def test_missing_or_wrong_credentials_are_401_and_queue_nothing(
    hook: Any, path: str, headers: dict[str, str]
) -> None:
    client, queue = hook
    resp = await client.post(path, json=sample("aca_metric_alert_fired.json"), headers=headers)
    assert resp.status_code == 401
    assert "error" in resp.json()
    assert await queued(queue) == []


async def test_basic_auth_is_accepted_as_on_the_other_webhooks(hook: Any) -> None:
    client, queue = hook
    resp = await client.post("/alerts/azure", json=sample("aca_metric_alert_fired.json"), headers=basic())
    assert resp.status_code == 202, resp.text
    assert len(await queued(queue)) == 1

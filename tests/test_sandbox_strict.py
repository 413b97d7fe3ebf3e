"""The stand-ins refuse what the real services refuse: Slack's unknown methods and invalid blocks (through
the real slack-sdk client), and Cloud Logging filters the API cannot parse (400 INVALID_ARGUMENT)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.adapters.cloud_logging import build_filter
from bot.sandbox.cloud_logging_api import CloudLoggingStandIn
from bot.sandbox.server import serve
from bot.sandbox.slack_api import SlackStandIn
from skills.ports import LogQuery


def _client(slack: SlackStandIn) -> AsyncWebClient:
    return AsyncWebClient(token="xoxb-test-token", base_url=slack.base_url + "/api/")


async def test_a_method_slack_lacks_is_unknown_method(slack: SlackStandIn) -> None:
    with pytest.raises(SlackApiError) as exc:
        await _client(slack).api_call("chat.postMesage", json={"channel": "C1", "text": "hi"})
    assert exc.value.response["error"] == "unknown_method"


async def test_blocks_slack_would_refuse_are_invalid_blocks(slack: SlackStandIn) -> None:
    button = {"type": "button", "text": {"type": "plain_text", "text": "Go"}, "action_id": "a", "value": "v" * 2001}
    with pytest.raises(SlackApiError) as exc:
        await _client(slack).chat_postMessage(
            channel="C1", text="t", blocks=[{"type": "actions", "elements": [button]}]
        )
    assert exc.value.response["error"] == "invalid_blocks"
    with pytest.raises(SlackApiError) as exc:
        await _client(slack).chat_postMessage(channel="C1", text="t", blocks=[{"type": "sektion", "text": "x"}])
    assert exc.value.response["error"] == "invalid_blocks"
    ok = await _client(slack).chat_postMessage(
        channel="C1", text="t", blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "fine"}}]
    )
    assert ok["ok"]


@pytest.fixture
def logging_api() -> Iterator[tuple[CloudLoggingStandIn, str]]:
    standin = CloudLoggingStandIn()
    standin.append(
        [
            {
                "timestamp": "2026-01-01T10:00:00.000000Z",
                "severity": "ERROR",
                "logName": "projects/p/logs/run.googleapis.com%2Fstderr",
                "resource": {"type": "cloud_run_revision", "labels": {"service_name": "vllm-gemma4"}},
                "textPayload": "CUDA out of memory",
            }
        ]
    )
    with serve(standin.app()) as url:
        yield standin, url


def _list(url: str, flt: str) -> httpx.Response:
    return httpx.post(f"{url}/v2/entries:list", json={"resourceNames": ["projects/p"], "filter": flt})


@pytest.mark.parametrize(
    "flt",
    [
        'resource.labels.service_name="vllm-gemma4" AND (severity>=ERROR',  # unbalanced
        'resource.labels.service_name="vllm-gemma4',  # unterminated string
        'timestamp>="yesterday"',  # not a timestamp
        "severity>=SEVERE",  # not a severity
        "severity>=",  # no value
    ],
)
def test_the_logging_stand_in_refuses_filters_the_api_refuses(logging_api: Any, flt: str) -> None:
    _, url = logging_api
    resp = _list(url, flt)
    assert resp.status_code == 400
    err = resp.json()["error"]
    assert err["code"] == 400 and err["status"] == "INVALID_ARGUMENT" and err["message"]


def test_the_bots_own_filter_parses_and_matches(logging_api: Any) -> None:
    _, url = logging_api
    q = LogQuery(service="vllm-gemma4", since=datetime(2026, 1, 1, 9, tzinfo=UTC), min_severity="WARNING")
    resp = _list(url, build_filter("p", q))
    assert resp.status_code == 200 and len(resp.json()["entries"]) == 1
    late = LogQuery(service="vllm-gemma4", since=datetime(2026, 1, 1, 11, tzinfo=UTC))
    assert _list(url, build_filter("p", late)).json()["entries"] == []

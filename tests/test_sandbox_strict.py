"""The stand-ins refuse what the real services refuse: Slack's unknown methods and invalid blocks, through
the real slack-sdk client."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.sandbox.slack_api import SlackStandIn


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

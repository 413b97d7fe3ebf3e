"""Block Kit limits never cost a button: the 50-block cut keeps Confirm, and a plan button's payload lives in
Redis so its value (Slack's limit: 2,000 characters) is a short id, never clipped JSON.

Every message is checked with slack-sdk's own Block Kit models (Block.parse_all + validate_json)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.sandbox.slack_api import SlackStandIn
from bot.settings import Settings
from bot.slack_app import ChannelResponder
from handlers.button_payloads import ButtonPayloads
from handlers.render_slack import to_blocks
from handlers.reply import CANCEL_ACTION, CONFIRM_ACTION, PLAN_ACTION, Button, Reply, plan_button
from skills.errors import InvalidInput
from tests.test_slack_escaping import assert_valid_blocks


def _long_plan() -> Reply:
    r = Reply(title="Plan: redeploy")
    for i in range(80):
        r.add(heading=f"Step {i}", text="x" * 100)
    r.buttons.append(Button(label="Confirm", action_id=CONFIRM_ACTION, value="plan-1", style="primary"))
    r.buttons.append(Button(label="Cancel", action_id=CANCEL_ACTION, value="plan-1"))
    r.context = "plan `plan-1`"
    return r


def _actions(blocks: list[dict[str, Any]]) -> list[str]:
    return [el["action_id"] for b in blocks if b["type"] == "actions" for el in b["elements"]]


def test_the_block_cut_keeps_confirm_and_cancel() -> None:
    _, blocks = to_blocks(_long_plan())
    assert_valid_blocks(blocks)
    assert _actions(blocks) == [CONFIRM_ACTION, CANCEL_ACTION]
    assert any("reply cut" in json.dumps(b) for b in blocks)
    assert blocks[-1]["type"] == "context" and "plan-1" in blocks[-1]["elements"][0]["text"]


def test_an_oversized_value_is_left_out_never_clipped() -> None:
    r = Reply(title="t")
    r.buttons.append(plan_button("redeploy", {"note": "y" * 2500}, "Plan redeploy"))
    r.buttons.append(plan_button("scale", {"max_instances": 3}))
    _, blocks = to_blocks(r)
    assert_valid_blocks(blocks)
    values = [el["value"] for b in blocks if b["type"] == "actions" for el in b["elements"]]
    assert [json.loads(v)["action"] for v in values] == ["scale"]  # every value shown is whole JSON
    assert "1 button(s) left out" in json.dumps(blocks)


@pytest.fixture
def payloads(redis_client: Any, settings: Settings) -> ButtonPayloads:
    return ButtonPayloads(redis_client, settings.key)


async def test_plan_buttons_carry_an_id_and_the_payload_comes_back(
    slack: SlackStandIn, settings: Settings, payloads: ButtonPayloads
) -> None:
    params = {"profile": "gemma4-12b-l4", "why": "z" * 3000}
    reply = Reply(title="proposal")
    reply.buttons.append(plan_button("deploy", params, "Plan deploy"))
    client = AsyncWebClient(token="xoxb-test-token", base_url=settings.slack_api_url)
    await ChannelResponder(client, "C1", payloads=payloads).post(reply)
    [posted] = slack.of("chat.postMessage")
    blocks = posted["blocks"] if isinstance(posted["blocks"], list) else json.loads(posted["blocks"])
    assert_valid_blocks(blocks)
    [button] = [el for b in blocks if b["type"] == "actions" for el in b["elements"]]
    assert button["action_id"] == PLAN_ACTION and len(button["value"]) < 100
    assert json.loads(await payloads.resolve(button["value"])) == {"action": "deploy", "params": params}
    assert reply.buttons[0].value.startswith("{")  # the caller's Reply is unchanged (it may be stored)


async def test_an_unknown_button_id_is_a_clear_error(payloads: ButtonPayloads) -> None:
    with pytest.raises(InvalidInput, match="expired"):
        await payloads.resolve("pb:" + "0" * 32)
    assert await payloads.resolve('{"action":"scale"}') == '{"action":"scale"}'  # older messages: the JSON

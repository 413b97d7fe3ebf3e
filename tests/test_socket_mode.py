"""Socket Mode end to end: the real app (create_app's lifespan), slack-bolt's async Socket Mode handler and
slack-sdk's aiohttp client against the Socket Mode stand-in (apps.connections.open, hello, envelopes, acks,
disconnect). Commands, buttons, modals and thread replies behave as over HTTP; Slack's refresh is survived."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.agent import Agent
from bot.deps import Deps
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.openai_script import OpenAIScript, say
from bot.sandbox.slack_api import SlackStandIn
from bot.sandbox.socket_mode_api import SocketModeStandIn
from bot.settings import Settings
from bot.web import create_app
from bot.wiring import build_deps
from handlers.commands.plans import DESTROY_NAME_BLOCK, DESTROY_SUBMIT_ACTION
from tests.agent_helpers import MODEL_ID
from tests.eventually import eventually

pytest_plugins = ["tests.agent_fixtures"]

APP_TOKEN = "xapp-1-A0SANDBOX1-1-test"


@pytest.fixture
def socket_slack(slack: SlackStandIn) -> SocketModeStandIn:
    return SocketModeStandIn(slack, app_token=APP_TOKEN)


@pytest.fixture
async def bot(
    settings: Settings, redis_client: object, socket_slack: SocketModeStandIn, script: OpenAIScript
) -> AsyncIterator[Deps]:
    st = settings.model_copy(
        update={
            "slack_app_token": settings.slack_signing_secret.__class__(APP_TOKEN),  # SecretStr
            "slack_signing_secret": None,  # Socket Mode needs none
            "deployer_user_ids": "U1",
            "vllm_base_url": script.base_url,  # type: ignore[attr-defined]
            "vllm_model_id": MODEL_ID,
        }
    )
    deps = build_deps(st)
    deps.agent = Agent(deps, initial_backoff_s=0.01, max_backoff_s=0.05)
    app = create_app(deps)
    async with app.router.lifespan_context(app):
        assert await eventually(lambda: socket_slack.live_connections() == 1)
        yield deps


def command(text: str, trigger: str | None = None) -> dict[str, Any]:
    """A slash_commands envelope's payload (the same fields as the HTTP form body)."""
    return {
        "token": "legacy",
        "team_id": "T0001",
        "team_domain": "acme",
        "channel_id": "C1",
        "channel_name": "ops",
        "user_id": "U1",
        "user_name": "alice",
        "command": "/gemma",
        "text": text,
        "api_app_id": "A0SANDBOX1",
        "is_enterprise_install": "false",
        "response_url": "",
        "trigger_id": trigger or f"trig-{uuid.uuid4().hex[:8]}",
    }


async def acked(sm: SocketModeStandIn, eid: str) -> dict[str, Any]:
    ack = await eventually(lambda: sm.acked(eid), timeout=5.0)
    assert ack, f"envelope {eid} was never acked"
    return dict(ack)


async def test_help_is_answered_in_the_ack(bot: Deps, socket_slack: SocketModeStandIn) -> None:
    assert socket_slack.opens == 1 and socket_slack.connects == 1
    eid = socket_slack.send("slash_commands", command("help"))
    ack = await acked(socket_slack, eid)
    assert "/gemma" in json.dumps(ack["payload"])
    assert ack["payload"]["response_type"] == "ephemeral"
    assert socket_slack.protocol_errors == []


async def test_ask_then_thread_reply_continue_the_conversation(
    bot: Deps, socket_slack: SocketModeStandIn, slack: SlackStandIn, cloud_run: CloudRunStandIn, script: OpenAIScript
) -> None:
    cloud_run.seed_service("vllm-gemma4", uri=script.base_url)  # type: ignore[attr-defined]
    script.push(say("It is up and serving."), say("Cold starts take several minutes from zero."))
    eid = socket_slack.send("slash_commands", command("ask is the service up?"))
    assert "ask" in json.dumps((await acked(socket_slack, eid)).get("payload", {}))
    assert await eventually(lambda: len(slack.of("chat.postMessage")) >= 2)
    answer = slack.of("chat.postMessage")[1]
    thread_ts = answer["thread_ts"]
    assert "It is up" in json.dumps(answer["blocks"])

    event = {
        "token": "legacy",
        "team_id": "T0001",
        "api_app_id": "A0SANDBOX1",
        "type": "event_callback",
        "event_id": f"Ev{uuid.uuid4().hex[:8]}",
        "event_time": int(time.time()),
        "event": {
            "type": "message",
            "channel": "C1",
            "user": "U1",
            "text": "how long to wake it?",
            "ts": f"{time.time():.6f}",
            "thread_ts": thread_ts,
            "channel_type": "channel",
        },
    }
    eid = socket_slack.send("events_api", event)
    assert "payload" not in await acked(socket_slack, eid)
    assert await eventually(lambda: len(slack.of("chat.postMessage")) >= 3)
    follow = slack.of("chat.postMessage")[2]
    assert follow["thread_ts"] == thread_ts and "Cold starts" in json.dumps(follow["blocks"])
    assert socket_slack.protocol_errors == []


async def test_destroy_modal_and_its_submission(
    bot: Deps, socket_slack: SocketModeStandIn, slack: SlackStandIn, cloud_run: CloudRunStandIn
) -> None:
    cloud_run.seed_service("vllm-gemma4")
    await acked(socket_slack, socket_slack.send("slash_commands", command("destroy", trigger="trig-destroy")))
    opened = await eventually(lambda: slack.of("views.open"))
    assert opened and opened[0]["trigger_id"] == "trig-destroy"
    view = opened[0]["view"]
    submission = {
        "type": "view_submission",
        "team": {"id": "T0001"},
        "user": {"id": "U1"},
        "api_app_id": "A0SANDBOX1",
        "trigger_id": "trig-submit",
        "view": {
            "id": "V0001",
            "type": "modal",
            "callback_id": DESTROY_SUBMIT_ACTION,
            "private_metadata": view["private_metadata"],
            "state": {"values": {DESTROY_NAME_BLOCK: {"value": {"type": "plain_text_input", "value": "vllm-gemma4"}}}},
        },
    }
    await acked(socket_slack, socket_slack.send("interactive", submission))
    assert await eventually(lambda: "vllm-gemma4" not in cloud_run.services), "the typed-name destroy did not run"
    assert socket_slack.protocol_errors == []


async def test_button_click_runs_the_action(
    bot: Deps, socket_slack: SocketModeStandIn, slack: SlackStandIn, cloud_run: CloudRunStandIn
) -> None:
    cloud_run.seed_service("vllm-gemma4")
    await acked(socket_slack, socket_slack.send("slash_commands", command("scale 0 2")))
    posted = await eventually(lambda: slack.of("chat.postMessage"))
    blocks = json.dumps(posted[0]["blocks"])
    cancel = next(
        el
        for b in posted[0]["blocks"]
        if b.get("type") == "actions"
        for el in b["elements"]
        if el["text"]["text"] == "Cancel"
    )
    assert "Confirm" in blocks
    click = {
        "type": "block_actions",
        "team": {"id": "T0001"},
        "user": {"id": "U1"},
        "api_app_id": "A0SANDBOX1",
        "trigger_id": "trig-click",
        "channel": {"id": posted[0]["channel"]},
        "response_url": "",
        "message": {"ts": "1700000001.000100", "text": ""},
        "actions": [{"type": "button", "action_id": cancel["action_id"], "value": cancel["value"], "block_id": "b"}],
    }
    eid = socket_slack.send("interactive", click)
    await acked(socket_slack, eid)
    done = await eventually(lambda: [p for p in slack.of("chat.postMessage") if "Cancelled plan" in p.get("text", "")])
    assert done, "the Cancel click had no effect"


async def test_refresh_requested_reconnects_and_work_continues(bot: Deps, socket_slack: SocketModeStandIn) -> None:
    socket_slack.disconnect("refresh_requested")
    assert await eventually(lambda: socket_slack.opens >= 2 and socket_slack.live_connections() == 1, timeout=15)
    eid = socket_slack.send("slash_commands", command("help"))
    assert "/gemma" in json.dumps((await acked(socket_slack, eid))["payload"])
    socket_slack.close()  # a cut without a word: slack-sdk notices and reconnects too
    assert await eventually(lambda: socket_slack.opens >= 3 and socket_slack.live_connections() == 1, timeout=30)
    eid = socket_slack.send("slash_commands", command("help"))
    await acked(socket_slack, eid)
    assert socket_slack.protocol_errors == []


async def test_wrong_token_kind_is_one_clear_line(
    settings: Settings, redis_client: object, socket_slack: SocketModeStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    from bot.slack_app import build_bolt
    from bot.socket_mode import SocketMode

    deps = build_deps(settings)
    sm = SocketMode(build_bolt(deps), "xapp-1-not-the-right-one")
    with caplog.at_level(logging.INFO):
        await sm.start()
        await sm.stop()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "invalid_auth" in errors[0].getMessage()
    assert "copy it again" in errors[0].getMessage() and errors[0].exc_info is None
    assert socket_slack.connects == 0
    await deps.redis.aclose()


async def test_reconnect_backs_off_on_the_shared_policy_until_slack_accepts(
    settings: Settings, redis_client: object, socket_slack: SocketModeStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    """Refused at start, the connection is retried in the background: waits grow from 5 s (on an injected
    sleep, so no time passes), one WARNING per failed attempt, and it connects once the token is right."""
    from bot.slack_app import build_bolt
    from bot.socket_mode import SocketMode

    waits: list[float] = []
    sm: SocketMode

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 4:  # the operator fixes the token after three failed retries
            sm.handler.client.app_token = APP_TOKEN
        await asyncio.sleep(0)

    deps = build_deps(settings)
    sm = SocketMode(build_bolt(deps), "xapp-1-not-the-right-one", sleep=sleep)
    with caplog.at_level(logging.WARNING):
        await sm.start()
        assert await eventually(lambda: socket_slack.live_connections() == 1, timeout=20)
    await sm.stop()
    assert waits[0] == 5.0 and all(5.0 <= w <= 301.0 for w in waits) and waits[3] > waits[1]
    retries = [r for r in caplog.records if r.levelno == logging.WARNING and "Slack Socket Mode" in r.getMessage()]
    assert len(retries) == 3 and all("invalid_auth" in r.getMessage() for r in retries)
    await deps.redis.aclose()

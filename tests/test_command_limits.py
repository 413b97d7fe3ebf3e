"""Huge or hostile input on the command paths: a slash command over the size limit gets one clear error in
the ack and runs nothing; argument parsing never does more than linear work (a command takes a few words, so
a flood of them is refused before argparse, whose handling of many unknown options is quadratic); a malformed
Socket Mode frame is one log line, no traceback, and the connection goes on."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import httpx
import pytest

from bot.deps import Deps
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.slack_api import SlackStandIn
from bot.sandbox.slack_signing import command_body, signed_headers
from bot.sandbox.socket_mode_api import SocketModeStandIn
from bot.settings import Settings
from bot.web import create_app
from bot.wiring import build_deps
from handlers.context import CommandContext
from handlers.registry import load_all
from handlers.router import run_command
from tests.conftest import SIGNING_SECRET
from tests.eventually import eventually
from tests.observe_fixtures import RecordingResponder

load_all()
APP_TOKEN = "xapp-1-A0SANDBOX1-1-limits"


@pytest.fixture
async def app_client(settings: Settings, redis_client: object) -> AsyncIterator[tuple[httpx.AsyncClient, Deps]]:
    deps = build_deps(settings)
    app = create_app(deps)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test") as client:
        yield client, deps
    await deps.drain()
    await deps.redis.aclose()


@pytest.mark.parametrize("unit", ["--x ", "x ", "--since=1h ", '"a b" '])
async def test_a_huge_command_is_refused_in_the_ack_and_runs_nothing(
    app_client, slack: SlackStandIn, cloud_run: CloudRunStandIn, unit: str
) -> None:
    client, deps = app_client
    text = "status " + unit * (500_000 // len(unit))  # ~500 KB: form-encoded under the body limit
    body = command_body(text, slack.response_url(), trigger_id="trig-huge")
    resp = await client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
    assert resp.status_code == 200
    assert "too long" in resp.text.lower() and "characters" in resp.text
    await deps.drain()
    assert slack.responses == [] and cloud_run.requests == []


async def test_many_words_are_refused_before_argparse(settings: Settings) -> None:
    deps = build_deps(settings)
    for words in (["--x"] * 500, ["x"] * 500, ["--fresh"] * 500):
        ctx = CommandContext(deps=deps, responder=RecordingResponder(), user_id="U1", channel_id="C1", args=words)
        reply = await run_command(ctx, "status")
        assert reply is not None and "Too many arguments" in reply.title, reply.title
    await deps.redis.aclose()


async def test_a_long_question_is_still_a_question(settings: Settings) -> None:
    """Free-text commands (ask) take any number of words under the size limit."""
    from handlers.args import CommandParser

    p = CommandParser("ask", free_text=True)
    p.add_argument("question", nargs="*")
    assert len(p.parse(["word"] * 600).question) == 600


@pytest.fixture
def socket_slack(slack: SlackStandIn) -> SocketModeStandIn:
    return SocketModeStandIn(slack, app_token=APP_TOKEN)


async def test_malformed_socket_mode_frames_are_one_line_each(
    settings: Settings, redis_client: object, socket_slack: SocketModeStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    st = settings.model_copy(
        update={"slack_app_token": settings.slack_signing_secret.__class__(APP_TOKEN), "slack_signing_secret": None}
    )
    deps = build_deps(st)
    app = create_app(deps)
    frames = [
        "{not json",
        '{"envelope_id": "e-1", "type": "slash_commands", "payload": "not an object"}',
        '{"envelope_id": "e-2", "type": "slash_commands", "payload": {"text": []}}',
        "[1, 2, 3]",
    ]
    async with app.router.lifespan_context(app):
        assert await eventually(lambda: socket_slack.live_connections() == 1)
        with caplog.at_level(logging.INFO):
            for frame in frames:
                socket_slack.send_raw(frame)
            eid = socket_slack.send(
                "slash_commands",
                {"command": "/gemma", "text": "help", "user_id": "U1", "channel_id": "C1", "trigger_id": "t-ok"},
            )
            ack = await eventually(lambda: socket_slack.acked(eid))
            assert ack and "/gemma" in json.dumps(ack.get("payload"))
    await deps.redis.aclose()
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert all(r.exc_info is None and "Traceback" not in r.getMessage() for r in loud), [
        r.getMessage()[:200] for r in loud
    ]
    assert len([r for r in loud if "Socket Mode" in r.getMessage()]) <= len(frames)


async def test_a_known_failure_class_is_one_line_without_traceback(
    settings: Settings, slack: SlackStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    """A command that fails on a refused Slack call (the fuzz run met a 429 after slack-sdk's retries) logs one
    line naming the failure class, not a traceback; an unknown failure still gets its traceback."""
    from bot.sandbox.slack_api import Fault
    from bot.slack_app import make_web_client
    from handlers.registry import COMMANDS, command

    client = make_web_client(settings)
    if "zz-slack-refusal" not in COMMANDS:

        @command("zz-slack-refusal", "test only: a command whose post Slack refuses")
        async def _refused(ctx: CommandContext) -> None:
            await client.chat_postMessage(channel="C1", text="hello")

    slack.inject("chat.postMessage", Fault(status=200, error="channel_not_found"))
    deps = build_deps(settings)
    ctx = CommandContext(deps=deps, responder=RecordingResponder(), user_id="U1", channel_id="C1", args=[])
    with caplog.at_level(logging.WARNING, logger="handlers.router"):
        reply = await run_command(ctx, "zz-slack-refusal")
    del COMMANDS["zz-slack-refusal"]
    await deps.redis.aclose()
    assert reply is not None and "error id" in reply.title
    [line] = [r for r in caplog.records if r.name == "handlers.router"]
    assert line.exc_info is None and "channel_not_found" in line.getMessage()

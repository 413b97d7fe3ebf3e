"""Socket Mode envelopes as Slack sends them, and as a broken or hostile sender might: a valid one logs nothing
at WARNING or above (slack-bolt reads the logger's `level` after each ack), and malformed fields (`text` as a
list, `actions` as a string, a lone surrogate, a `user` that is not an object) are answered or dropped with at
most one line each, never a traceback. Through slack-bolt's async Socket Mode handler and slack-sdk's aiohttp
client against the Socket Mode stand-in (the fixtures of tests/test_socket_mode.py)."""

from __future__ import annotations

import json
import logging

import pytest

from bot.deps import Deps
from bot.sandbox.socket_mode_api import SocketModeStandIn
from tests.test_socket_mode import acked, bot, command, socket_slack

pytest_plugins = ["tests.agent_fixtures"]
__all__ = ["bot", "socket_slack"]  # fixtures, used by name


def _loud(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_valid_envelope_logs_no_warning(
    bot: Deps, socket_slack: SocketModeStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        caplog.clear()
        for _ in range(3):
            ack = await acked(socket_slack, socket_slack.send("slash_commands", command("help")))
            assert "/gemma" in json.dumps(ack["payload"])
    assert _loud(caplog) == [], [r.getMessage() for r in _loud(caplog)]


def _click(actions: object) -> dict[str, object]:
    return {
        "type": "block_actions",
        "team": {"id": "T0001"},
        "user": {"id": "U1"},
        "api_app_id": "A0SANDBOX1",
        "trigger_id": "trig-click",
        "channel": {"id": "C1"},
        "response_url": "",
        "message": {"ts": "1700000001.000100", "text": ""},
        "actions": actions,
    }


MALFORMED = [
    ("slash_commands", {**command("help"), "text": ["status", "--fresh"]}),
    ("slash_commands", {**command("help"), "text": {"a": 1}}),
    ("slash_commands", {**command("status \ud800")}),
    ("slash_commands", {**command("help"), "user_id": ["U1"]}),
    ("slash_commands", {**command("help"), "channel_id": 7}),
    ("interactive", _click("not a list")),
    ("interactive", _click([{"action_id": 5, "value": ["x"]}])),
    ("interactive", _click(["a string, not an action"])),
    ("interactive", {**_click([]), "user": "U1"}),
    ("interactive", {"type": "view_submission", "user": {"id": "U1"}, "view": "not a view"}),
]


async def test_malformed_fields_are_answered_or_dropped_without_a_traceback(
    bot: Deps, socket_slack: SocketModeStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        for kind, payload in MALFORMED:
            caplog.clear()
            await acked(socket_slack, socket_slack.send(kind, payload))
            loud = _loud(caplog)
            shown = [r.getMessage() for r in loud]
            assert not [r for r in loud if r.exc_info or "Traceback" in r.getMessage()], (payload, shown)
            assert len(loud) <= 1, (payload, shown)
            assert not [r for r in loud if r.levelno >= logging.ERROR], (payload, shown)
    # the connection is alive and a good command still answers
    ack = await acked(socket_slack, socket_slack.send("slash_commands", command("help")))
    assert "/gemma" in json.dumps(ack["payload"])
    assert socket_slack.protocol_errors == []

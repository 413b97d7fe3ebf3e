"""Issue 45, items 3 and 6 (Slack): answers about incidents stay where they belong, and lists say what they leave out.

Through signed slash commands to the running app (alert webhook -> queue -> publisher -> Slack stand-in, Redis):
`/gemma incidents`, `/gemma handoff` and `/gemma postmortem` asked in another channel answer the asker alone
(ephemeral, no file in that channel, people named without a ping); asked in the alerts channel they are posted
there as before.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, urlencode

from bot.sandbox.slack_signing import command_body
from tests.alerts_fixtures import PostsSlack
from tests.test_incident_button_rules import OWN, _incident, _post, bot, clock, press, slack
from tests.test_incidents_storm import Instance, drained

__all__ = ["bot", "clock", "slack"]  # the fixtures this module reuses

OTHER = "C0THER01"  # a channel that is not the alerts channel


async def ask(
    bot: Instance, slack: PostsSlack, text: str, channel: str, rid: str, channel_name: str = "ops"
) -> list[dict[str, Any]]:
    """Send `/gemma TEXT` from `channel` as Slack signs it; the answers on its response URL."""
    fields = dict(parse_qsl(command_body(text, slack.response_url(rid), f"trig-{rid}", "UASKER", channel)))
    await _post(bot, urlencode({**fields, "channel_name": channel_name}))
    return [r for r in slack.responses if r["_rid"] == rid]


def _dump(answers: list[dict[str, Any]]) -> str:
    return json.dumps(answers)


async def test_incident_answers_asked_elsewhere_go_to_the_asker_alone_and_ping_nobody(
    bot: Instance, slack: PostsSlack
) -> None:
    h = await _incident(bot, slack, "0.answers")
    await press(bot, slack, h, OWN, h["id"], "UOWNER1")
    assert await drained(bot)  # the thread line of the take-over is posted: what follows is the commands' alone
    alerts = h["channel"]  # the id Slack gave the alerts channel; the command carries ids (its name here: "ops")

    for i, text in enumerate(("incidents", "handoff --since 2h", f"postmortem {h['id']}", "postmortem")):
        before = len(slack.calls)
        [answer] = await ask(bot, slack, text, OTHER, f"else{i}")
        assert answer["response_type"] == "ephemeral", (text, answer)
        assert h["id"] in _dump([answer]), (text, answer)  # it did answer about the incident
        assert "<@UOWNER1>" not in _dump([answer]), (text, answer)  # named, never pinged
        sent = [c for c in slack.calls[before:] if c.method != "auth.test"]
        assert [c.method for c in sent if c.payload.get("channel") in (OTHER, alerts)] == [], (text, sent)
        assert [s for s in slack.shared if s["channel"] == OTHER] == [], text  # no postmortem file there
    assert "@UOWNER1" in _dump([r for r in slack.responses if r["_rid"] == "else0"])

    # Asked in the alerts channel: posted there, owners mentioned, the postmortem in the incident's thread.
    [listed] = await ask(bot, slack, "incidents", alerts, "here0")
    assert listed["response_type"] == "in_channel" and "<@UOWNER1>" in _dump([listed])
    [handoff] = await ask(bot, slack, "handoff --since 2h", alerts, "here1")
    assert handoff["response_type"] == "in_channel" and "<@UOWNER1>" in _dump([handoff])
    before = len(slack.of("chat.postMessage"))
    await ask(bot, slack, f"postmortem {h['id']}", alerts, "here2")
    posted = slack.of("chat.postMessage")[before:]
    assert [p.get("thread_ts") for p in posted] == [h["ts"]], posted
    assert [s["thread_ts"] for s in slack.shared if s["channel"] == alerts] == [h["ts"]]

"""Issue 45, items 3 and 6 (Slack): answers about incidents stay where they belong, and lists say what they leave out.

Through signed slash commands to the running app (alert webhook -> queue -> publisher -> Slack stand-in, Redis):
`/gemma incidents`, `/gemma handoff` and `/gemma postmortem` asked in another channel answer the asker alone
(ephemeral, no file in that channel, people named without a ping); asked in the alerts channel they are posted
there as before. Lists page (20 a page) with counts from every incident kept, and say what they left out. An
alert's name and a resolve note cannot forge rows or emphasis in the header or the list, and the postmortem's
timeline says whose ownership was taken over.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl, urlencode

import pytest

from bot.sandbox.slack_signing import command_body
from bot.settings import Settings
from skills.clock import ScaledClock
from skills.incidents.model import Alert, utcnow
from skills.incidents.store import IncidentStore
from tests.alerts_fixtures import PostsSlack, basic, gcp_alert, tuned
from tests.test_incident_button_rules import OWN, _inc_id, _incident, _post, bot, clock, open_form, press, slack, submit
from tests.test_incidents_storm import Instance, close, drained, incident_headers, start

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
    return json.dumps(answers, ensure_ascii=False)


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


@pytest.fixture
async def still(
    settings: Settings, redis_client: Any, slack: PostsSlack, clock: ScaledClock
) -> AsyncIterator[Instance]:
    """The app without its queue worker: incidents seeded below are listed, not posted as a storm."""
    b = await start(tuned(settings), clock, run=False)
    yield b
    await b.deps.drain()
    await close(b)


async def seed(bot: Instance, n: int, tag: int, test: bool = False) -> list[str]:
    """`n` incidents recorded by the queue worker's own write (212 webhook deliveries would post a storm first)."""
    s = bot.deps.settings
    store, ids = IncidentStore(bot.deps.redis, s.key_prefix), []
    for i in range(n):
        alert = Alert(
            source="alertmanager", fingerprint=f"fp{tag}-{i}", state="firing", name=f"Alert {tag}-{i}",
            service=f"svc-{i % 7}", severity="warning", started_at=utcnow(), test=test,
        )  # fmt: skip
        known = frozenset({s.vllm_service_name})
        inc, _ = await store.record(
            f"{tag}{i:05d}-0", alert, utcnow(), channel=s.slack_alerts_channel, known=known,
            window_s=s.alert_group_window_s,
        )  # fmt: skip
        ids.append(inc.id)
    return ids


def _ids(answer: dict[str, Any]) -> list[str]:
    return re.findall(r"`(inc-[0-9-]+)`", _dump([answer]))


async def test_incident_lists_page_and_say_what_they_left_out(still: Instance, slack: PostsSlack) -> None:
    opened = await seed(still, 212, 1)  # 212 open: more than the newest 200 the list once read
    tests = await seed(still, 60, 2, test=True)  # Cloud Monitoring's test notifications: the newest, never listed
    newest_first = opened[::-1]

    [first] = await ask(still, slack, "incidents", OTHER, "p1")
    assert "Open (212)" in _dump([first])  # the store's count, not a page's
    assert _ids(first) == newest_first[:20]
    assert "showing 1-20 of 212 incidents (page 1 of 11); `/gemma incidents --page 2` for more" in _dump([first])
    seen = _ids(first)
    for page in range(2, 12):
        [answer] = await ask(still, slack, f"incidents open --page {page}", OTHER, f"p{page}")
        seen += _ids(answer)
    assert seen == newest_first  # every open incident once, in order, none of the test notifications
    assert "showing 201-212 of 212 incidents (page 11 of 11)" in _dump([answer]) and "--page 12" not in _dump([answer])
    [beyond] = await ask(still, slack, "incidents --page 12", OTHER, "p12")
    assert "There is no page 12: 212 incident(s) fill 11." in _dump([beyond])

    [handoff] = await ask(still, slack, "handoff --since 2h", OTHER, "h")
    assert "Open (212)" in _dump([handoff]) and _ids(handoff) == newest_first[:20]
    assert "… and 192 more open: `/gemma incidents open --page 2` lists the next 20" in _dump([handoff])

    [pm] = await ask(still, slack, "postmortem", OTHER, "pm")  # the latest real one, past 60 newer test notifications
    assert newest_first[0] in _dump([pm]) and not set(tests) & set(re.findall(r"inc-[0-9-]+", _dump([pm])))
    assert "the latest of 212 incidents; `/gemma postmortem INCIDENT` drafts another" in _dump([pm])


FORGED = "p95 high\n:rotating_light: `inc-0-0` *forged* row _on_ ~prod~ `x`"


def _mrkdwn(msg: dict[str, Any]) -> list[str]:
    """Every mrkdwn text of a message or an answer (sections, fields, context)."""
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "mrkdwn":
                out.append(str(node["text"]))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(msg.get("blocks", []))
    return out


def _formatted(text: str) -> str:
    """What Slack formats: the text outside code blocks and code spans."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))


async def test_outside_text_forges_no_row_or_emphasis_and_a_take_over_reaches_the_postmortem(
    bot: Instance, slack: PostsSlack
) -> None:
    r = await bot.client.post("/alerts/gcp", json=gcp_alert("0.forged", policy_name=FORGED), headers=basic())
    assert r.status_code == 202, r.text
    assert await drained(bot)
    [posted] = incident_headers(slack)
    h = {**posted, "channel": slack.channel_id(posted["channel"]), "id": _inc_id(posted)}
    await press(bot, slack, h, OWN, h["id"], "UOWNER1")
    await press(bot, slack, h, OWN, h["id"], "UOWNER2")  # a hand-off: taken over from UOWNER1
    await submit(bot, await open_form(bot, slack, h, "UOWNER2"), "rolled back\n*Resolved by* ~nobody~", "UOWNER2")
    assert await drained(bot)
    [listed] = await ask(bot, slack, "incidents", h["channel"], "list")
    header = [posted, *(u for u in slack.of("chat.update") if u.get("ts") == h["ts"])]
    texts = [t for m in [*header, listed] for t in _mrkdwn(m)]
    assert any("forged" in t for t in texts) and any("nobody" in t for t in texts)  # shown, as data
    # the name and the note whole inside code (Slack formats nothing there): no emphasis, no row of their own
    assert [t for t in texts if "forged" in _formatted(t) or "nobody" in _formatted(t)] == []
    [row] = [line for t in _mrkdwn(listed) for line in t.split("\n") if h["id"] in line]
    assert "forged" in row  # the whole name on the incident's one row

    await ask(bot, slack, f"postmortem {h['id']}", h["channel"], "pm")
    [pm] = [m for m in slack.of("chat.postMessage") if m.get("thread_ts") == h["ts"] and "Postmortem" in m["text"]]
    assert "UOWNER2 took ownership, taken over from UOWNER1" in json.dumps(pm)
    assert [t for t in _mrkdwn(pm) if "forged" in _formatted(t) or "nobody" in _formatted(t)] == []
    [md] = [f["content"].decode() for f in slack.shared if f["filename"] == f"postmortem-{h['id']}.md"]
    assert "UOWNER2 took ownership, taken over from UOWNER1" in md

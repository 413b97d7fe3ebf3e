"""Issue 45, item 1: who may press what on an incident's header, through signed Slack requests to the running app.

A resolved incident takes no Acknowledge, Take ownership or Snooze; a second Resolve is refused with who resolved it
and when; a second Acknowledge says who holds it and changes nothing, while Take ownership from someone else takes it
over and says so; a button or the Resolve… form acts only on the incident of the message it came from. Refusals go
to the presser alone (the response URL, or chat.postEphemeral for the form), and the header is not edited.
All real: the ASGI app with its signature check, the alert webhook -> queue -> publisher -> Slack stand-in, Redis.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlencode

import pytest

from bot.sandbox.server import serve
from bot.sandbox.slack_signing import signed_headers
from bot.settings import Settings
from skills.clock import ScaledClock
from skills.incidents.model import Incident
from skills.incidents.store import IncidentStore
from tests.alerts_fixtures import PostsSlack, basic, gcp_alert, tuned
from tests.conftest import SIGNING_SECRET
from tests.test_incidents_storm import Instance, close, drained, incident_headers, replies, start, text_of
from tests.test_plans_thread import click_body

ACK, OWN, SNOOZE_1H, RESOLVE, RESOLVE_SUBMIT = (
    "gemma_inc_ack",
    "gemma_inc_own",
    "gemma_inc_snooze_1h",
    "gemma_inc_resolve",
    "gemma_inc_resolve_submit",
)


@pytest.fixture
def clock() -> ScaledClock:
    return ScaledClock(speed=20)


@pytest.fixture
def slack(clock: ScaledClock) -> Iterator[PostsSlack]:
    standin = PostsSlack(clock=clock)
    with serve(standin.app) as url:
        standin.base_url = url
        yield standin


@pytest.fixture
async def bot(settings: Settings, redis_client: Any, slack: PostsSlack, clock: ScaledClock) -> AsyncIterator[Instance]:
    b = await start(tuned(settings), clock)
    yield b
    await b.deps.drain()
    await close(b)


async def _incident(bot: Instance, slack: PostsSlack, gcp_id: str, service: str = "vllm-gemma4") -> dict[str, Any]:
    """Fire an alert and return its header as Slack accepted it (with `channel` as the channel id)."""
    r = await bot.client.post("/alerts/gcp", json=gcp_alert(gcp_id, service=service), headers=basic())
    assert r.status_code == 202, r.text
    assert await drained(bot)
    [h] = [m for m in incident_headers(slack) if f"on {service}" in m["text"]]
    return {**h, "channel": slack.channel_id(h["channel"]), "id": _inc_id(h)}


def _inc_id(header: dict[str, Any]) -> str:
    found = re.search(r"incident (inc-[0-9-]+)", text_of(header))
    assert found
    return found.group(1)


async def _post(bot: Instance, payload: dict[str, Any] | str) -> None:
    body = payload if isinstance(payload, str) else urlencode({"payload": json.dumps(payload)})
    r = await bot.client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
    assert r.status_code == 200, r.text
    await bot.deps.drain()  # the work after the ack


async def press(
    bot: Instance, slack: PostsSlack, header: dict[str, Any], action_id: str, value: str, user: str,
    channel: str | None = None,
) -> str:  # fmt: skip
    """Press a button on `header` (as Slack sends it: the header is the thread's root); the trigger id."""
    trigger = f"trig-{uuid.uuid4().hex[:8]}"
    body = click_body(action_id, value, channel or header["channel"], header["ts"], None, user, trigger,
                      slack.response_url(trigger))  # fmt: skip
    await _post(bot, body)
    return trigger


async def submit(bot: Instance, meta: str, note: str, user: str) -> None:
    """Submit the Resolve… form (a view_submission carries no message: only the private_metadata we set)."""
    await _post(bot, {
        "type": "view_submission",
        "team": {"id": "T0001"},
        "user": {"id": user},
        "api_app_id": "A1",
        "trigger_id": f"trig-{uuid.uuid4().hex[:8]}",
        "view": {
            "id": "V0001",
            "type": "modal",
            "callback_id": RESOLVE_SUBMIT,
            "private_metadata": meta,
            "state": {"values": {"note": {"value": {"type": "plain_text_input", "value": note}}}},
        },
    })  # fmt: skip


async def open_form(bot: Instance, slack: PostsSlack, header: dict[str, Any], user: str) -> str:
    """Press Resolve… and return the form's private_metadata."""
    before = len(slack.of("views.open"))
    await press(bot, slack, header, RESOLVE, header["id"], user)
    opened = slack.of("views.open")
    assert len(opened) == before + 1, "the Resolve… form did not open"
    return str(opened[-1]["view"]["private_metadata"])


def answered(slack: PostsSlack, trigger: str) -> dict[str, Any]:
    """The one answer on this click's response URL."""
    got = [r for r in slack.responses if r["_rid"] == trigger]
    assert len(got) == 1, f"expected one answer to {trigger}, got {got}"
    return got[0]


def shown(slack: PostsSlack, header: dict[str, Any]) -> str:
    edits = [u for u in slack.of("chat.update") if u.get("ts") == header["ts"]]
    return text_of(edits[-1] if edits else header)


def edits(slack: PostsSlack, header: dict[str, Any]) -> int:
    return len([u for u in slack.of("chat.update") if u.get("ts") == header["ts"]])


async def stored(bot: Instance, inc_id: str) -> Incident:
    inc = await IncidentStore(bot.deps.redis, bot.deps.settings.key_prefix).load(inc_id)
    assert inc is not None
    return inc


def refused(answer: dict[str, Any], *needles: str) -> None:
    assert answer.get("response_type") == "ephemeral", answer
    text = answer["text"] + json.dumps(answer.get("blocks", []))
    for needle in needles:
        assert needle in text, (needle, text)


_AT = r"\d\d:\d\d UTC"


async def test_a_resolved_incident_takes_no_acknowledge_ownership_or_snooze(bot: Instance, slack: PostsSlack) -> None:
    h = await _incident(bot, slack, "0.rules-done")
    await submit(bot, await open_form(bot, slack, h, "UDAN"), "rolled back by hand", "UDAN")
    assert await drained(bot)
    assert "<@UDAN>" in shown(slack, h)
    header_before, edits_before, lines_before = shown(slack, h), edits(slack, h), len(replies(slack, h["ts"]))
    # the old header's buttons, pressed after the resolve
    for action_id in (ACK, OWN, SNOOZE_1H):
        answer = answered(slack, await press(bot, slack, h, action_id, h["id"], "UEVE"))
        refused(answer, "resolved by <@UDAN>", "fires again")
        assert re.search(_AT, answer["text"]), answer["text"]
    assert await drained(bot)
    inc = await stored(bot, h["id"])
    assert (inc.life.acked_by, inc.life.owner, inc.life.snooze) == ("", "", "")
    assert [r.action for r in inc.life.log] == ["resolve"]
    assert (edits(slack, h), shown(slack, h)) == (edits_before, header_before)
    assert len(replies(slack, h["ts"])) == lines_before


async def test_an_incident_its_alert_closed_takes_no_acknowledge_ownership_or_snooze(
    bot: Instance, slack: PostsSlack
) -> None:
    h = await _incident(bot, slack, "0.rules-closed")
    r = await bot.client.post("/alerts/gcp", json=gcp_alert("0.rules-closed", state="closed"), headers=basic())
    assert r.status_code == 202
    assert await drained(bot)
    assert "RESOLVED" in shown(slack, h)
    edits_before = edits(slack, h)
    for action_id in (ACK, OWN, SNOOZE_1H):
        refused(answered(slack, await press(bot, slack, h, action_id, h["id"], "UEVE")), "resolved", "alert closed")
    assert await drained(bot)
    inc = await stored(bot, h["id"])
    assert (inc.life.acked_by, inc.life.owner, inc.life.log) == ("", "", [])
    assert edits(slack, h) == edits_before


async def test_a_second_resolve_is_refused_with_who_resolved_it_and_when(bot: Instance, slack: PostsSlack) -> None:
    h = await _incident(bot, slack, "0.rules-twice")
    early = await open_form(bot, slack, h, "UEVE")  # a form opened before the first resolve, submitted after it
    await submit(bot, await open_form(bot, slack, h, "UDAN"), "rolled back by hand", "UDAN")
    assert await drained(bot)
    header_before, edits_before = shown(slack, h), edits(slack, h)
    forms_before = len(slack.of("views.open"))
    # Resolve… on the old header: refused before a form opens
    refused(answered(slack, await press(bot, slack, h, RESOLVE, h["id"], "UEVE")), "Already resolved by <@UDAN>")
    assert len(slack.of("views.open")) == forms_before
    # the early form, submitted now: refused to its submitter alone
    await submit(bot, early, "it was the config", "UEVE")
    [eph] = slack.of("chat.postEphemeral")
    assert eph["user"] == "UEVE" and eph["channel"] == h["channel"]
    assert "Already resolved by <@UDAN>" in eph["text"] and re.search(_AT, eph["text"]), eph["text"]
    assert await drained(bot)
    inc = await stored(bot, h["id"])
    assert (inc.life.resolved_by, inc.life.note) == ("UDAN", "rolled back by hand")
    assert [r.action for r in inc.life.log] == ["resolve"]
    assert (edits(slack, h), shown(slack, h)) == (edits_before, header_before)
    assert "<@UEVE>" not in shown(slack, h)


async def test_a_second_acknowledge_says_who_holds_it_and_ownership_is_taken_over_openly(
    bot: Instance, slack: PostsSlack
) -> None:
    h = await _incident(bot, slack, "0.rules-who")
    await press(bot, slack, h, ACK, h["id"], "UALICE")
    assert await drained(bot)
    header_before, edits_before = shown(slack, h), edits(slack, h)
    answer = answered(slack, await press(bot, slack, h, ACK, h["id"], "UBOB"))
    refused(answer, "Already acknowledged by <@UALICE>")
    assert re.search(_AT, answer["text"]), answer["text"]
    assert await drained(bot)
    assert (edits(slack, h), shown(slack, h)) == (edits_before, header_before)
    assert (await stored(bot, h["id"])).life.acked_by == "UALICE"

    await press(bot, slack, h, OWN, h["id"], "UALICE")
    await press(bot, slack, h, OWN, h["id"], "UBOB")  # taking ownership from someone else: allowed, and said
    assert await drained(bot)
    inc = await stored(bot, h["id"])
    assert (inc.life.owner, inc.life.acked_by) == ("UBOB", "UALICE")
    assert [(r.action, r.by, r.took_from) for r in inc.life.log] == [
        ("ack", "UALICE", ""), ("own", "UALICE", ""), ("own", "UBOB", "UALICE")
    ]  # fmt: skip
    lines = [text_of(m) for m in replies(slack, h["ts"])]
    assert any("<@UBOB> took ownership" in t and "taken over from <@UALICE>" in t for t in lines), lines
    assert "taken over from <@UALICE>" in shown(slack, h)
    edits_before = edits(slack, h)
    refused(answered(slack, await press(bot, slack, h, OWN, h["id"], "UBOB")), "You own it already")
    assert await drained(bot)
    assert edits(slack, h) == edits_before and len((await stored(bot, h["id"])).life.log) == 3


async def test_a_button_or_form_acts_only_on_the_incident_of_its_message(bot: Instance, slack: PostsSlack) -> None:
    a = await _incident(bot, slack, "0.rules-a", service="vllm-gemma4")
    b = await _incident(bot, slack, "0.rules-b", service="vllm-other")
    assert a["id"] != b["id"] and a["ts"] != b["ts"]
    edits_a, edits_b = edits(slack, a), edits(slack, b)
    # a button on A's header carrying B's id
    for action_id in (ACK, OWN, SNOOZE_1H, RESOLVE):
        refused(answered(slack, await press(bot, slack, a, action_id, b["id"], "UMAL")), b["id"], "nothing changed")
    # A's own id, from a message in another channel (the same ts there is no incident's header)
    refused(answered(slack, await press(bot, slack, a, ACK, a["id"], "UMAL", channel="CRANDOM")), "nothing changed")
    assert not slack.of("views.open")
    # the Resolve… form opened on A, its private_metadata changed to B's id
    meta = json.loads(await open_form(bot, slack, a, "UMAL"))
    await submit(bot, json.dumps({**meta, "incident": b["id"]}), "closing someone else's", "UMAL")
    [eph] = slack.of("chat.postEphemeral")
    assert eph["user"] == "UMAL" and b["id"] in eph["text"] and "nothing changed" in eph["text"], eph
    assert await drained(bot)
    for h, before in ((a, edits_a), (b, edits_b)):
        inc = await stored(bot, h["id"])
        assert inc.life.log == [] and not inc.life.resolved_by, inc.life
        assert edits(slack, h) == before

"""Issue 34: an incident's lifecycle from its thread, through the webhook, the queue, the publisher and the Slack
stand-in on the test's scaled clock: several users acknowledge, own, snooze and resolve; a snooze holds repeat
lines silently and wakes on a more severe alert or when it ends (an injected time); a manual resolve while the
alert still fires says so; a re-fire reopens it by the closure rule."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from unittest.mock import ANY

import pytest

from bot.sandbox.server import serve
from bot.settings import Settings
from handlers.commands.incidents import check_resolve, incident_row
from handlers.context import ActionContext
from handlers.reply import Reply
from handlers.router import run_action
from skills.clock import ScaledClock
from skills.incidents.lifecycle_store import ActionRefused, IncidentLifecycle
from skills.incidents.model import utcnow
from skills.incidents.store import IncidentStore
from tests.alerts_fixtures import PostsSlack, basic, gcp_alert, tuned
from tests.deploy_helpers import RecordingResponder
from tests.test_incidents_storm import close, drained, incident_headers, replies, start, text_of

START = 1795183200


@pytest.fixture
def clock() -> ScaledClock:
    return ScaledClock(speed=20)


@pytest.fixture
def slack(clock: ScaledClock) -> Iterator[PostsSlack]:
    standin = PostsSlack(clock=clock)
    with serve(standin.app) as url:
        standin.base_url = url
        yield standin


def _shown(slack: PostsSlack, header: dict[str, Any]) -> str:
    edits = [u for u in slack.of("chat.update") if u.get("ts") == header["ts"]]
    return text_of(edits[-1] if edits else header)


def _buttons(msg: dict[str, Any]) -> list[str]:
    return [e["text"]["text"] for b in msg.get("blocks", []) if b.get("type") == "actions" for e in b["elements"]]


async def _gcp(bot: Any, incident_id: str, state: str = "open", started_at: int = START, **extra: Any) -> None:
    body = gcp_alert(incident_id, state=state, started_at=started_at)
    body["incident"].update(extra)
    if state == "closed":
        body["incident"]["ended_at"] = started_at + 600
    r = await bot.client.post("/alerts/gcp", json=body, headers=basic())
    assert r.status_code == 202, r.text


async def click(
    bot: Any, slack: PostsSlack, header: dict[str, Any], action_id: str, value: str, user: str = "UDEPLOYER",
    form: dict[str, str] | None = None,
) -> tuple[Reply | None, RecordingResponder]:  # fmt: skip
    """A button pressed on the incident's header (its buttons act only on the incident of their message)."""
    responder = RecordingResponder()
    channel = slack.channel_id(header["channel"])
    ctx = ActionContext(deps=bot.deps, responder=responder, user_id=user, channel_id=channel, action_id=action_id,
                        value=value, message_ts=header["ts"], thread_ts=header["ts"], form=form or {})  # fmt: skip
    return await run_action(ctx), responder


def _inc_id(header: dict[str, Any]) -> str:
    found = re.search(r"incident (inc-[0-9-]+)", text_of(header))
    assert found
    return found.group(1)


async def test_several_users_ack_own_snooze_and_a_severity_rise_wakes_it(
    settings: Settings, redis_client: Any, slack: PostsSlack, clock: ScaledClock
) -> None:
    s = tuned(settings, alert_coalesce_interval_s=0)
    bot = await start(s, clock)
    life = IncidentLifecycle(IncidentStore(bot.deps.redis, s.key_prefix))
    try:
        await _gcp(bot, "0.life", severity="Warning")
        assert await drained(bot)
        [h] = incident_headers(slack)
        assert {"Acknowledge", "Take ownership", "Snooze 15 min", "Resolve…"} <= set(_buttons(h))
        inc_id = _inc_id(h)
        await life.act(inc_id, "ack", "UALICE", utcnow())
        await life.act(inc_id, "own", "UBOB", utcnow())
        await life.act(inc_id, "snooze", "UCAROL", utcnow(), snooze="1h")
        assert await drained(bot)
        header = _shown(slack, h)
        assert "<@UALICE>" in header and "<@UBOB>" in header and "Snoozed" in header
        before = len(replies(slack, h["ts"]))
        for i in range(3):  # repeats while snoozed (re-notifications: a later start each): held, nothing posted
            await _gcp(bot, "0.life", severity="Warning", started_at=START + 60 * (i + 1))
        assert await drained(bot)
        assert len(replies(slack, h["ts"])) == before
        listed = await life.listed()
        assert [i.status for i in listed] == ["snoozed"]
        await _gcp(bot, "0.worse", severity="Critical")  # a more severe alert of the same condition wakes it
        assert await drained(bot)
    finally:
        await close(bot)
    texts = [text_of(m) for m in replies(slack, h["ts"])]
    woke = [t for t in texts if "Awake again" in t]
    assert woke and "severity rose to critical" in woke[0]
    assert any("Acknowledged by" in t for t in texts) and any("took ownership" in t for t in texts)
    assert "Snoozed" not in _shown(slack, h)


async def test_a_snooze_wakes_when_it_ends_and_the_held_repeats_post_coalesced(
    settings: Settings, redis_client: Any, slack: PostsSlack, clock: ScaledClock
) -> None:
    s = tuned(settings, alert_coalesce_interval_s=0)
    bot = await start(s, clock)
    life = IncidentLifecycle(IncidentStore(bot.deps.redis, s.key_prefix))
    try:
        await _gcp(bot, "0.nap")
        assert await drained(bot)
        [h] = incident_headers(slack)
        inc_id = _inc_id(h)
        await life.act(inc_id, "snooze", "UCAROL", utcnow(), snooze="15m")
        assert await drained(bot)
        for i in range(4):  # re-notifications (a later start each, so not deduplicated as webhook retries)
            await _gcp(bot, "0.nap", started_at=START + 60 * (i + 1))
        assert await drained(bot)
        assert not [m for m in replies(slack, h["ts"]) if "firings" in text_of(m) or "Still firing" in text_of(m)]
        assert await life.wake_due(utcnow() + timedelta(minutes=5)) == []  # not yet
        assert await life.wake_due(utcnow() + timedelta(minutes=16)) == [inc_id]  # the injected time: it ended
        assert await drained(bot)
    finally:
        await close(bot)
    texts = [text_of(m) for m in replies(slack, h["ts"])]
    [woke] = [t for t in texts if "Awake again" in t]
    assert "the snooze ended" in woke and "+4 firings" in woke  # the held repeats, one coalesced line


async def test_resolve_while_firing_says_so_and_a_refire_reopens_it(
    settings: Settings, redis_client: Any, slack: PostsSlack, clock: ScaledClock
) -> None:
    s = tuned(settings, alert_group_window_s=1800)
    bot = await start(s, clock)
    life = IncidentLifecycle(IncidentStore(bot.deps.redis, s.key_prefix))
    try:
        await _gcp(bot, "0.hand")
        assert await drained(bot)
        [h] = incident_headers(slack)
        inc_id = _inc_id(h)
        with pytest.raises(ActionRefused):  # a resolve needs a note; nothing changes
            await life.act(inc_id, "resolve", "UDAN", utcnow(), note="  ")
        with pytest.raises(ActionRefused):
            await life.act("inc-nope", "ack", "UDAN", utcnow())
        await life.act(inc_id, "resolve", "UDAN", utcnow(), note="rolled back by hand")
        assert await drained(bot)
        assert "RESOLVED (alert still firing)" in _shown(slack, h)
        [row] = await life.listed()
        assert row.status == "resolved" and "(alert still firing)" in incident_row(Reply(title=""), row)
        # Cloud Monitoring closes the old alert and opens a new one for the condition, here back to back: queue
        # workers run concurrently and may apply them in either order, with the same outcome
        # (tests/test_incident_refire_order.py pins both orders).
        await _gcp(bot, "0.hand", "closed")
        await _gcp(bot, "0.again", started_at=START + 3600)  # the condition fires again within the window
        assert await drained(bot)
    finally:
        await close(bot)
    texts = [text_of(m) for m in replies(slack, h["ts"])]
    assert any("Resolved by" in t and "still firing" in t and "rolled back by hand" in t for t in texts)
    assert any("manual resolve no longer stands" in t for t in texts)
    assert "FIRING" in _shown(slack, h) and incident_headers(slack) == [h]


async def test_the_buttons_and_the_resolve_form_record_who_and_refuse_a_bad_click(
    settings: Settings, redis_client: Any, slack: PostsSlack, clock: ScaledClock
) -> None:
    bot = await start(settings, clock)
    try:
        await _gcp(bot, "0.form")
        assert await drained(bot)
        [h] = incident_headers(slack)
        inc_id = _inc_id(h)
        assert await click(bot, slack, h, "gemma_inc_ack", inc_id, user="UERIN") == (None, ANY)
        refused, _ = await click(bot, slack, h, "gemma_inc_snooze_2d", inc_id)
        assert refused is not None and refused.ephemeral and "Unknown snooze" in refused.title
        gone, _ = await click(bot, slack, h, "gemma_inc_own", "inc-missing")
        assert gone is not None and "names incident inc-missing" in gone.title and "nothing changed" in gone.title
        _, responder = await click(bot, slack, h, "gemma_inc_resolve", inc_id)
        [modal] = responder.modals
        meta = modal["private_metadata"]
        empty = ActionContext(deps=bot.deps, responder=responder, user_id="UERIN", channel_id="C1",
                              action_id="gemma_inc_resolve_submit", value=meta, form={"note": " "})  # fmt: skip
        assert await check_resolve(empty) == {"note": "Say what fixed it, or why it is closed."}
        done, _ = await click(bot, slack, h, "gemma_inc_resolve_submit", meta, "UFRAN", {"note": "rolled back"})
        assert done is None
        assert await drained(bot)
    finally:
        await close(bot)
    inc = await IncidentLifecycle(IncidentStore(bot.deps.redis, settings.key_prefix)).find(inc_id)
    assert inc is not None and inc.life.acked_by == "UERIN" and inc.life.resolved_by == "UFRAN"
    assert [r.action for r in inc.life.log] == ["ack", "resolve"]  # the refused clicks changed nothing
    assert "<@UFRAN>" in _shown(slack, h) and "rolled back" in _shown(slack, h)

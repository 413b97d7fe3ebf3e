"""Closure (issue 24): an incident resolves when its alerts resolve; a fix confirmed from its thread is followed
up; a re-fire after the resolve reopens the incident within `alert_group_window_s`, and opens a new one (with
its own investigation) after it. Through the webhook, the queue, the publisher and the Slack stand-in, on the
test's scaled clock."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.sandbox.server import serve
from bot.settings import Settings
from handlers.reply import Reply
from skills.clock import ScaledClock
from skills.incidents.model import Alert, Fix, Incident, utcnow
from skills.incidents.store import IncidentStore
from tests.alerts_fixtures import PostsSlack, basic, eventually, gcp_alert, tuned
from tests.test_incidents_storm import close, drained, incident_headers, replies, start, text_of

REVISION = "vllm-gemma4-00006-78w"  # the example payload's resource


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
    """The header as it reads now: its latest edit, or as posted."""
    edits = [u for u in slack.of("chat.update") if u.get("ts") == header["ts"]]
    return text_of(edits[-1] if edits else header)


def _investigations() -> tuple[list[str], Any]:
    calls: list[str] = []

    async def investigate(inc: Incident, alert: Alert) -> AsyncIterator[Reply]:
        calls.append(inc.id)
        yield Reply(title=f"Findings for {alert.fingerprint}")

    return calls, investigate


async def _gcp(bot: Any, incident_id: str, state: str = "open", started_at: int = 1795183200) -> None:
    body = gcp_alert(incident_id, state=state, started_at=started_at)
    if state == "closed":
        body["incident"]["ended_at"] = started_at + 600
    r = await bot.client.post("/alerts/gcp", json=body, headers=basic())
    assert r.status_code == 202, r.text


async def test_a_refire_within_the_window_reopens_the_incident(
    settings: Settings, redis_client: Any, slack: PostsSlack, clock: ScaledClock
) -> None:
    """The rule: the same condition (policy, condition, revision) firing again under a new Cloud Monitoring
    incident id within alert_group_window_s of the resolve is the same failure coming back: the thread reopens
    (header FIRING again, a "Fired again" line), no second investigation."""
    calls, investigate = _investigations()
    bot = await start(tuned(settings, alert_group_window_s=1800), clock, investigate)
    try:
        await _gcp(bot, "0.first")
        await _gcp(bot, "0.first", "closed")
        assert await drained(bot)
        [h] = incident_headers(slack)
        assert "RESOLVED" in _shown(slack, h)
        await _gcp(bot, "0.second", started_at=1795183200 + 3600)  # Cloud Monitoring's new incident id
        assert await drained(bot)
    finally:
        await close(bot)
    assert incident_headers(slack) == [h]  # the same thread
    assert "FIRING" in _shown(slack, h)
    assert "Fired again: *vLLM p95 latency high*" in text_of(replies(slack, h["ts"])[-1])
    assert len(calls) == 1


async def test_a_refire_after_the_window_opens_a_new_incident_with_its_own_investigation(
    settings: Settings, redis_client: Any, slack: PostsSlack, clock: ScaledClock
) -> None:
    calls, investigate = _investigations()
    bot = await start(tuned(settings, alert_group_window_s=0), clock, investigate)  # the window has passed
    try:
        await _gcp(bot, "0.first")
        await _gcp(bot, "0.first", "closed")
        assert await drained(bot)
        await _gcp(bot, "0.second", started_at=1795183200 + 3600)
        assert await drained(bot)
    finally:
        await close(bot)
    first, second = incident_headers(slack)
    assert "FIRING" in text_of(second) and first["ts"] != second["ts"]
    assert len(calls) == 2 and len(set(calls)) == 2  # each incident its own investigation
    assert text_of(replies(slack, second["ts"])[0]).startswith("Findings for 0.second")


async def test_a_fix_that_does_not_clear_the_condition_is_followed_up_then_its_resolve_credits_it(
    settings: Settings, redis_client: Any, slack: PostsSlack, clock: ScaledClock, caplog: pytest.LogCaptureFixture
) -> None:
    s = tuned(settings, alert_fix_check_s=600)
    bot = await start(s, clock)
    store = IncidentStore(bot.deps.redis, s.key_prefix)
    try:
        await _gcp(bot, "0.fixme")
        assert await drained(bot)
        [h] = incident_headers(slack)
        found = re.search(r"incident (inc-[0-9-]+)", text_of(h))
        assert found
        inc_id = found.group(1)
        # What the write flow records when a redeploy confirmed from this thread completes (skills/deploy/flow.py):
        # its revision serves all traffic, since before the alert closes (started_at + 600 below).
        fix = Fix(action="redeploy `vllm-gemma4`", revision="vllm-gemma4-00007-abc", by="U1", at=utcnow(),
                  serving=100, serving_since=_at(1795183200 + 300))  # fmt: skip
        assert await store.record_fix(inc_id, fix, fix.at)
        assert await drained(bot)
        assert not [m for m in replies(slack, h["ts"]) if "fix applied" in text_of(m)]  # not before its time
        clock.advance(600)
        line = await eventually(lambda: [m for m in replies(slack, h["ts"]) if "fix applied" in text_of(m)])
        assert line, "no follow-up after alert_fix_check_s"
        assert "condition still firing after 10 min" in text_of(line[0])
        await _gcp(bot, "0.fixme", "closed")
        assert await drained(bot)
    finally:
        await close(bot)
    texts = [text_of(m) for m in replies(slack, h["ts"])]
    assert sum("fix applied" in t for t in texts) == 1  # once per fix
    assert any("Incident resolved" in t for t in texts)
    assert any(
        "fixed by redeploy `vllm-gemma4` at" in t
        and "revision `vllm-gemma4-00007-abc` serving 100% of traffic, condition cleared" in t
        for t in texts
    )
    assert "RESOLVED" in _shown(slack, h) and "Fix" in _shown(slack, h)
    assert not [r.getMessage() for r in caplog.records if "unexpected error" in r.getMessage()]


async def test_a_fix_recorded_after_the_condition_cleared_is_credited_at_once(
    settings: Settings, redis_client: Any, slack: PostsSlack, clock: ScaledClock
) -> None:
    """The close can arrive before the write reports back (the revision is ready before the deploy's last poll):
    the follow-up goes out at once, not after the coalescing interval."""
    s = tuned(settings, alert_coalesce_interval_s=3600)
    bot = await start(s, clock)
    store = IncidentStore(bot.deps.redis, s.key_prefix)
    try:
        await _gcp(bot, "0.early")
        assert await drained(bot)
        [h] = incident_headers(slack)
        await _gcp(bot, "0.early", "closed")
        assert await eventually(lambda: [m for m in replies(slack, h["ts"]) if "Incident resolved" in text_of(m)])
        found = re.search(r"incident (inc-[0-9-]+)", text_of(h))
        assert found
        # Its revision began serving before the close (whole seconds: the close's own second counts).
        fix = Fix(action="redeploy `vllm-gemma4`", revision="vllm-gemma4-00008-def", at=utcnow(), serving=100,
                  serving_since=_at(1795183200 + 600, -0.5))  # fmt: skip
        assert await store.record_fix(found.group(1), fix, fix.at)
        assert await drained(bot, timeout=5)  # no clock advance: the line is not held for the interval
    finally:
        await close(bot)
    last = text_of(replies(slack, h["ts"])[-1])
    assert "fixed by redeploy `vllm-gemma4` at" in last
    assert "`vllm-gemma4-00008-def` serving 100% of traffic, condition cleared" in last


async def test_a_fix_serving_only_after_the_close_or_serving_no_traffic_is_not_what_fixed_it(
    settings: Settings, redis_client: Any, slack: PostsSlack, clock: ScaledClock
) -> None:
    """Resolution follows the alert's close when the fix's revision served only after it (another revision cleared
    the condition), and a fix whose revision takes no traffic fixes nothing: neither says "fixed by"."""
    # Two failures of one condition, each its own incident (no grouping window), as two revisions' failures are.
    s = tuned(settings, alert_coalesce_interval_s=0, alert_group_window_s=0)
    bot = await start(s, clock)
    store = IncidentStore(bot.deps.redis, s.key_prefix)
    try:
        await _gcp(bot, "0.late")
        await _gcp(bot, "0.idle", started_at=1795183200 + 60)
        assert await drained(bot)
        late_h, idle_h = incident_headers(slack)
        ids = [re.search(r"incident (inc-[0-9-]+)", text_of(h)) for h in (late_h, idle_h)]
        assert all(ids)
        await _gcp(bot, "0.late", "closed")  # closed at started_at + 600
        assert await drained(bot)
        late = Fix(action="redeploy `vllm-gemma4`", revision="vllm-gemma4-00009-aaa", at=utcnow(), serving=100,
                   serving_since=_at(1795183200 + 900))  # fmt: skip
        idle = Fix(action="redeploy `vllm-gemma4`", revision="vllm-gemma4-00010-bbb", at=utcnow(), serving=0,
                   serving_since=_at(1795183200 + 120))  # fmt: skip
        assert await store.record_fix(ids[0].group(1), late, late.at)  # type: ignore[union-attr]
        assert await store.record_fix(ids[1].group(1), idle, idle.at)  # type: ignore[union-attr]
        assert await drained(bot, timeout=5)
        await _gcp(bot, "0.idle", "closed", started_at=1795183200 + 60)  # the alert closes anyway
        assert await drained(bot)
    finally:
        await close(bot)
    late_lines = [text_of(m) for m in replies(slack, late_h["ts"])]
    idle_lines = [text_of(m) for m in replies(slack, idle_h["ts"])]
    assert not any("fixed by" in t for t in late_lines + idle_lines), late_lines + idle_lines
    assert any(
        "`vllm-gemma4-00009-aaa` serving 100% of traffic, after the incident resolved: its alert closed at" in t
        for t in late_lines
    ), late_lines
    assert any("`vllm-gemma4-00010-bbb` is ready but serves no traffic: it fixes nothing yet" in t for t in idle_lines)
    assert any("Incident resolved" in t for t in idle_lines)
    assert "(after the alert closed)" in _shown(slack, late_h)
    assert "(its revision serves no traffic)" in _shown(slack, idle_h)


def _at(epoch: float, minus_s: float = 0.0) -> datetime:
    return datetime.fromtimestamp(epoch - minus_s, UTC)

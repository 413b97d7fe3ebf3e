"""One alert id, several runs, as the Slack thread shows them: webhook -> queue -> worker -> publisher -> Slack.

The rule (Incident._fold, skills/incidents/model.py): a firing notice for the alert id (source + fingerprint)
whose run already resolved is a late retry when it carries that run's start, and news (the alert fired again)
when it carries a later start; a resolve carrying an earlier run's start resolves that earlier run, not the one
firing now. Alertmanager keeps an alert's fingerprint across runs (the hash of its labels) and gives each run its
own startsAt; Cloud Monitoring redelivers a notification with the same incident_id and started_at.

Every alert here finds its own incident (IncidentStore._find, skills/incidents/store.py): a resolve always does,
and a firing one does while the incident is active, i.e. within alert_group_window_s (three hours here) of its
last news. So the thread's outcome is _fold's decision on the existing member, not a new incident's.

A retry that comes back with a notification already seen is dropped by the queue's dedup key for
max(alert_group_window_s, 300) s (bot/alert_queue.py) before any worker sees it; the late retries below arrive
after that: `dedup_window_passed` removes the dedup keys, as their TTL would (the only stand-in for time here).
Model-level cases of the same rule are in tests/test_incident_alert_runs.py. The last test is about a late
redelivery that comes after the window: the store still hands it to its own incident, so it opens nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bot.settings import Settings
from skills.clock import ScaledClock
from skills.incidents.model import Alert, Change
from skills.incidents.store import IncidentStore
from tests.alerts_fixtures import PostsSlack, basic, bearer, gcp_alert, tuned
from tests.test_incidents_storm import (  # noqa: F401  (the scaled clock, the rate-limited Slack)
    Instance,
    clock,
    close,
    drained,
    incident_headers,
    replies,
    slack,
    start,
    text_of,
)

FINGERPRINT = "b71e04c9d2a35f86"
ALERTNAME = "VLLMKVCacheNearlyFull"
RUN1 = "2026-11-21T09:10:00Z"
RUN2 = "2026-11-21T11:55:00Z"
WINDOW_S = 3 * 3600  # every notice below comes within it: the alert's own incident is still the place for news


def _am(status: str, starts: str) -> dict[str, Any]:
    """Alertmanager's webhook (v4) for one run of one alert: same labels, so the same fingerprint every run."""
    ends = (datetime.fromisoformat(starts) + timedelta(minutes=20)).isoformat().replace("+00:00", "Z")
    return {
        "version": "4",
        "status": status,
        "receiver": "gemma-sre",
        "groupKey": '{}:{alertname="VLLMKVCacheNearlyFull"}',
        "truncatedAlerts": 0,
        "alerts": [
            {
                "status": status,
                "labels": {"alertname": ALERTNAME, "service": "vllm-gemma4", "severity": "warning"},
                "annotations": {"summary": "KV cache usage above 95% on vllm-gemma4"},
                "startsAt": starts,
                "endsAt": ends if status == "resolved" else "0001-01-01T00:00:00Z",
                "fingerprint": FINGERPRINT,
            }
        ],
    }


async def _alertmanager(bot: Instance, status: str, starts: str) -> None:
    r = await bot.client.post("/alerts/alertmanager", json=_am(status, starts), headers=bearer())
    assert r.status_code == 202, r.text
    assert r.json()["new"] == 1, r.text  # queued for a worker, not dropped as a duplicate
    assert await drained(bot)


async def _gcp(bot: Instance, body: dict[str, Any]) -> None:
    r = await bot.client.post("/alerts/gcp", json=body, headers=basic())
    assert r.status_code == 202, r.text
    assert r.json()["new"] == 1, r.text  # queued for a worker, not dropped as a duplicate
    assert await drained(bot)


async def dedup_window_passed(bot: Instance) -> None:
    """The dedup keys of every notification so far expire (their TTL is minutes; this test does not wait)."""
    r = bot.deps.redis
    seen = [k async for k in r.scan_iter(match=bot.deps.settings.key("alerts", "seen", "*"), count=1000)]
    assert seen, "the queue keeps a dedup key per notification"
    await r.delete(*seen)


def _header_now(standin: PostsSlack, header: dict[str, Any]) -> str:
    """What the incident's header says now: its latest accepted edit, else as posted."""
    edits = [m for m in standin.accepted if m["_method"] == "chat.update" and m.get("ts") == header["ts"]]
    return text_of(edits[-1] if edits else header)


def _lines(standin: PostsSlack, header: dict[str, Any]) -> list[str]:
    return [text_of(m) for m in replies(standin, header["ts"])]


async def test_the_same_alertmanager_alert_firing_again_with_a_later_start_reopens_its_thread(
    settings: Settings,
    redis_client: Any,
    slack: PostsSlack,  # noqa: F811
    clock: ScaledClock,  # noqa: F811
) -> None:
    bot = await start(tuned(settings, alert_group_window_s=WINDOW_S), clock)
    try:
        await _alertmanager(bot, "firing", RUN1)
        await _alertmanager(bot, "resolved", RUN1)
        [h] = incident_headers(slack)
        assert "RESOLVED" in _header_now(slack, h)
        await _alertmanager(bot, "firing", RUN2)  # path: _find -> own incident (active) -> _fold: newer start
    finally:
        await close(bot)
    assert incident_headers(slack) == [h]  # the same thread, no second one
    assert "FIRING" in _header_now(slack, h) and "RESOLVED" not in _header_now(slack, h)
    last = _lines(slack, h)[-1]
    assert f"Fired again: *{ALERTNAME}* at 2026-11-21 11:55 UTC" in last  # the new run, with its own start


async def test_a_late_redelivery_of_a_closed_cloud_monitoring_incidents_open_notice_reopens_nothing(
    settings: Settings,
    redis_client: Any,
    slack: PostsSlack,  # noqa: F811
    clock: ScaledClock,  # noqa: F811
) -> None:
    """Cloud Monitoring's open notice for incident 0.kv-late, redelivered after its close (a webhook retry, a
    Pub/Sub redelivery): the same incident_id and started_at, so the run that already resolved. Not news."""
    bot = await start(tuned(settings, alert_group_window_s=WINDOW_S), clock)
    try:
        await _gcp(bot, gcp_alert("0.kv-late"))
        await _gcp(bot, gcp_alert("0.kv-late", state="closed"))
        [h] = incident_headers(slack)
        assert "RESOLVED" in _header_now(slack, h)
        header_before, lines_before = _header_now(slack, h), _lines(slack, h)
        posted_before = len(slack.accepted)
        await dedup_window_passed(bot)
        await _gcp(bot, gcp_alert("0.kv-late"))  # path: _find -> own incident (active) -> _fold: same start
    finally:
        await close(bot)
    assert incident_headers(slack) == [h]
    assert _header_now(slack, h) == header_before  # still green: RESOLVED, unedited
    assert _lines(slack, h) == lines_before and not any("Fired again" in line for line in _lines(slack, h))
    assert len(slack.accepted) == posted_before  # nothing at all reached Slack for the retry


async def test_an_earlier_runs_late_resolve_leaves_the_later_run_firing_until_its_own_resolve(
    settings: Settings,
    redis_client: Any,
    slack: PostsSlack,  # noqa: F811
    clock: ScaledClock,  # noqa: F811
) -> None:
    bot = await start(tuned(settings, alert_group_window_s=WINDOW_S), clock)
    try:
        await _alertmanager(bot, "firing", RUN1)
        await _alertmanager(bot, "resolved", RUN1)
        await _alertmanager(bot, "firing", RUN2)
        [h] = incident_headers(slack)
        assert "FIRING" in _header_now(slack, h)
        lines_before = _lines(slack, h)
        assert "Fired again" in lines_before[-1]
        await dedup_window_passed(bot)
        # Run 1's resolve, delivered again after run 2 fired: path _find -> own incident (a resolve always finds
        # it) -> _fold: the member fires with run 2's start, and this resolve names run 1's.
        await _alertmanager(bot, "resolved", RUN1)
        assert "FIRING" in _header_now(slack, h) and "RESOLVED" not in _header_now(slack, h)
        assert _lines(slack, h) == lines_before  # no "Resolved" line for the run that is still firing
        await _alertmanager(bot, "resolved", RUN2)  # run 2's own resolve closes it
    finally:
        await close(bot)
    assert incident_headers(slack) == [h]
    assert "RESOLVED" in _header_now(slack, h)
    assert f"Resolved: *{ALERTNAME}*" in _lines(slack, h)[-1]


def _kv(fingerprint: str, state: str, starts: str) -> Alert:
    """One alert of the KV-cache condition on vllm-gemma4, as the Alertmanager parser makes it."""
    return Alert(
        source="alertmanager",
        fingerprint=fingerprint,
        state=state,  # type: ignore[arg-type]
        name=ALERTNAME,
        service="vllm-gemma4",
        severity="warning",
        started_at=datetime.fromisoformat(starts),
        ended_at=datetime.fromisoformat(starts) + timedelta(minutes=20) if state == "resolved" else None,
    )


async def test_a_late_redelivery_after_the_grouping_window_opens_nothing_and_joins_no_other_thread(
    redis_client: Any, key_prefix: str
) -> None:
    """Run 1 of alert A fired and resolved; a window later another alert of the same condition (B) opened a new
    thread; then A's run-1 firing notice is delivered again. It is A's resolved run: stale in A's own incident
    (IncidentStore._find hands a run its incident holds to that incident whatever the window, and _fold says
    stale), not a new thread, and not a member of B's thread (which it would keep firing for ever)."""
    store = IncidentStore(redis_client, key_prefix)
    window = 600
    t0 = datetime(2026, 11, 21, 9, 35, tzinfo=UTC)
    later = t0 + timedelta(seconds=window + 60)

    async def record(entry: str, alert: Alert, at: datetime) -> tuple[str, Change]:
        inc, change = await store.record(
            entry, alert, at, channel="C1", known=frozenset({"vllm-gemma4"}), window_s=window
        )
        return inc.id, change

    first, _ = await record("1-0", _kv("fp-a", "firing", RUN1), t0)
    assert await record("2-0", _kv("fp-a", "resolved", RUN1), t0) == (first, Change.RESOLVED)
    second, change = await record("3-0", _kv("fp-b", "firing", RUN2), later)
    assert change is Change.OPENED and second != first  # the window had passed: a thread of its own
    assert await record("4-0", _kv("fp-a", "firing", RUN1), later + timedelta(seconds=1)) == (first, Change.STALE)
    # A third alert of the condition still joins B's thread: the stale notice re-pointed nothing.
    assert await record("5-0", _kv("fp-c", "firing", RUN2), later + timedelta(seconds=2)) == (second, Change.JOINED)
    a, b = await store.load(first), await store.load(second)
    assert a is not None and b is not None
    assert a.state == "resolved" and sorted(b.members) == ["alertmanager:fp-b", "alertmanager:fp-c"]
    assert await redis_client.zcard(store.k_index) == 2  # two incidents, no third

"""One alert id, several runs. Alertmanager keeps an alert's fingerprint across runs (it is the hash of its
labels) and gives each run its own startsAt, so the same alert id firing again after it resolved is a new run of
the failure: it pages again. A late retry of the old run's firing, or an old run's resolve arriving after a newer
run fired, is not news and changes nothing. (issue 44: the only re-fire test used a different alert id.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.settings import Settings
from skills.clock import ScaledClock
from skills.incidents.model import Alert, Change, new_incident
from skills.incidents.store import IncidentStore
from tests.alerts_fixtures import PostsSlack, bearer, tuned
from tests.test_incidents_storm import clock, close, drained, incident_headers, replies, slack, start, text_of  # noqa: F401  (the scaled clock, the rate-limited Slack)

FINGERPRINT = "4f1c9a3be7d20f55"
RUN1 = "2026-11-20T14:05:00Z"
RUN2 = "2026-11-20T16:40:00Z"


def _am(status: str, starts: str) -> dict[str, Any]:
    """Alertmanager's webhook (v4) for one alert of one run: same labels, so the same fingerprint every run."""
    ends = (datetime.fromisoformat(starts) + timedelta(minutes=25)).isoformat().replace("+00:00", "Z")
    return {
        "version": "4",
        "status": status,
        "receiver": "gemma-sre",
        "groupKey": '{}:{alertname="VLLMKVCacheNearlyFull"}',
        "truncatedAlerts": 0,
        "alerts": [
            {
                "status": status,
                "labels": {"alertname": "VLLMKVCacheNearlyFull", "service": "vllm-gemma4", "severity": "warning"},
                "annotations": {"summary": "KV cache usage above 95% on vllm-gemma4"},
                "startsAt": starts,
                "endsAt": ends if status == "resolved" else "0001-01-01T00:00:00Z",
                "fingerprint": FINGERPRINT,
            }
        ],
    }


def _shown(standin: PostsSlack, header: dict[str, Any]) -> str:
    edits = [u for u in standin.of("chat.update") if u.get("ts") == header["ts"]]
    return text_of(edits[-1] if edits else header)


async def test_the_same_alert_firing_again_after_it_resolved_pages_again(
    settings: Settings,
    redis_client: Any,
    slack: PostsSlack,  # noqa: F811
    clock: ScaledClock,  # noqa: F811
) -> None:
    # Within the grouping window the alert finds its resolved incident (IncidentStore._find), so the fold decides.
    bot = await start(tuned(settings, alert_group_window_s=3 * 3600), clock)
    try:
        for body in (_am("firing", RUN1), _am("resolved", RUN1)):
            r = await bot.client.post("/alerts/alertmanager", json=body, headers=bearer())
            assert r.status_code == 202, r.text
        assert await drained(bot)
        [h] = incident_headers(slack)
        assert "RESOLVED" in _shown(slack, h)
        r = await bot.client.post("/alerts/alertmanager", json=_am("firing", RUN2), headers=bearer())
        assert r.status_code == 202, r.text
        assert await drained(bot)
    finally:
        await close(bot)
    assert incident_headers(slack) == [h]  # the same thread, reopened
    assert "FIRING" in _shown(slack, h)
    assert "Fired again" in text_of(replies(slack, h["ts"])[-1])


def _alert(state: str, starts: str, ends: str | None = None) -> Alert:
    return Alert(
        source="alertmanager",
        fingerprint=FINGERPRINT,
        state=state,  # type: ignore[arg-type]
        name="VLLMKVCacheNearlyFull",
        service="vllm-gemma4",
        severity="warning",
        started_at=datetime.fromisoformat(starts),
        ended_at=datetime.fromisoformat(ends) if ends else None,
    )


NOW = datetime(2026, 11, 20, 17, 0, tzinfo=UTC)


def test_a_late_retry_of_the_resolved_runs_firing_changes_nothing() -> None:
    first = _alert("firing", RUN1)
    inc = new_incident("1-0", first, "C1", True, NOW)
    inc.apply("1-0", first, NOW)
    inc.apply("2-0", _alert("resolved", RUN1, "2026-11-20T14:30:00Z"), NOW)
    rev = inc.rev
    assert inc.apply("3-0", _alert("firing", RUN1), NOW) is Change.STALE
    assert inc.state == "resolved" and inc.rev == rev
    assert not [e for e in inc.events if e.kind == "refired"]


def test_a_new_run_of_the_same_alert_reopens_with_its_own_start() -> None:
    first = _alert("firing", RUN1)
    inc = new_incident("1-0", first, "C1", True, NOW)
    inc.apply("1-0", first, NOW)
    inc.apply("2-0", _alert("resolved", RUN1, "2026-11-20T14:30:00Z"), NOW)
    assert inc.apply("3-0", _alert("firing", RUN2), NOW) is Change.REFIRED
    assert inc.state == "firing"
    assert inc.members[f"alertmanager:{FINGERPRINT}"].started_at == datetime.fromisoformat(RUN2)


def test_an_earlier_runs_resolve_does_not_close_the_later_run() -> None:
    first = _alert("firing", RUN1)
    inc = new_incident("1-0", first, "C1", True, NOW)
    inc.apply("1-0", first, NOW)
    inc.apply("2-0", _alert("resolved", RUN1, "2026-11-20T14:30:00Z"), NOW)
    inc.apply("3-0", _alert("firing", RUN2), NOW)
    # Run 1's resolve delivered again (a retry after the dedup window) arrives after run 2 fired.
    assert inc.apply("4-0", _alert("resolved", RUN1, "2026-11-20T14:30:00Z"), NOW) is Change.STALE
    assert inc.state == "firing"
    # Run 2's own resolve closes it.
    assert inc.apply("5-0", _alert("resolved", RUN2, "2026-11-20T17:05:00Z"), NOW) is Change.RESOLVED
    assert inc.state == "resolved"


def test_a_second_resolve_of_the_same_run_is_not_news() -> None:
    first = _alert("firing", RUN1)
    inc = new_incident("1-0", first, "C1", True, NOW)
    inc.apply("1-0", first, NOW)
    assert inc.apply("2-0", _alert("resolved", RUN1, "2026-11-20T14:30:00Z"), NOW) is Change.RESOLVED
    later = NOW + timedelta(minutes=30)
    assert inc.apply("3-0", _alert("resolved", RUN1, "2026-11-20T14:30:00Z"), later) is Change.STALE
    assert inc.last_event_at == NOW  # a stale resolve does not keep the incident's grouping window open


def _other(fingerprint: str, starts: str) -> Alert:
    """Another alert of the same condition on the same service (another replica, another Cloud Monitoring id)."""
    return _alert("firing", starts).model_copy(update={"fingerprint": fingerprint})


@pytest.mark.parametrize(("window_s", "joins"), [(600, True), (1, True), (0, False)])
async def test_the_grouping_window_decides_whether_a_new_alert_joins_a_firing_incident(
    redis_client: Any, key_prefix: str, window_s: int, joins: bool
) -> None:
    """alert_group_window_s > 0: a new alert of the condition joins the service's active incident (firing, or
    quiet for less than the window); 0 turns grouping off, so it opens its own."""
    store = IncidentStore(redis_client, key_prefix)
    first, _ = await store.record(
        "1-0", _alert("firing", RUN1), NOW, channel="C1", known=frozenset(), window_s=window_s
    )
    second, change = await store.record(
        "2-0", _other("9a8b7c6d5e4f3a21", RUN1), NOW, channel="C1", known=frozenset(), window_s=window_s
    )
    assert (second.id == first.id) is joins
    assert change is (Change.JOINED if joins else Change.OPENED)


def test_a_firing_incident_stays_the_place_for_news_however_long_it_fires() -> None:
    first = _alert("firing", RUN1)
    inc = new_incident("1-0", first, "C1", True, NOW)
    inc.apply("1-0", first, NOW)
    assert inc.active(NOW + timedelta(days=2), 600)
    inc.apply("2-0", _alert("resolved", RUN1, "2026-11-20T14:30:00Z"), NOW)
    assert inc.active(NOW + timedelta(seconds=599), 600) and not inc.active(NOW + timedelta(seconds=601), 600)

"""What counts as the same alert: a webhook retry or repeat of one firing is a duplicate; the same alert firing
again later (a new start) is news, and so is its resolve."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.alert_queue import AlertQueue
from bot.settings import Settings
from skills.incidents.model import Alert
from tests.alerts_fixtures import make_deps


def _alert(**kw: Any) -> Alert:
    fields: dict[str, Any] = {"source": "alertmanager", "fingerprint": "fp1", "state": "firing", "name": "KVCacheFull"}
    fields.update(kw)
    return Alert(**fields)


def test_the_dedup_key_tells_a_new_firing_from_a_repeat() -> None:
    t1 = datetime(2026, 11, 20, 14, 5, tzinfo=UTC)
    t2 = datetime(2026, 11, 20, 16, 0, tzinfo=UTC)
    first = _alert(started_at=t1)
    assert _alert(started_at=t1, summary="reworded").dedup_key() == first.dedup_key()  # a repeat
    assert _alert(started_at=t2).dedup_key() != first.dedup_key()  # fired again later: news
    assert _alert(started_at=t1, state="resolved").dedup_key() != first.dedup_key()
    assert _alert(started_at=t1, fingerprint="fp2").dedup_key() != first.dedup_key()
    assert _alert(started_at=t1, source="gcp").dedup_key() != first.dedup_key()
    assert _alert().dedup_key() != first.dedup_key()  # no start given is not the same as this start


async def test_enqueue_of_nothing_counts_nothing(settings: Settings, redis_client: Any) -> None:
    deps = make_deps(settings)
    try:
        queue = AlertQueue(deps)
        assert await queue.enqueue([]) == (0, 0)
        t = datetime(2026, 11, 20, 14, 5, tzinfo=UTC)
        assert await queue.enqueue([_alert(started_at=t), _alert(started_at=t)]) == (1, 1)
    finally:
        await deps.redis.aclose()

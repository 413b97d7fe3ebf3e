"""One timestamp parser (the standard library's): the bot's log reader and the Logging stand-in's filter agree."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from bot.sandbox.logging_filter import FilterError, parse_ts
from skills.logs.fetch import entry_from_api
from skills.timestamps import parse_timestamp

CASES = {
    # Cloud Logging's nanoseconds: truncated to microseconds, never rounded up into the next one.
    "2026-05-01T12:00:07.123456789Z": datetime(2026, 5, 1, 12, 0, 7, 123456, UTC),
    "2026-05-01T12:00:07Z": datetime(2026, 5, 1, 12, 0, 7, tzinfo=UTC),
    "2026-05-01T12:00:07.5+02:00": datetime(2026, 5, 1, 12, 0, 7, 500000, timezone(timedelta(hours=2))),
    "2026-05-01T12:00:07,25Z": datetime(2026, 5, 1, 12, 0, 7, 250000, UTC),  # ISO's comma decimal mark
    "2026-05-01T12:00:07.999999999": datetime(2026, 5, 1, 12, 0, 7, 999999, UTC),  # no zone: UTC
}


@pytest.mark.parametrize(("raw", "want"), CASES.items())
def test_bot_and_stand_in_parse_the_same_instant(raw: str, want: datetime) -> None:
    assert parse_timestamp(raw) == want
    assert parse_ts(raw) == want
    assert entry_from_api({"timestamp": raw, "textPayload": "x"}).timestamp == want


def test_not_a_timestamp() -> None:
    assert entry_from_api({"timestamp": "yesterday", "textPayload": "x"}).timestamp is None
    with pytest.raises(FilterError):
        parse_ts("2026-13-01T00:00:00Z")

"""The one duration formatter (two named precisions) and the one parser for durations users type."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from skills.durations import format_duration, parse_duration
from skills.errors import InvalidInput
from skills.logs.fetch import parse_since


@pytest.mark.parametrize(
    ("seconds", "exact", "approx"),
    [
        (0, "0s", "0 s"),
        (5.9, "5s", "6 s"),
        (59, "59s", "59 s"),
        (65, "1m 05s", "65 s"),
        (119, "1m 59s", "119 s"),
        (120, "2m 00s", "2 min"),
        (187, "3m 07s", "3 min"),
        (840, "14m 00s", "14 min"),
        (3900, "1h 05m", "65 min"),
        (7199, "1h 59m", "120 min"),
        (7200, "2h 00m", "2 h"),
        (9000, "2h 30m", "2.5 h"),
        (-3, "0s", "0 s"),  # a clock step backwards never shows a negative duration
    ],
)
def test_format_duration(seconds: float, exact: str, approx: str) -> None:
    assert format_duration(seconds) == exact
    assert format_duration(seconds, "approx") == approx
    assert format_duration(timedelta(seconds=seconds)) == exact


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("2h", 7200), ("1d", 86400), ("1.5h", 5400), (" 2H ", 7200), ("45", 2700)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


_BAD = [("forever", "Cannot read"), ("", "Cannot read"), ("0m", "out of range"), ("31d", "out of range"),
        ("-5m", "out of range"), ("nan", "out of range")]  # fmt: skip


@pytest.mark.parametrize(("text", "words"), _BAD)
def test_parse_duration_rejects_what_it_cannot_read(text: str, words: str) -> None:
    with pytest.raises(InvalidInput, match=words):
        parse_duration(text)


def test_parse_since_is_that_long_ago() -> None:
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert parse_since("30m", now) == now - timedelta(minutes=30)

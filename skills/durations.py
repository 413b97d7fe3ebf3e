"""Durations, both ways: the one formatter every surface uses, and the one parser for what users type.

Two precisions, because surfaces need them: `exact` for things that happened (an incident lasted
"1h 05m", a deploy took "3m 07s"), `approx` for estimates and windows ("~14 min" cold start, "45 s").
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from skills.errors import InvalidInput

Precision = Literal["exact", "approx"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_TYPED_S = 30 * 86400  # the longest window a user may ask for (Cloud Logging keeps 30 days by default)


def format_duration(value: float | timedelta, precision: Precision = "exact") -> str:
    """exact: '45s', '3m 07s', '1h 05m' (two units, truncated). approx: '45 s', '14 min', '2.5 h' (one unit,
    rounded; seconds below 2 minutes, minutes below 2 hours)."""
    s = value.total_seconds() if isinstance(value, timedelta) else float(value)
    s = max(0.0, s)
    if precision == "approx":
        if s < 120:
            return f"{s:.0f} s"
        if s < 7200:
            return f"{s / 60:.0f} min"
        return f"{round(s / 3600, 1):g} h"
    whole = int(s)
    h, rem = divmod(whole, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h {m:02d}m"
    if m:
        return f"{m}m {sec:02d}s"
    return f"{sec}s"


def parse_duration(text: str, flag: str = "--since") -> timedelta:
    """'30m', '2h', '1d', '90s' (a bare number is minutes) -> a timedelta between 1 s and 30 days."""
    v = text.strip().lower()
    try:
        n = float(v[:-1]) if v and v[-1] in _UNITS else float(v)
    except ValueError:
        raise InvalidInput(f"Cannot read {flag} {text!r}.", "Use e.g. 30m, 2h or 1d.") from None
    secs = n * _UNITS[v[-1]] if v[-1] in _UNITS else n * 60
    if not 0 < secs <= MAX_TYPED_S:
        raise InvalidInput(f"{flag} {text!r} is out of range.", "Use between 1s and 30d.")
    return timedelta(seconds=secs)

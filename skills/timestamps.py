"""RFC 3339 / ISO 8601 timestamps as the cloud APIs send them, parsed by the standard library.

Python 3.11's `datetime.fromisoformat` takes a trailing 'Z' and any number of fractional digits, truncating
past microseconds (Cloud Logging sends nanoseconds), so no trimming is needed (docs.python.org, datetime,
"Changed in version 3.11"). A stamp without a zone is taken as UTC, as the APIs mean it.
"""

from __future__ import annotations

from datetime import UTC, datetime


def parse_timestamp(value: str) -> datetime:
    """An aware datetime; ValueError when `value` is not an ISO 8601 timestamp."""
    ts = datetime.fromisoformat(value.strip())
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)

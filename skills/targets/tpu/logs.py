"""Where a TPU node's vLLM lines land in Cloud Logging, and the filter that reads them.

The node's startup script runs vLLM with Docker's gcplogs driver (skills/targets/tpu/spec.py): each line is an
entry in log `gcplogs-docker-driver` with jsonPayload.instance.name = the node (Docker's gcplogs docs; field
queries in the public-code index filter `logName="projects/P/logs/gcplogs-docker-driver"` and
`jsonPayload.instance.name="NODE"`). The node id is the service name (one node per queued resource).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from skills.errors import InvalidInput
from skills.ports import LogQuery
from skills.targets.tpu.spec import LOG_NAME

_NAME = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")
_SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")


def _ts(dt: datetime) -> str:
    dt = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def tpu_log_filter(project: str, q: LogQuery) -> str:
    """The Logging filter for a TPU node's vLLM container (names validated: they are spliced into the filter)."""
    if not _NAME.match(q.service):
        raise InvalidInput(f"{q.service!r} is not a Cloud TPU node name.")
    sev = q.min_severity.upper()
    if sev not in _SEVERITIES:
        raise InvalidInput(f"Unknown severity {q.min_severity!r}.")
    parts = [
        f'logName="projects/{project}/logs/{LOG_NAME}"',
        f'jsonPayload.instance.name="{q.service}"',
        f'timestamp>="{_ts(q.since)}"',
    ]
    if q.until is not None:
        parts.append(f'timestamp<="{_ts(q.until)}"')
    if sev != "DEFAULT":
        parts.append(f"severity>={sev}")
    return "\n".join(parts)

"""The Logs port over Cloud Logging (`google-cloud-logging`, HTTP transport; endpoint overridable).

One query per fetch: the service's stdout/stderr, its system log (probes, instance starts, memory limits)
and the request log's 5xx/429 entries, newest first so caps keep the most recent lines, then put back in
time order. The filter always carries an explicit `timestamp>=` bound: without one the library silently
adds its own 24-hour window. The client is blocking, so it runs in a thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from google.api_core import exceptions as gexc
from google.api_core import retry as gretry

from bot.adapters.blocking import BlockingPool
from bot.adapters.google_auth import cloud_credentials
from bot.settings import Settings
from skills.errors import CloudUnavailable, InvalidInput
from skills.logs.fetch import entry_from_api
from skills.logs.redact_entries import redact_entries
from skills.ports import LogBatch, LogEntry, LogQuery
from skills.retrying import Clock, RetryPolicy, Sleep, retry_call

log = logging.getLogger(__name__)
_NAME = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")
_SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")
PAGE_SIZE = 1000


def _ts(dt: datetime) -> str:
    """RFC 3339 in UTC (a naive datetime is taken as UTC)."""
    dt = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def build_filter(project: str, q: LogQuery) -> str:
    """The Logging filter for a query (names validated: they are spliced into the filter)."""
    if not _NAME.match(q.service):
        raise InvalidInput(f"{q.service!r} is not a Cloud Run service name.")
    if q.revision and not _NAME.match(q.revision):
        raise InvalidInput(f"{q.revision!r} is not a Cloud Run revision name.")
    sev = q.min_severity.upper()
    if sev not in _SEVERITIES:
        raise InvalidInput(f"Unknown severity {q.min_severity!r}.")
    logs = f"projects/{project}/logs/run.googleapis.com%2F"
    parts = [
        'resource.type="cloud_run_revision"',
        f'resource.labels.service_name="{q.service}"',
    ]
    if q.revision:
        parts.append(f'resource.labels.revision_name="{q.revision}"')
    parts.append(f'timestamp>="{_ts(q.since)}"')
    if q.until is not None:
        parts.append(f'timestamp<="{_ts(q.until)}"')
    parts.append(
        f'(logName="{logs}stdout" OR logName="{logs}stderr" OR logName="{logs}varlog%2Fsystem"'
        f' OR (logName="{logs}requests" AND (httpRequest.status>=500 OR httpRequest.status=429)))'
    )
    if sev != "DEFAULT":
        parts.append(f"severity>={sev}")
    return "\n".join(parts)


def _transient(exc: BaseException) -> bool:
    """429, 500, 503 and dropped connections (the library's own list): worth another try."""
    return isinstance(exc, Exception) and gretry.if_transient_error(exc)


class CloudLoggingLogs:
    def __init__(
        self,
        settings: Settings,
        *,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        build: Callable[[str, LogQuery], str] | None = None,
    ) -> None:
        self._settings = settings
        self._build = build or build_filter  # which resource's logs: Cloud Run's, or a TPU node's
        self._clock = clock
        self._sleep = sleep
        self._client: Any = None
        self._project = ""
        self._pool = BlockingPool("Cloud Logging", settings.cloud_client_threads)

    async def aclose(self) -> None:
        """Drop queued calls; a running one ends at its own deadline."""
        self._pool.shutdown()

    def _get_client(self) -> Any:
        if self._client is None:
            from google.cloud import logging as gcl
            from google.cloud.logging import Resource

            from bot.adapters.deadline_session import DeadlineSession

            class ReadingClient(gcl.Client):  # type: ignore[misc]
                """Parsing each listed entry makes a Logger for its log name, and a Logger made without a resource
                asks the GCE metadata server where this process runs (two requests to metadata.google.internal
                with 5 s timeouts: Logger.__init__ -> detect_resource): per log name, per fetch, off Google Cloud.
                These loggers never write, so they get a fixed resource and nothing is asked."""

                def logger(self, name: str, *, labels: Any = None, resource: Any = None) -> Any:
                    return super().logger(name, labels=labels, resource=resource or Resource(type="global", labels={}))

            creds, project = cloud_credentials(self._settings)
            options = {}
            if self._settings.cloud_logging_api_endpoint:
                options["api_endpoint"] = self._settings.cloud_logging_api_endpoint
            self._client = ReadingClient(
                project=project,
                credentials=creds,
                _use_grpc=False,
                client_options=options or None,
                _http=DeadlineSession(creds, self._settings.cloud_call_deadline_s),
            )
            self._project = project
        return self._client

    async def fetch(self, query: LogQuery) -> LogBatch:
        """One query, started again on a transient failure by the shared retry policy (skills/retrying.py)
        within CLOUD_CALL_DEADLINE_S."""
        policy = RetryPolicy(
            what="Cloud Logging",
            transient=_transient,
            budget_s=self._settings.cloud_call_deadline_s,
            initial_s=0.2,
            max_s=2.0,
            jitter_s=0.2,
            clock=self._clock,
            sleep=self._sleep,
            log=log,
        )
        try:
            return await retry_call(policy, lambda: self._pool.run(self._fetch, query))
        except gexc.PermissionDenied:
            raise CloudUnavailable(
                "Cloud Logging refused to list entries.",
                "Grant the bot's service account roles/logging.viewer.",
            ) from None
        except gexc.GoogleAPICallError as exc:
            raise CloudUnavailable(f"Cloud Logging failed: {exc.message or exc}.", "Try again shortly.") from None
        except OSError as exc:  # requests' ConnectionError and Timeout are OSErrors
            raise CloudUnavailable(
                f"Cannot reach Cloud Logging ({type(exc).__name__}).", "Try again shortly."
            ) from None

    def _fetch(self, q: LogQuery) -> LogBatch:
        client = self._get_client()
        flt = self._build(self._project, q)
        entries: list[LogEntry] = []
        size = 0
        truncated = ""
        # The HTTP transport makes one request per page and does not retry (`fetch` does); each request is
        # bounded by the session's timeout, and paging stops at the deadline with what it has.
        deadline = time.monotonic() + self._settings.cloud_call_deadline_s
        it = client.list_entries(
            resource_names=[f"projects/{self._project}"],
            filter_=flt,
            order_by="timestamp desc",
            page_size=min(PAGE_SIZE, q.max_entries),
        )
        for raw in it:
            if time.monotonic() > deadline and entries:
                truncated = (
                    f"stopped after {self._settings.cloud_call_deadline_s:g} s (CLOUD_CALL_DEADLINE_S) at "
                    f"{len(entries)} entries; older entries were not read"
                )
                break
            if len(entries) >= q.max_entries:
                truncated = f"stopped at the {q.max_entries:,}-entry cap; older entries were not read"
                break
            api = raw.to_api_repr()
            size += len(json.dumps(api, default=str))
            if size > q.max_bytes:
                truncated = (
                    f"stopped at the {q.max_bytes:,}-byte cap after {len(entries)} entries; older entries were not read"
                )
                break
            try:
                entries.append(entry_from_api(api))
            except ValueError:
                continue
        entries.reverse()  # fetched newest first so the caps keep recent lines; read oldest first
        # Each entry was redacted as it was read; this pass catches key blocks printed one line per entry.
        return LogBatch(entries=redact_entries(entries), truncated=truncated)

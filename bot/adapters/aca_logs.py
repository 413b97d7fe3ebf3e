"""The Logs port for Azure Container Apps: the environment's Log Analytics workspace through azure-monitor-query's
async LogsQueryClient (POST {endpoint}/v1/workspaces/{id}/query).

Tables and columns, as Microsoft documents them:
- environments whose logs destination is "log-analytics" write the custom tables `ContainerAppConsoleLogs_CL`
  (ContainerAppName_s, RevisionName_s, ContainerName_s, Stream_s, Log_s, TimeGenerated) and
  `ContainerAppSystemLogs_CL` (ContainerAppName_s, RevisionName_s, Reason_s, Type_s, Log_s, TimeGenerated):
  learn.microsoft.com/azure/container-apps/log-monitoring (MicrosoftDocs/azure-docs
  articles/container-apps/log-monitoring.md), the console columns as a workspace lists them in
  microsoft/azure-container-apps#72, Type_s and Reason_s as the system table's queries use them
  (microsoft/azure-container-apps#1276, #196);
- environments sending to "azure-monitor" (diagnostic settings) write `ContainerAppConsoleLogs` and
  `ContainerAppSystemLogs` with the same columns without the suffix; in the system table `Type` is the event's
  severity (Azure Monitor Logs reference, MicrosoftDocs/azure-reference-other
  azure-monitor-ref/tables/includes/containerappsystemlogs-include.md).

One query per table, newest first and capped by `take` (so the caps keep the most recent lines), each bounded by the
LogQuery's since/until in the KQL and in the request's timespan; the two are merged and put back in time order.
Severity: a console line's own level prefix (vLLM's "INFO"/"WARNING"/"ERROR"), else stderr ERROR and stdout INFO; a
system event by its Type (Normal/Info INFO, Warning WARNING, Error ERROR). `min_severity` is applied to the rows
read. Texts are redacted as they are read, then per stream for key blocks (as bot/adapters/cloud_logging.py does).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal

from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
)

from bot.adapters.azure_client import LazyAzureClient
from skills.errors import CloudUnavailable, InvalidInput, NotFound
from skills.logs.fetch import MAX_LINE_CHARS
from skills.logs.redact import redact
from skills.logs.redact_entries import redact_entries
from skills.ports import LogBatch, LogEntry, LogQuery

Destination = Literal["log-analytics", "azure-monitor"]

_APP = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")  # ACA's container app names
_REVISION = re.compile(r"^[a-z][a-z0-9-]{0,62}[a-z0-9]$")  # <app>--<suffix>
_SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")
# A console line that starts with a logging level (vLLM's "INFO 12-01 10:00:00 [...]", after an optional
# "(APIServer pid=1) " process prefix) says its own severity.
_LEVEL = re.compile(r"^\s*(?:\([^)]*\)\s*)?(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b")
_SYSTEM_TYPES = {"normal": "INFO", "info": "INFO", "warning": "WARNING", "error": "ERROR"}


class _Table:
    def __init__(self, name: str, app: str, revision: str, text: str, kind: str, extra: str) -> None:
        self.name, self.app, self.revision, self.text, self.kind, self.extra = name, app, revision, text, kind, extra


# console: `kind` is the stream; system: `kind` is the event type, `extra` its reason
TABLES: dict[Destination, tuple[_Table, _Table]] = {
    "log-analytics": (
        _Table(
            "ContainerAppConsoleLogs_CL", "ContainerAppName_s", "RevisionName_s", "Log_s", "Stream_s", "ContainerName_s"
        ),
        _Table("ContainerAppSystemLogs_CL", "ContainerAppName_s", "RevisionName_s", "Log_s", "Type_s", "Reason_s"),
    ),
    "azure-monitor": (
        _Table("ContainerAppConsoleLogs", "ContainerAppName", "RevisionName", "Log", "Stream", "ContainerName"),
        _Table("ContainerAppSystemLogs", "ContainerAppName", "RevisionName", "Log", "Type", "Reason"),
    ),
}


def kql_string(value: str) -> str:
    """A KQL string literal: single quotes, with backslash and quote escaped (KQL's string literal rules)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def kql_datetime(dt: datetime) -> str:
    dt = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    return f"datetime({dt.strftime('%Y-%m-%dT%H:%M:%S.%fZ')})"


def build_query(table: _Table, q: LogQuery, take: int) -> str:
    """The KQL for one table (names validated first, and quoted as literals anyway)."""
    if not _APP.match(q.service):
        raise InvalidInput(f"{q.service!r} is not a container app name.")
    if q.revision and not _REVISION.match(q.revision):
        raise InvalidInput(f"{q.revision!r} is not a container app revision name.")
    if q.until is not None:
        when = f"TimeGenerated between ({kql_datetime(q.since)} .. {kql_datetime(q.until)})"
    else:
        when = f"TimeGenerated >= {kql_datetime(q.since)}"
    parts = [table.name, f"where {when}", f"where {table.app} == {kql_string(q.service)}"]
    if q.revision:
        parts.append(f"where {table.revision} == {kql_string(q.revision)}")
    parts += [
        f"project TimeGenerated, {table.revision}, {table.kind}, {table.extra}, {table.text}",
        "order by TimeGenerated desc",
        f"take {take}",
    ]
    return "\n| ".join(parts)


def _severity(console: bool, kind: str, text: str) -> str:
    if console:
        m = _LEVEL.match(text)
        if m:
            return "WARNING" if m.group(1) == "WARN" else m.group(1)
        return "ERROR" if kind.lower() == "stderr" else "INFO"
    return _SYSTEM_TYPES.get(kind.lower(), "DEFAULT")


def _at(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


class AcaLogs:
    def __init__(
        self,
        workspace_id: str,
        *,
        credential: Any = None,
        endpoint: str | None = None,
        destination: Destination = "log-analytics",
        connection_verify: str | bool | None = None,
        server_timeout_s: int = 60,
    ) -> None:
        self.workspace_id = workspace_id
        self._endpoint = endpoint  # None: https://api.loganalytics.io
        self._tables = TABLES[destination]
        self._server_timeout_s = server_timeout_s
        self._azure = LazyAzureClient(self._make, credential, connection_verify)

    def _make(self, credential: Any, **kw: Any) -> Any:
        from azure.monitor.query.aio import LogsQueryClient  # a slow import few processes need

        if self._endpoint:
            kw["endpoint"] = self._endpoint
        return LogsQueryClient(credential, **kw)

    def _logs(self) -> Any:
        return self._azure.get()

    async def aclose(self) -> None:
        await self._azure.aclose()

    async def fetch(self, query: LogQuery) -> LogBatch:
        sev = query.min_severity.upper()
        if sev not in _SEVERITIES:
            raise InvalidInput(f"Unknown severity {query.min_severity!r}.")
        take = query.max_entries + 1  # one more than the cap: a full table says older rows were left
        rows: list[tuple[datetime | None, LogEntry]] = []
        more = False
        partial: list[str] = []
        for console, table in ((True, self._tables[0]), (False, self._tables[1])):
            got, note = await self._query(table, query, take)
            more = more or len(got) >= take
            if note:
                partial.append(note)
            for r in got:
                text = str(r.get(table.text) or "")
                kind = str(r.get(table.kind) or "")
                if not console and r.get(table.extra):
                    text = f"{r[table.extra]}: {text}"  # the event's Reason, as `az containerapp logs` shows it
                entry = LogEntry(
                    timestamp=_at(r.get("TimeGenerated")),
                    severity=_severity(console, kind, text if console else ""),
                    text=redact(text)[:MAX_LINE_CHARS],
                    log_name=f"{table.name}/{kind}" if console else table.name,
                    revision=str(r.get(table.revision) or "")[:200],
                )
                rows.append((entry.timestamp, entry))
        rows.sort(key=lambda x: x[0] or datetime.min.replace(tzinfo=UTC), reverse=True)
        floor = _SEVERITIES.index(sev)
        entries: list[LogEntry] = []
        size = 0
        truncated = ""
        for _, e in rows:
            if len(entries) >= query.max_entries:
                truncated = f"stopped at the {query.max_entries:,}-entry cap; older entries were not read"
                break
            size += len(e.text.encode()) + 64  # the text and its metadata, roughly
            if size > query.max_bytes:
                truncated = (
                    f"stopped at the {query.max_bytes:,}-byte cap after {len(entries)} entries; "
                    "older entries were not read"
                )
                break
            entries.append(e)
        if not truncated and more:
            truncated = f"stopped at the {query.max_entries:,}-entry cap; older entries were not read"
        if partial:
            truncated = "; ".join(filter(None, [truncated, *partial]))
        entries = [
            e for e in entries if _SEVERITIES.index(e.severity if e.severity in _SEVERITIES else "DEFAULT") >= floor
        ]
        entries.reverse()  # read newest first so the caps keep recent lines; given oldest first
        return LogBatch(entries=redact_entries(entries), truncated=truncated)

    async def _query(self, table: _Table, q: LogQuery, take: int) -> tuple[list[dict[str, Any]], str]:
        """The rows of one table's query as dicts, and a note when Log Analytics answered only in part."""
        kql = build_query(table, q, take)
        timespan = (q.since, q.until) if q.until is not None else None  # the KQL bounds the start either way
        try:
            result = await self._logs().query_workspace(
                self.workspace_id, kql, timespan=timespan, server_timeout=self._server_timeout_s
            )
        except ClientAuthenticationError as exc:
            raise CloudUnavailable(
                f"Azure refused the bot's credentials for Log Analytics: {_reason(exc)}",
                "Check the bot's Azure identity (az login / managed identity).",
            ) from None
        except HttpResponseError as exc:
            raise _explained(self.workspace_id, exc) from None
        except (ServiceRequestError, ServiceResponseError) as exc:
            raise CloudUnavailable(
                f"Log Analytics could not be reached: {redact(str(exc))[:200]}", "Try again shortly."
            ) from None
        tables = getattr(result, "tables", None)
        note = ""
        if tables is None:  # LogsQueryPartialResult: what was read, and why the rest was not
            tables = result.partial_data or []
            err = result.partial_error
            details = [str(getattr(d, "message", "") or "") for d in getattr(err, "details", None) or []]
            why = "; ".join(filter(None, [str(getattr(err, "message", "") or ""), *details])) or str(err)
            note = f"Log Analytics answered {table.name} only in part: {redact(why)[:200]}"
        out: list[dict[str, Any]] = []
        for t in tables[:1]:
            cols = list(t.columns)
            out += [dict(zip(cols, list(row), strict=False)) for row in t.rows]
        return out, note


def _reason(exc: HttpResponseError) -> str:
    """Log Analytics' `code: message`, with the innermost message (where the query's own error is said)."""
    err = exc.error
    code = str(getattr(err, "code", "") or "")
    model = getattr(exc, "model", None)
    message = str(getattr(model, "message", "") or getattr(err, "message", "") or exc.message or "")
    return redact(f"{code}: {message}" if code else message)[:300]


def _explained(workspace: str, exc: HttpResponseError) -> Exception:
    status = exc.status_code or 0
    text = _reason(exc)
    if status == 404:
        return NotFound(
            f"Log Analytics workspace {workspace} was not found ({text}).",
            "Check ACA_LOG_ANALYTICS_WORKSPACE_ID: the workspace's Workspace ID (customerId), not its resource ID.",
        )
    if status == 403:
        return CloudUnavailable(
            f"Log Analytics refused to query workspace {workspace} ({text}).",
            "Grant the bot's identity the Log Analytics Reader role on the workspace.",
        )
    if 400 <= status < 500:
        return CloudUnavailable(f"Log Analytics refused the logs query ({text}).")
    return CloudUnavailable(f"Log Analytics answered {status} ({text}).", "Try again shortly.")

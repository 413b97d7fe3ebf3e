"""A Log Analytics query API stand-in for the sandbox's Azure Container Apps environment, reached by the real
azure-monitor-query LogsQueryClient over HTTPS on 127.0.0.1 (its `endpoint` setting).

What it serves: `POST /v1/workspaces/{workspaceId}/query` with a JSON body {"query": KQL, "timespan": ISO 8601
interval, "workspaces": null} (the SDK's _operations.py and _helpers.construct_iso8601); the answer is
{"tables": [{"name": "PrimaryResult", "columns": [{"name", "type"}], "rows": [[...]]}]} with datetimes as ISO 8601
strings (the query API's response, as the SDK's LogsTable reads it). The KQL is really evaluated (bot/sandbox/kql.py,
a strict subset) over two tables, as an environment with the "log-analytics" destination has them
(learn.microsoft.com/azure/container-apps/log-monitoring):
- ContainerAppConsoleLogs_CL: each replica's console (AcaReplicas: vLLM's start-up lines, running and retired
  replicas), Stream_s stderr for ERROR/CRITICAL lines and stdout otherwise (vLLM's logger writes to stdout);
- ContainerAppSystemLogs_CL: events derived from the ARM stand-in's revisions, with the messages Microsoft lists
  for system logs ("Creating a new revision: X", "Successfully provisioned revision X", "Deactivating Old revisions
  since 'ActiveRevisionsMode=Single'", "Error provisioning revision X. ErrorCode: ...", "Setting a traffic weight
  of N% for revision X"), and per replica kubelet's "Started container vllm" (Reason ContainerStarted) and a
  start the probe gave up on (Reason ReplicaUnhealthy, Type Warning: the reason as it appears in
  microsoft/azure-container-apps#1276; the message is the sandbox's). Type_s is Info/Error as Microsoft's table
  lists them, Warning for probe failures; the Reason_s of revision events is the sandbox's (RevisionProvisioning).
The request's timespan bounds the rows as Log Analytics applies it, on TimeGenerated.

Refusals: no bearer token 401 AuthorizationRequiredError "Valid authentication was not provided"; another
workspace 404 WorkspaceNotFoundError "The workspace could not be found" (both as recalled from the service, not
found in a source); a body that is not {"query": string, ...} or a timespan that does not parse 400
BadArgumentError; the KQL the evaluator refuses, 400 BadArgumentError with its SyntaxError/SemanticError. A
partial answer (`partial`) carries the rows and an "error" of code PartialError (the code the SDK's _helpers.py
reads; the message and detail are the sandbox's).
Sandbox time: simulated seconds after `epoch` (the ARM stand-in's own epoch unless told).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import isodate
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.sandbox.aca_api import PROVISION_S, AcaStandIn
from bot.sandbox.aca_replicas import AcaReplicas
from bot.sandbox.kql import KqlError, evaluate
from bot.sandbox.tls import serve_tls

CONSOLE = "ContainerAppConsoleLogs_CL"
SYSTEM = "ContainerAppSystemLogs_CL"
_CONSOLE_COLUMNS = [
    ("TimeGenerated", "datetime"),
    ("ContainerAppName_s", "string"),
    ("RevisionName_s", "string"),
    ("ContainerName_s", "string"),
    ("ContainerGroupName_s", "string"),
    ("EnvironmentName_s", "string"),
    ("Stream_s", "string"),
    ("Log_s", "string"),
]
_SYSTEM_COLUMNS = [
    ("TimeGenerated", "datetime"),
    ("ContainerAppName_s", "string"),
    ("RevisionName_s", "string"),
    ("EnvironmentName_s", "string"),
    ("Type_s", "string"),
    ("Reason_s", "string"),
    ("Log_s", "string"),
]
_BODY_KEYS = {"query", "timespan", "workspaces"}


def _bad(message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "code": "BadArgumentError"}}, status_code=400)


def parse_timespan(text: str, now: datetime) -> tuple[datetime, datetime]:
    """An ISO 8601 interval: start/end, start/duration, or a duration ending now (what the SDK sends)."""
    if "/" in text:
        a, b = text.split("/", 1)
        start = isodate.parse_datetime(a)
        end = start + isodate.parse_duration(b) if b.startswith("P") else isodate.parse_datetime(b)
    else:
        end = now
        start = now - isodate.parse_duration(text)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    if end.tzinfo is None:
        end = end.replace(tzinfo=UTC)
    return start, end


class LogAnalyticsStandIn:
    def __init__(
        self,
        aca: AcaStandIn,
        replicas: AcaReplicas,
        workspace_id: str,
        *,
        now: Callable[[], float],
        epoch: datetime | None = None,
        token: str | None = None,
    ) -> None:
        self.aca = aca
        self.replicas = replicas
        self.workspace_id = workspace_id
        self._now = now
        self.epoch = epoch or aca.epoch  # the ARM stand-in's time base unless told
        self.token = token  # when set, the one bearer token accepted
        self.queries: list[str] = []  # every KQL received (tests read what the adapter sent)
        # scenario: the next answers are partial (rows, and an "error" of code PartialError with this detail), as
        # the query API answers a query that ran out of resources part way (the SDK's LogsQueryPartialResult)
        self.partial = ""

    def at(self, seconds: float) -> datetime:
        return self.epoch + timedelta(seconds=seconds)

    # --- the tables --------------------------------------------------------------------------------------------

    def console_rows(self) -> list[dict[str, Any]]:
        rows = []
        for app in list(self.aca.apps):
            for run in self.replicas.replica_runs(app):
                now = self._now() if run.stopped is None else min(self._now(), run.stopped)
                replica = f"{run.revision}-{int(run.started * 1000) % 100000:05d}"
                for line in run.lines:
                    if run.started + line.at > now:
                        continue
                    rows.append(
                        {
                            "TimeGenerated": self.at(run.started + line.at),
                            "ContainerAppName_s": app,
                            "RevisionName_s": run.revision,
                            "ContainerName_s": "vllm",
                            "ContainerGroupName_s": replica,
                            "EnvironmentName_s": self.aca.environment,
                            "Stream_s": "stderr" if line.severity in ("ERROR", "CRITICAL") else "stdout",
                            "Log_s": line.text,
                        }
                    )
        return rows

    def system_rows(self) -> list[dict[str, Any]]:
        now = self._now()
        rows: list[dict[str, Any]] = []

        def event(t: float | None, app: str, rev: str, kind: str, reason: str, text: str) -> None:
            if t is not None and t <= now:
                rows.append(
                    {
                        "TimeGenerated": self.at(t),
                        "ContainerAppName_s": app,
                        "RevisionName_s": rev,
                        "EnvironmentName_s": self.aca.environment,
                        "Type_s": kind,
                        "Reason_s": reason,
                        "Log_s": text,
                    }
                )

        for name in list(self.aca.apps):
            runs = self.replicas.replica_runs(name)  # brings the stand-in up to now first
            with self.aca.lock:
                app = self.aca.apps.get(name)
                if app is None:
                    continue
                single = self.aca._mode(app) == "Single"
                weights = self.aca.weights(app)
                for rev in app.revisions.values():
                    event(
                        rev.created,
                        name,
                        rev.name,
                        "Info",
                        "RevisionProvisioning",
                        f"Creating a new revision: {rev.name}",
                    )
                    if rev.failed:
                        event(
                            rev.created + PROVISION_S,
                            name,
                            rev.name,
                            "Error",
                            "RevisionProvisioning",
                            f"Error provisioning revision {rev.name}. ErrorCode: [ContainerCrashing] {rev.fail}",
                        )
                    elif rev.provisioned_at is not None:
                        event(
                            rev.provisioned_at,
                            name,
                            rev.name,
                            "Info",
                            "RevisionProvisioning",
                            f"Successfully provisioned revision {rev.name}",
                        )
                        if rev.name in weights:
                            event(
                                rev.provisioned_at,
                                name,
                                rev.name,
                                "Info",
                                "TrafficWeight",
                                f"Setting a traffic weight of {weights[rev.name]}% for revision {rev.name}",
                            )
                        if single and len(app.revisions) > 1:
                            event(
                                rev.provisioned_at,
                                name,
                                rev.name,
                                "Info",
                                "RevisionProvisioning",
                                "Deactivating Old revisions since 'ActiveRevisionsMode=Single'",
                            )
            for run in runs:
                event(run.started, name, run.revision, "Info", "ContainerStarted", "Started container vllm")
                if run.failed_at is not None:
                    event(
                        run.failed_at,
                        name,
                        run.revision,
                        "Warning",
                        "ReplicaUnhealthy",
                        "Startup probe failed: the replica did not answer /health in time and is restarted.",
                    )
        return rows

    # --- the API -----------------------------------------------------------------------------------------------

    async def _query(self, request: Request) -> Response:
        auth = request.headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token or (self.token is not None and token != self.token):
            return JSONResponse(
                {"error": {"message": "Valid authentication was not provided", "code": "AuthorizationRequiredError"}},
                status_code=401,
            )
        if request.path_params["workspace"].lower() != self.workspace_id.lower():
            return JSONResponse(
                {"error": {"message": "The workspace could not be found", "code": "WorkspaceNotFoundError"}},
                status_code=404,
            )
        try:
            body = json.loads(await request.body() or b"null")
        except ValueError:
            return _bad("The request body is not valid JSON.")
        if not isinstance(body, dict) or not isinstance(body.get("query"), str) or not body["query"].strip():
            return _bad("The request had some invalid properties: 'query' is required.")
        unknown = set(body) - _BODY_KEYS
        if unknown:
            return _bad(f"The request had some invalid properties: unknown member '{sorted(unknown)[0]}'.")
        if body.get("workspaces"):
            return _bad("The sandbox's workspace queries no other workspaces.")
        self.queries.append(body["query"])
        now = self.at(self._now())
        bounds: tuple[datetime, datetime] | None = None
        if body.get("timespan"):
            try:
                bounds = parse_timespan(str(body["timespan"]), now)
            except (ValueError, isodate.ISO8601Error):
                return _bad(f"The request had some invalid properties: timespan '{body['timespan']}' is not valid.")

        def bounded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
            if bounds is None:
                return rows
            return [r for r in rows if bounds[0] <= r["TimeGenerated"] <= bounds[1]]

        tables = {
            CONSOLE: (_CONSOLE_COLUMNS, bounded(self.console_rows())),
            SYSTEM: (_SYSTEM_COLUMNS, bounded(self.system_rows())),
        }
        try:
            table = evaluate(body["query"], tables)
        except KqlError as exc:
            return JSONResponse(exc.body(), status_code=400)
        table["rows"] = [[_json(v) for v in row] for row in table["rows"]]
        answer: dict[str, Any] = {"tables": [table]}
        if self.partial:
            answer["error"] = {
                "code": "PartialError",
                "message": "There were some errors when processing your query.",
                "details": [{"code": "EngineError", "message": self.partial}],
            }
        return JSONResponse(answer)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/workspaces/{workspace}/query", self._query, methods=["POST"])])


def _json(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value


@contextmanager
def serve_log_analytics(standin: LogAnalyticsStandIn) -> Iterator[tuple[str, str]]:
    """Yield (https://127.0.0.1:PORT, CA file) while the stand-in answers: the adapter's endpoint and
    connection_verify."""
    with serve_tls(standin.app()) as served:
        yield served

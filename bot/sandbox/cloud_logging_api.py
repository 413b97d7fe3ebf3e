"""A Cloud Logging API v2 stand-in: POST /v2/entries:list as the REST API speaks it.

Request: {resourceNames, filter, orderBy, pageSize, pageToken}; response: {entries, nextPageToken}. It
serves entries loaded from scenario files (JSON lines of LogEntry), parses the filter strictly
(bot/sandbox/logging_filter.py: what the real API refuses is a 400 INVALID_ARGUMENT), honours orderBy
and paging, and records every request so tests can check what the client sent (e.g. the timestamp bound).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bot.sandbox.logging_filter import FilterError, compile_filter
from bot.sandbox.logging_filter import parse_ts as _ts


class CloudLoggingStandIn:
    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.max_page = 1000
        self._lock = threading.Lock()
        self.before_list: Callable[[], None] | None = None  # the sandbox brings its log up to the present
        self.fail_next: list[int] = []  # one-off HTTP errors (429, 500, 503), answered in order

    def load(self, path: str | Path, project: str | None = None) -> None:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                e = json.loads(line)
                if project:  # serve the scenario as if it came from the test project
                    e["logName"] = re.sub(r"^projects/[^/]+/", f"projects/{project}/", e.get("logName", ""))
                self.entries.append(e)

    def replay(self, path: str | Path, project: str, ended_ago: timedelta = timedelta(minutes=1)) -> None:
        """Serve a recorded scenario (replacing what was there) as if it ended `ended_ago` before now,
        so `--since` windows apply to it."""
        self.entries.clear()
        self.load(path, project=project)
        stamps = [datetime.fromisoformat(e["timestamp"]) for e in self.entries]
        delta = datetime.now(UTC) - ended_ago - max(stamps)
        for e, ts in zip(self.entries, stamps, strict=True):
            e["timestamp"] = (ts + delta).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def append(self, entries: list[dict[str, Any]]) -> None:
        """Entries written now (a simulated revision's log)."""
        with self._lock:
            self.entries.extend(entries)

    @property
    def filters(self) -> list[str]:
        return [r.get("filter", "") for r in self.requests]

    async def list_entries(self, request: Request) -> JSONResponse:
        body = await request.json()
        if self.before_list is not None:
            self.before_list()
        with self._lock:
            self.requests.append(body)
            fail = self.fail_next.pop(0) if self.fail_next else None
        if fail is not None:
            status = {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}.get(fail, "UNKNOWN")
            return JSONResponse(
                {"error": {"code": fail, "message": "simulated failure", "status": status}}, status_code=fail
            )
        if not isinstance(body.get("resourceNames"), list) or not body["resourceNames"]:
            return JSONResponse(
                {"error": {"code": 400, "message": "resourceNames is required", "status": "INVALID_ARGUMENT"}},
                status_code=400,
            )
        try:
            match = compile_filter(body.get("filter", ""))
        except FilterError as exc:
            # The API's error shape for a filter it cannot parse (google.rpc.Status over HTTP/JSON).
            return JSONResponse(
                {"error": {"code": 400, "message": f"Invalid filter: {exc}", "status": "INVALID_ARGUMENT"}},
                status_code=400,
            )
        with self._lock:
            rows = [e for e in self.entries if match(e)]
        rows.sort(key=lambda e: _ts(e["timestamp"]), reverse="desc" in body.get("orderBy", "").lower())
        size = min(int(body.get("pageSize") or self.max_page), self.max_page)
        start = int(body.get("pageToken") or 0)
        page = rows[start : start + size]
        out: dict[str, Any] = {"entries": page}
        if start + size < len(rows):
            out["nextPageToken"] = str(start + size)
        return JSONResponse(out)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v2/entries:list", self.list_entries, methods=["POST"])])

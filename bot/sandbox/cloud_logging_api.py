"""A Cloud Logging API v2 stand-in: POST /v2/entries:list as the REST API speaks it.

Request: {resourceNames, filter, orderBy, pageSize, pageToken}; response: {entries, nextPageToken}. It
serves entries loaded from scenario files (JSON lines of LogEntry), applies the parts of the filter language
the bot uses (service, revision, timestamp bounds, severity, logName list, request status), honours orderBy
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

_SEV = ["DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY"]
_SEVERITY_RANK = {s: i for i, s in enumerate(_SEV)}


def _ts(value: str) -> datetime:
    v = value.replace("Z", "+00:00")
    if "." in v:
        head, _, tail = v.partition(".")
        frac = "".join(c for c in tail if c.isdigit())
        v = f"{head}.{frac[:6].ljust(6, '0')}{tail[len(frac) :]}"
    ts = datetime.fromisoformat(v)
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


class CloudLoggingStandIn:
    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.max_page = 1000
        self._lock = threading.Lock()
        self.before_list: Callable[[], None] | None = None  # the sandbox brings its log up to the present

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

    def _matches(self, e: dict[str, Any], flt: str) -> bool:
        labels = (e.get("resource") or {}).get("labels") or {}
        for key, label in (("service_name", "service_name"), ("revision_name", "revision_name")):
            m = re.search(rf'resource\.labels\.{key}="([^"]*)"', flt)
            if m and labels.get(label) != m.group(1):
                return False
        ts = _ts(e["timestamp"])
        for op, value in re.findall(r'timestamp(>=|<=)"([^"]+)"', flt):
            bound = _ts(value)
            if (op == ">=" and ts < bound) or (op == "<=" and ts > bound):
                return False
        if m := re.search(r"severity>=(\w+)", flt):
            if _SEVERITY_RANK.get(e.get("severity", "DEFAULT"), 0) < _SEVERITY_RANK.get(m.group(1), 0):
                return False
        names = re.findall(r'logName="([^"]+)"', flt)
        if names:
            log = e.get("logName", "")
            if log not in names:
                return False
            if log.endswith("%2Frequests"):
                status = int((e.get("httpRequest") or {}).get("status", 0))
                if not (status >= 500 or status == 429):
                    return False
        return True

    async def list_entries(self, request: Request) -> JSONResponse:
        body = await request.json()
        if self.before_list is not None:
            self.before_list()
        with self._lock:
            self.requests.append(body)
        if not isinstance(body.get("resourceNames"), list) or not body["resourceNames"]:
            return JSONResponse({"error": {"code": 400, "message": "resourceNames is required"}}, status_code=400)
        flt = body.get("filter", "")
        with self._lock:
            rows = [e for e in self.entries if self._matches(e, flt)]
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

"""A Cloud Storage JSON API stand-in: objects.list (GET /storage/v1/b/BUCKET/o), what google-cloud-storage's
Client.list_blobs calls.

Query parameters are checked against the API's list (unknown ones: 400 invalid), maxResults honoured with
nextPageToken paging; a missing bucket is 404 "The specified bucket does not exist." and a bucket the caller may
not read is 403, both in the API's error JSON ({"error":{"code","message","errors":[{"message","domain",
"reason"}]}}). `hold_s` holds every answer (a slow API).
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.sandbox.server import hold

_LIST_PARAMS = {
    "prefix", "delimiter", "maxResults", "pageToken", "projection", "versions", "fields", "userProject",
    "startOffset", "endOffset", "includeTrailingDelimiter", "matchGlob", "includeFoldersAsPrefixes", "softDeleted",
    "prettyPrint", "alt", "quotaUser",
}  # fmt: skip


class GcsStandIn:
    def __init__(self) -> None:
        self.buckets: dict[str, dict[str, int]] = {}  # bucket -> object name -> size
        self.denied: set[str] = set()
        self.hold_s = 0.0
        self.requests: list[dict[str, str]] = []

    def put(self, bucket: str, name: str, size: int = 1) -> None:
        self.buckets.setdefault(bucket, {})[name] = size

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/storage/v1/b/{bucket}/o", self._list, methods=["GET"])])

    async def _list(self, request: Request) -> Response:
        await hold(self.hold_s)
        q = request.query_params
        self.requests.append(dict(q))
        unknown = set(q) - _LIST_PARAMS
        if unknown:
            return _error(400, f"Invalid argument: {', '.join(sorted(unknown))}", "invalid")
        bucket = request.path_params["bucket"]
        if bucket in self.denied:
            msg = (
                "caller does not have storage.objects.list access to the Google Cloud Storage bucket. Permission "
                "'storage.objects.list' denied on resource (or it may not exist)."
            )
            return _error(403, msg, "forbidden")
        if bucket not in self.buckets:
            return _error(404, "The specified bucket does not exist.", "notFound")
        try:
            limit = min(int(q.get("maxResults", "1000")), 1000)
            start = int(q.get("pageToken", "0"))
        except ValueError:
            return _error(400, "Invalid maxResults or pageToken", "invalid")
        names = sorted(n for n in self.buckets[bucket] if n.startswith(q.get("prefix", "")))
        page = names[start : start + limit]
        body: dict[str, Any] = {
            "kind": "storage#objects",
            "items": [
                {
                    "kind": "storage#object",
                    "id": f"{bucket}/{n}/1",
                    "name": n,
                    "bucket": bucket,
                    "generation": "1",
                    "size": str(self.buckets[bucket][n]),
                    "contentType": "application/octet-stream",
                }
                for n in page
            ],
        }
        if start + limit < len(names):
            body["nextPageToken"] = str(start + limit)
        return JSONResponse(body)


def _error(status: int, message: str, reason: str) -> Response:
    err = {"code": status, "message": message, "errors": [{"message": message, "domain": "global", "reason": reason}]}
    return JSONResponse({"error": err}, status_code=status)

"""A Cloud Quotas API v1 stand-in over REST: GET /v1/projects/P/locations/global/services/S/quotaInfos/ID and
GET /v1/projects/P/locations/global/quotaPreferences, what google-cloud-quotas' CloudQuotasClient.get_quota_info
and list_quota_preferences send on its REST transport (preferences paged with pageSize / nextPageToken).

The answer is a QuotaInfo in the API's JSON (camelCase; int64 as strings), its dimensionsInfos ordered from the
most specific (a region's own value) to the least (no dimension: every other region), as the API documents.
Unknown query parameters, a location other than `global` and a missing quota are the API's errors
({"error":{"code","message","status"}}). `hold_s` holds every answer (a slow API); `denied` answers every
request 403 PERMISSION_DENIED ("The caller does not have permission", google.rpc's generic wording), as for a
caller without roles/cloudquotas.viewer.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.sandbox.server import hold

_PARAMS = {"$alt", "alt", "prettyPrint"}
_LIST_PARAMS = _PARAMS | {"pageSize", "pageToken", "filter", "orderBy"}


class QuotasStandIn:
    def __init__(self) -> None:
        # (service, quota id) -> region -> value ("" = the default for regions without their own value)
        self.values: dict[tuple[str, str], dict[str, int]] = {}
        self.dimension: dict[tuple[str, str], str] = {}  # "region" (Cloud Run GPUs) or "zone" (Cloud TPU)
        self.hold_s = 0.0
        self.denied = False
        self.requests: list[str] = []
        self.preferences: list[dict[str, Any]] = []  # QuotaPreference JSON, as the API returns it
        self.page_size = 100  # when the request names none (the API picks its own)

    def request(
        self, service: str, quota_id: str, region: str, preferred: int, granted: int | None, pending: bool
    ) -> None:
        """A quota increase request (a QuotaPreference) with its state."""
        n = len(self.preferences)
        config: dict[str, Any] = {"preferredValue": str(preferred), "requestOrigin": "CLOUD_CONSOLE"}
        if granted is not None:
            config["grantedValue"] = str(granted)
        if pending:
            config["stateDetail"] = "The request is being reviewed."
        self.preferences.append(
            {
                "name": f"projects/sandbox/locations/global/quotaPreferences/req-{n}",
                "dimensions": {"region": region},
                "quotaConfig": config,
                "etag": f"etag-{n}",
                "createTime": "2026-11-20T10:00:00Z",
                "updateTime": "2026-11-20T10:00:00Z",
                "service": service,
                "quotaId": quota_id,
                "reconciling": pending,
            }
        )

    def set(self, service: str, quota_id: str, region: str, value: int, dimension: str = "region") -> None:
        self.values.setdefault((service, quota_id), {})[region] = value
        self.dimension[(service, quota_id)] = dimension

    def app(self) -> Starlette:
        path = "/v1/projects/{project}/locations/{location}/services/{service}/quotaInfos/{quota_id}"
        prefs = "/v1/projects/{project}/locations/{location}/quotaPreferences"
        return Starlette(routes=[Route(path, self._get, methods=["GET"]), Route(prefs, self._list, methods=["GET"])])

    async def _list(self, request: Request) -> Response:
        await hold(self.hold_s)
        if self.denied:
            return _error(403, "The caller does not have permission")
        q = request.query_params
        self.requests.append(request.url.path)
        unknown = set(q) - _LIST_PARAMS
        if unknown:
            return _error(400, f'Invalid JSON payload received. Unknown name "{sorted(unknown)[0]}".')
        if request.path_params["location"] != "global":
            return _error(400, "The location of a QuotaPreference must be 'global'.")
        try:
            size = max(1, min(int(q.get("pageSize") or self.page_size), 1000))
            start = int(q.get("pageToken") or 0)
        except ValueError:
            return _error(400, "Invalid pageSize or pageToken.")
        page = self.preferences[start : start + size]
        body: dict[str, Any] = {"quotaPreferences": page}
        if start + size < len(self.preferences):
            body["nextPageToken"] = str(start + size)
        return JSONResponse(body)

    async def _get(self, request: Request) -> Response:
        await hold(self.hold_s)
        if self.denied:
            return _error(403, "The caller does not have permission")
        p = request.path_params
        self.requests.append(request.url.path)
        unknown = set(request.query_params) - _PARAMS
        if unknown:
            return _error(400, f'Invalid JSON payload received. Unknown name "{sorted(unknown)[0]}".')
        if p["location"] != "global":
            return _error(400, "The location of a QuotaInfo must be 'global'.")
        key = (p["service"], p["quota_id"])
        if key not in self.values:
            return _error(404, f"QuotaInfo {p['quota_id']} of service {p['service']} was not found.")
        regions = self.values[key]
        dim = self.dimension.get(key, "region")
        infos: list[dict[str, Any]] = [
            {
                "dimensions": {dim: r},
                "details": {"value": str(v)},
                "applicableLocations": [r],
            }
            for r, v in sorted(regions.items())
            if r
        ]
        if "" in regions:
            infos.append({"details": {"value": str(regions[""])}, "applicableLocations": ["*"]})
        name = f"projects/{p['project']}/locations/global/services/{p['service']}/quotaInfos/{p['quota_id']}"
        body = {
            "name": name,
            "quotaId": p["quota_id"],
            "metric": f"{p['service']}/{p['quota_id']}",
            "service": p["service"],
            "isPrecise": True,
            "containerType": "PROJECT",
            "dimensions": [dim],
            "quotaDisplayName": p["quota_id"],
            "metricUnit": "1",
            "quotaIncreaseEligibility": {"isEligible": True},
            "dimensionsInfos": infos,
        }
        return JSONResponse(body)


def _error(status: int, message: str) -> Response:
    names = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND"}
    return JSONResponse({"error": {"code": status, "message": message, "status": names[status]}}, status_code=status)

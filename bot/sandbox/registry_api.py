"""A container registry stand-in: the Distribution (Docker Registry HTTP API v2) routes a manifest check uses,
with the bearer-token flow.

GET/HEAD /v2/NAME/manifests/REF without a valid bearer token: 401 with
`WWW-Authenticate: Bearer realm="BASE/token",service="SERVICE",scope="repository:NAME:pull"` (as Docker Hub's
registry-1.docker.io points at auth.docker.io/token). GET /token?service=…&scope=… returns {"token",
"access_token", "expires_in", "issued_at"}. A manifest is an OCI image index (multi-arch, as vLLM's tags are):
served only when the Accept header allows that media type, else 404 MANIFEST_UNKNOWN "OCI index found, but accept
header does not support OCI indexes" (the reference registry's answer, distribution/distribution
registry/handlers/manifests.go, ErrorCodeManifestUnknown);
unknown repository: 404 NAME_UNKNOWN; unknown tag: 404 MANIFEST_UNKNOWN; errors in the spec's JSON
{"errors":[{"code","message","detail"}]} (a HEAD carries no body). Other methods: 405 UNSUPPORTED.
`hold_s` holds every answer (a slow registry); `denied` repositories refuse the token (403 DENIED).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from datetime import UTC, datetime

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.sandbox.server import hold

INDEX = "application/vnd.oci.image.index.v1+json"
_SCOPE = re.compile(r"^repository:([a-z0-9]+(?:[._/-][a-z0-9]+)*):pull$")


class RegistryStandIn:
    def __init__(self, service: str = "registry.sandbox") -> None:
        self.service = service
        self.tags: dict[str, set[str]] = {}  # repository -> tags
        self.denied: set[str] = set()
        self.hold_s = 0.0
        self.base_url = ""  # set once served: the token realm is on the same server
        self._tokens: dict[str, str] = {}  # token -> repository it may pull
        self.requests: list[tuple[str, str]] = []
        self.token_auth: list[str] = []  # the Authorization header of each token request ('' when anonymous)

    def add(self, image: str) -> None:
        """`repo:tag` (Docker Hub's short names as library/NAME)."""
        repo, _, tag = image.rpartition(":")
        self.tags.setdefault(repo if "/" in repo else f"library/{repo}", set()).add(tag)

    def remove(self, image: str) -> None:
        repo, _, tag = image.rpartition(":")
        self.tags.get(repo, set()).discard(tag)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/token", self._token, methods=["GET"]),
                Route("/v2/{name:path}/manifests/{ref}", self._manifest, methods=["GET", "HEAD", "PUT", "DELETE"]),
            ]
        )

    async def _token(self, request: Request) -> Response:
        await hold(self.hold_s)
        q = request.query_params
        self.token_auth.append(request.headers.get("authorization", ""))
        unknown = set(q) - {"service", "scope", "account", "client_id", "offline_token"}
        if unknown or q.get("service") != self.service:
            return JSONResponse({"details": "invalid service or parameters"}, status_code=400)
        m = _SCOPE.match(q.get("scope", ""))
        if not m:
            return JSONResponse({"details": "invalid scope"}, status_code=400)
        token = secrets.token_urlsafe(24)
        self._tokens[token] = m.group(1)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return JSONResponse({"token": token, "access_token": token, "expires_in": 300, "issued_at": now})

    async def _manifest(self, request: Request) -> Response:
        await hold(self.hold_s)
        name, ref = request.path_params["name"], request.path_params["ref"]
        self.requests.append((request.method, f"{name}:{ref}"))
        head = request.method == "HEAD"
        if request.method not in ("GET", "HEAD"):
            return _err(405, "UNSUPPORTED", "The operation is unsupported.", head)
        auth = request.headers.get("authorization", "")
        token = auth.removeprefix("Bearer ")
        if not auth.startswith("Bearer ") or self._tokens.get(token) != name:
            challenge = f'Bearer realm="{self.base_url}/token",service="{self.service}",scope="repository:{name}:pull"'
            resp = _err(401, "UNAUTHORIZED", "authentication required", head)
            resp.headers["WWW-Authenticate"] = challenge
            return resp
        if name in self.denied:
            return _err(403, "DENIED", "requested access to the resource is denied", head)
        if name not in self.tags:
            return _err(404, "NAME_UNKNOWN", "repository name not known to registry", head)
        if ref not in self.tags[name] and not any(_digest(name, t) == ref for t in self.tags[name]):
            return _err(404, "MANIFEST_UNKNOWN", "manifest unknown", head)
        accept = request.headers.get("accept", "")
        if INDEX not in accept:
            return _err(
                404, "MANIFEST_UNKNOWN", "OCI index found, but accept header does not support OCI indexes", head
            )
        body = json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": []}).encode()
        tag = ref if ref in self.tags[name] else next(t for t in self.tags[name] if _digest(name, t) == ref)
        headers = {"Docker-Content-Digest": _digest(name, tag), "Content-Type": INDEX}
        if head:
            headers["Content-Length"] = str(len(body))
            return Response(b"", headers=headers)
        return Response(body, headers=headers)


def _digest(name: str, tag: str) -> str:
    return "sha256:" + hashlib.sha256(f"{name}:{tag}".encode()).hexdigest()


def _err(status: int, code: str, message: str, head: bool) -> Response:
    if head:
        return Response(b"", status_code=status)
    return JSONResponse({"errors": [{"code": code, "message": message, "detail": None}]}, status_code=status)

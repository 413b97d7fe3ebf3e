"""ImageRegistry port on the OCI Distribution / Docker Registry HTTP API v2: a manifest HEAD for the image's tag
(or digest), with the registry's bearer-token flow.

The flow (distribution spec, "Token Authentication Specification"): an unauthenticated request answers 401 with
`WWW-Authenticate: Bearer realm="...",service="...",scope="repository:NAME:pull"`; a GET on the realm with that
service and scope returns {"token": ...} (Docker Hub: realm https://auth.docker.io/token, also "access_token");
the request is repeated with `Authorization: Bearer TOKEN`. Artifact Registry (*.pkg.dev) uses the same flow and
takes Basic `oauth2accesstoken:<Google access token>` at its realm. The Accept header lists the OCI index and
Docker manifest list as well as single manifests: multi-arch tags (vLLM's) are indexes, and a registry answers 404
for a manifest type the client did not accept. A 404 is then asked again with GET to read the error code
({"errors":[{"code":"MANIFEST_UNKNOWN"|"NAME_UNKNOWN",...}]}; a HEAD answer has no body).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from skills.logs.redact import redact
from skills.ports import ImageLookup, PreflightUnavailable

ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "https://registry-1.docker.io"
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
GoogleToken = Callable[[], Awaitable[str | None]]


def split_image(image: str) -> tuple[str, str, str]:
    """(registry host, repository, tag or digest) of a reference, with Docker's defaults: no host part means
    docker.io, a one-part name there means library/NAME, no tag means latest."""
    ref = image.strip()
    name, _, digest = ref.partition("@")
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        host, path = first, rest
    else:
        host, path = DOCKER_HUB, name
    last = path.rsplit("/", 1)[-1]
    tag = "latest"
    if ":" in last:
        path, _, tag = path.rpartition(":")
    if host == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    return host, path, digest or tag


class HttpImageRegistry:
    def __init__(self, endpoints: dict[str, str], timeout_s: float, google_token: GoogleToken | None = None) -> None:
        self._endpoints = {k: v.rstrip("/") for k, v in endpoints.items()}
        self._timeout_s = timeout_s
        self._google_token = google_token
        self._client = httpx.AsyncClient(timeout=timeout_s, follow_redirects=True)

    def base_url(self, host: str) -> str:
        if host in self._endpoints:
            return self._endpoints[host]
        return DOCKER_HUB_API if host == DOCKER_HUB else f"https://{host}"

    async def aclose(self) -> None:
        await self._client.aclose()

    async def lookup(self, image: str) -> ImageLookup:
        host, repo, ref = split_image(image)
        url = f"{self.base_url(host)}/v2/{repo}/manifests/{ref}"
        headers = {"Accept": ACCEPT}
        try:
            r = await self._client.head(url, headers=headers)
            if r.status_code == 401:
                token = await self._token(r.headers.get("WWW-Authenticate", ""), host)
                if token:
                    headers["Authorization"] = f"Bearer {token}"
                    r = await self._client.head(url, headers=headers)
            if r.status_code == 200:
                return ImageLookup(state="ok", digest=r.headers.get("Docker-Content-Digest", ""))
            if r.status_code == 404:
                body = await self._client.get(url, headers=headers)
                return ImageLookup(state="missing", detail=_errors(body) or "404")
            if r.status_code in (401, 403):
                return ImageLookup(state="denied", detail=f"HTTP {r.status_code}")
        except httpx.TimeoutException:
            raise PreflightUnavailable(f"the registry {host} did not answer within {self._timeout_s:g} s.") from None
        except httpx.HTTPError as exc:
            raise PreflightUnavailable(
                f"cannot reach the registry {host} ({type(exc).__name__}); from Cloud Run the bot needs egress to it."
            ) from None
        raise PreflightUnavailable(f"the registry {host} answered HTTP {r.status_code} for `{image}`.")

    async def _token(self, challenge: str, host: str) -> str | None:
        """A pull token from the challenge's realm (None when the challenge is not a Bearer one)."""
        if not challenge.lower().startswith("bearer "):
            return None
        params = dict(_CHALLENGE.findall(challenge))
        realm = params.pop("realm", "")
        if not realm:
            return None
        auth = None
        if host.endswith(".pkg.dev") and self._google_token is not None:
            access = await self._google_token()
            if access:
                auth = httpx.BasicAuth("oauth2accesstoken", access)
        r = await self._client.get(realm, params=params, auth=auth)
        if r.status_code != 200:
            return None
        data: dict[str, Any] = r.json()
        return str(data.get("token") or data.get("access_token") or "") or None


def _errors(r: httpx.Response) -> str:
    try:
        errs = r.json().get("errors") or []
        return redact("; ".join(f"{e.get('code', '')}: {e.get('message', '')}" for e in errs))[:200]
    except (ValueError, AttributeError):
        return ""

"""Google credentials (Application Default Credentials) and identity tokens for private Cloud Run URLs."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import google.auth
from google.auth.credentials import AnonymousCredentials, Credentials
from google.auth.exceptions import DefaultCredentialsError, GoogleAuthError

from bot.settings import Settings
from skills.errors import CloudUnavailable

_HINT = (
    "Set GOOGLE_CLOUD_PROJECT and provide Application Default Credentials "
    "(`gcloud auth application-default login`, GOOGLE_APPLICATION_CREDENTIALS, or a service account on Cloud Run)."
)


def cloud_credentials(settings: Settings) -> tuple[Credentials, str]:
    """Credentials and project, or CloudUnavailable saying exactly what to set."""
    if settings.google_anonymous_credentials:
        if not settings.google_cloud_project:
            raise CloudUnavailable("GOOGLE_CLOUD_PROJECT is not set.", _HINT)
        return AnonymousCredentials(), settings.google_cloud_project  # type: ignore[no-untyped-call]
    try:
        creds, adc_project = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    except DefaultCredentialsError:
        raise CloudUnavailable("No Google credentials were found.", _HINT) from None
    project = settings.google_cloud_project or adc_project
    if not project:
        raise CloudUnavailable("GOOGLE_CLOUD_PROJECT is not set.", _HINT)
    return creds, project


class IdentityTokens:
    """ID tokens for calling a private Cloud Run service, cached per audience until shortly before expiry."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._cache: dict[str, tuple[str, float]] = {}

    async def header_for(self, url: str) -> dict[str, str]:
        if self._settings.google_anonymous_credentials or not url.startswith("https://"):
            return {}
        audience = audience_for(url)
        hit = self._cache.get(audience)
        if hit and hit[1] > time.time() + 60:
            return {"Authorization": f"Bearer {hit[0]}"}
        try:
            token = await asyncio.to_thread(_fetch_id_token, audience)
        except (GoogleAuthError, OSError, ValueError):
            return {}  # a public service still answers; a private one answers 401/403, which we report
        self._cache[audience] = (token, time.time() + 3000)
        return {"Authorization": f"Bearer {token}"}


def audience_for(url: str) -> str:
    """The ID token audience for a Cloud Run URL: the service's own run.app URL.

    A revision tag's URL is `https://TAG---SERVICE-HASH.a.run.app`; Cloud Run always accepts the service's
    Google-generated URL as audience (docs: run/docs/configuring/custom-audiences, "The default Google-generated
    URL is always an acceptable audience value"), so a tagged URL gets the token of its service URL.
    """
    origin = "/".join(url.split("/", 3)[:3])
    scheme, _, host = origin.partition("://")
    if host.endswith(".run.app") and "---" in host:
        host = host.split("---", 1)[1]
    return f"{scheme}://{host}"


def _fetch_id_token(audience: str) -> str:
    import google.auth.transport.requests
    import google.oauth2.id_token

    request: Any = google.auth.transport.requests.Request()
    return str(google.oauth2.id_token.fetch_id_token(request, audience))

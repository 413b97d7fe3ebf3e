"""The preflight sources wired from settings: the Hub, the image registries, Cloud Storage and Cloud Quotas, each
with its endpoint setting (tests and the sandbox point them at stand-ins on 127.0.0.1), and the short cache."""

from __future__ import annotations

import asyncio

from google.auth.exceptions import GoogleAuthError
from google.auth.transport.requests import Request

from bot.adapters.blocking import BlockingPool
from bot.adapters.cloud_quotas import CloudQuotas
from bot.adapters.gcs_weights import GcsWeights
from bot.adapters.google_auth import cloud_credentials
from bot.adapters.hf_hub import HfHub
from bot.adapters.image_registry import HttpImageRegistry
from bot.settings import Settings
from skills.deploy.preflight import PreflightSources
from skills.errors import CloudUnavailable
from skills.ports import Store
from skills.short_cache import ShortCache


def make_preflight(settings: Settings, store: Store) -> PreflightSources:
    st = settings
    threads = max(2, st.cloud_client_threads)
    token = st.hf_token.get_secret_value() if st.hf_token else None

    async def google_token() -> str | None:
        """An access token for Artifact Registry's token endpoint (None without credentials)."""
        if st.google_anonymous_credentials:
            return None

        def fetch() -> str | None:
            creds, _ = cloud_credentials(st)
            creds.refresh(Request())  # type: ignore[no-untyped-call]
            return str(creds.token) if creds.token else None

        try:
            return await asyncio.to_thread(fetch)
        except (CloudUnavailable, GoogleAuthError, OSError):
            return None

    return PreflightSources(
        hub=HfHub(st.hf_endpoint, token, st.preflight_io_timeout_s, BlockingPool("Hugging Face Hub", threads)),
        registry=HttpImageRegistry(st.registry_endpoints, st.preflight_io_timeout_s, google_token),
        weights=GcsWeights(st, BlockingPool("Cloud Storage", threads)),
        quotas=CloudQuotas(st, BlockingPool("Cloud Quotas", threads)),
        cache=ShortCache(store, st.key, "preflight", st.preflight_cache_s) if st.preflight_cache_s else None,
        timeout_s=st.preflight_timeout_s,
        hub_url=st.hf_endpoint,
        hf_token_secret=st.hf_token_secret,
    )

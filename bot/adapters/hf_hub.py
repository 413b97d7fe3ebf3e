"""ModelHub port on the Hugging Face Hub through huggingface_hub (HfApi.model_info, then auth_check for gated
repos), with the bot's copy of the service's HF token.

huggingface_hub's error classes say what happened (huggingface_hub/errors.py, utils/_http.py
hf_raise_for_status): RepositoryNotFoundError for X-Error-Code RepoNotFound (also a 401 on a repo route: the Hub
answers 401 for missing, private and gated repos asked anonymously), GatedRepoError for X-Error-Code GatedRepo
(403: the token's account has not accepted the licence), HfHubHTTPError otherwise (401 "Invalid credentials in
Authorization header": the token itself is refused). A gated repo's metadata is public, so model_info alone says
nothing about access; auth_check (GET /api/models/REPO/auth-check) does.
"""

from __future__ import annotations

from typing import Any

from bot.adapters.blocking import BlockingPool
from skills.logs.redact import redact
from skills.ports import HubAccess, PreflightUnavailable


def bound_hub_session(timeout_s: float) -> None:
    """huggingface_hub's shared client has no timeout (default_client_factory: timeout=None) and auth_check takes
    none, so a Hub that accepts and never answers would hold a thread for ever; give the shared client one.
    The bot is the only user of huggingface_hub in its process."""
    import httpx2
    from huggingface_hub import set_client_factory
    from huggingface_hub.utils._http import default_client_factory

    def factory() -> httpx2.Client:
        client = default_client_factory()
        client.timeout = httpx2.Timeout(timeout_s)
        return client

    set_client_factory(factory)


class HfHub:
    """huggingface_hub is imported on the first check (a slow import start-up does not need)."""

    def __init__(self, endpoint: str, token: str | None, timeout_s: float, pool: BlockingPool) -> None:
        self._api: Any = None
        self._token: str | bool = token or False  # False: never fall back to a token from env or disk
        self._timeout_s = timeout_s
        self._pool = pool
        self._endpoint = endpoint

    async def access(self, repo_id: str) -> HubAccess:
        return await self._pool.run(self._access, repo_id)

    def _access(self, repo_id: str) -> HubAccess:
        import httpx2
        from huggingface_hub import HfApi
        from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

        if self._api is None:
            bound_hub_session(self._timeout_s)
            self._api = HfApi(endpoint=self._endpoint.rstrip("/"), token=self._token)
        with_token = bool(self._token)
        try:
            info = self._api.model_info(repo_id, token=self._token, timeout=self._timeout_s)
            gated = bool(info.gated)
            if gated and with_token:
                self._api.auth_check(repo_id, token=self._token)
        except GatedRepoError as exc:  # before RepositoryNotFoundError: it is a subclass
            return HubAccess(state="gated", gated=True, with_token=with_token, detail=_said(exc))
        except RepositoryNotFoundError as exc:
            return HubAccess(state="missing", with_token=with_token, detail=_said(exc))
        except HfHubHTTPError as exc:
            status = exc.response.status_code if exc.response is not None else None
            if status == 401:
                return HubAccess(state="token_rejected", with_token=with_token, detail=_said(exc))
            if status == 403:
                return HubAccess(state="forbidden", with_token=with_token, detail=_said(exc))
            raise PreflightUnavailable(f"the Hub at {self._endpoint} answered {status}: {_said(exc)}") from None
        except (httpx2.HTTPError, OSError) as exc:
            raise PreflightUnavailable(
                f"cannot reach the Hub at {self._endpoint} ({type(exc).__name__}); from Cloud Run the bot needs "
                "egress to huggingface.co."
            ) from None
        return HubAccess(state="ok", gated=gated, with_token=with_token)


def _said(exc: Any) -> str:
    """The Hub's own message (X-Error-Message or the body's error), redacted, short."""
    r = exc.response
    msg = ""
    if r is not None:
        msg = r.headers.get("X-Error-Message", "")
        if not msg:
            try:
                body = r.json()
                msg = str(body.get("error", "")) if isinstance(body, dict) else ""
            except ValueError:
                msg = ""
        msg = msg or f"HTTP {r.status_code}"
    return redact(msg)[:200]

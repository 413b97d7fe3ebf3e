"""The Cloud Logging client's HTTP session, with every request bounded by the per-call deadline.

Its own module so that bot/adapters/cloud_logging.py imports `requests` (via google.auth's transport) only
when a log query first needs the client, not at process start."""

from __future__ import annotations

from typing import Any

from google.auth.transport.requests import AuthorizedSession


class DeadlineSession(AuthorizedSession):
    """The client's HTTP session with every request bounded by the per-call deadline (the library's own
    default is 60 s per page)."""

    def __init__(self, creds: Any, timeout_s: float) -> None:
        super().__init__(creds)
        self._timeout_s = timeout_s

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        given = kwargs.get("timeout")
        kwargs["timeout"] = self._timeout_s if not isinstance(given, int | float) else min(given, self._timeout_s)
        kwargs.setdefault("max_allowed_time", self._timeout_s)
        return super().request(method, url, *args, **kwargs)

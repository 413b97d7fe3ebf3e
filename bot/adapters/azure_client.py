"""One Azure SDK client, built on first use, and the credential it signs with: what the ACA adapters share
(Container Apps, Log Analytics, Azure Monitor). No credential given: DefaultAzureCredential (environment variables,
a managed identity or `az login`), closed with the client; a given one (the sandbox's token) stays its owner's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class LazyAzureClient:
    def __init__(
        self, make: Callable[..., Any], credential: Any = None, connection_verify: str | bool | None = None
    ) -> None:
        self._make = make  # make(credential, **kw) -> the SDK's async client
        self._credential = credential
        self._own_credential = credential is None
        self._verify = connection_verify
        self._client: Any = None

    def get(self, **kw: Any) -> Any:
        if self._client is None:
            if self._credential is None:
                from azure.identity.aio import DefaultAzureCredential  # a slow import few processes need

                self._credential = DefaultAzureCredential()
            if self._verify is not None:
                kw["connection_verify"] = self._verify
            self._client = self._make(self._credential, **kw)
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self._own_credential and self._credential is not None:
            await self._credential.close()
            self._credential = None

"""Streamable HTTP for `gemma-sre mcp --http`: a bearer token from MCP_TOKENS is required on every request and
names the caller (the Slack user id the deployer check and the audit see). No token or a wrong one: 401 with
`WWW-Authenticate: Bearer` (RFC 6750 §3), before the MCP transport reads anything."""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping

from pydantic import SecretStr
from starlette.types import ASGIApp, Receive, Scope, Send

CALLER_KEY = "gemma_sre_caller"


def caller_for(tokens: Mapping[str, SecretStr], authorization: str) -> str | None:
    """The caller an `Authorization: Bearer …` header names (None: missing, malformed or unknown). Every token
    is compared in constant time, so timing does not tell how much of a guess was right."""
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    found = None
    for caller, secret in tokens.items():
        if hmac.compare_digest(secret.get_secret_value().encode(), token.encode()):
            found = caller
    return found


class BearerCallers:
    """ASGI middleware: HTTP requests without a known bearer token get 401; known ones carry their caller."""

    def __init__(self, app: ASGIApp, tokens: Mapping[str, SecretStr]) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        given = headers.get("authorization", "")
        caller = caller_for(self.tokens, given)
        if caller is None:
            error, why = (
                ("invalid_request", "an Authorization: Bearer token is required")
                if not given
                else ("invalid_token", "the bearer token is not one this server knows (MCP_TOKENS)")
            )
            body = json.dumps({"error": error, "error_description": why}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", f'Bearer realm="gemma-sre", error="{error}"'.encode()),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        scope[CALLER_KEY] = caller
        await self.app(scope, receive, send)

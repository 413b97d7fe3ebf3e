"""A Hugging Face Hub stand-in: the two routes huggingface_hub's HfApi.model_info and auth_check call, with the
Hub's error headers and status codes (what huggingface_hub's hf_raise_for_status reads).

GET /api/models/{ns}/{name}[?expand=…|securityStatus=…|blobs=…]: the repo's metadata (public even when gated);
GET /api/models/{ns}/{name}/auth-check: 200 when the caller may download. Errors as the Hub sends them:
X-Error-Code RepoNotFound (404 with a valid token, 401 anonymously: the Hub does not tell a missing repo from a
private one), GatedRepo (403 with a token whose account has not accepted the licence, 401 anonymously), and a
401 with X-Error-Message "Invalid credentials in Authorization header" for an unknown token. A token of kind
"no_gated_scope" (a fine-grained token without "read access to public gated repos") gets a 403 without a code.
`hold_s` holds every answer that long (a slow Hub).

Repo ids are case-insensitive on the Hub ("repo ids are case insensitive across the Hub": a huggingface_hub
maintainer, github.com/huggingface/huggingface_hub/issues/2090; model_info of 'mbzuai/bactrian-x' answers for
'MBZUAI/Bactrian-X', issues/1453): the stand-in finds a repo whatever the case of the id asked, and answers with the
repo's own spelling in `id`, as the Hub does.

The wordings are the Hub's as users quote them: "Access to model google/gemma-3-4b-pt is restricted and you are not
in the authorized list. Visit https://huggingface.co/google/gemma-3-4b-pt to ask for access." with a 403
(github.com/ariG23498/gemma3-object-detection/issues/5, github.com/kubeai-project/kubeai/issues/155); "... is
restricted. You must have access to it and be authenticated to access it. Please log in." with a 401
(github.com/vllm-project/semantic-router/issues/817); 404 {"error":"Repository not found"} for a repo the token
cannot see (github.com/trufflesecurity/trufflehog/pull/3000).
"""

from __future__ import annotations

import hashlib
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.sandbox.server import hold

_INFO_PARAMS = {"expand", "securityStatus", "blobs"}


class HubStandIn:
    def __init__(self) -> None:
        self.repos: dict[str, str | bool] = {}  # repo id -> gated ("manual" | "auto" | False)
        self.tokens: dict[str, set[str]] = {}  # token -> gated repos whose licence its account accepted
        self.no_gated_scope: set[str] = set()  # fine-grained tokens without access to public gated repos
        self.hold_s = 0.0
        self.requests: list[tuple[str, str]] = []  # (path, token or "")

    def add(self, repo: str, gated: str | bool = "manual") -> None:
        self.repos[repo] = gated

    def is_gated(self, repo: str) -> bool:
        """Whether the Hub gates `repo` (case-insensitive, as the Hub's ids are); False when it does not know it."""
        known = self._canonical(repo)
        return bool(self.repos[known]) if known is not None else False

    def _canonical(self, asked: str) -> str | None:
        """The repo's own spelling of an id asked in any letter case (None: no such repo)."""
        if asked in self.repos:
            return asked
        folded = asked.casefold()
        return next((r for r in self.repos if r.casefold() == folded), None)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/api/models/{ns}/{name}/auth-check", self._auth_check, methods=["GET"]),
                Route("/api/models/{ns}/{name}", self._info, methods=["GET"]),
            ]
        )

    async def _caller(self, request: Request) -> tuple[str | None, Response | None]:
        """(token or None, an error response when the token is refused)."""
        await hold(self.hold_s)
        auth = request.headers.get("authorization", "")
        self.requests.append((request.url.path, auth.removeprefix("Bearer ")))
        if not auth:
            return None, None
        token = auth.removeprefix("Bearer ")
        if not auth.startswith("Bearer ") or token not in self.tokens:
            msg = "Invalid credentials in Authorization header"
            return None, _error(401, msg, None)
        return token, None

    async def _info(self, request: Request) -> Response:
        token, refused = await self._caller(request)
        if refused:
            return refused
        unknown = set(request.query_params) - _INFO_PARAMS
        if unknown:
            return _error(400, f"Unknown query parameter(s): {', '.join(sorted(unknown))}", None)
        repo = self._canonical(f"{request.path_params['ns']}/{request.path_params['name']}")
        if repo is None:
            return _not_found(token)
        gated = self.repos[repo]
        sha = hashlib.sha1(repo.encode()).hexdigest()
        body: dict[str, Any] = {
            "_id": sha[:24],
            "id": repo,
            "modelId": repo,
            "author": repo.split("/", 1)[0],
            "sha": sha,
            "private": False,
            "gated": gated,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": ["transformers", "safetensors"],
            "pipeline_tag": "image-text-to-text",
            "library_name": "transformers",
            "createdAt": "2026-04-02T00:00:00.000Z",
            "lastModified": "2026-04-02T00:00:00.000Z",
            "siblings": [{"rfilename": "config.json"}, {"rfilename": "model.safetensors"}],
        }
        return JSONResponse(body)

    async def _auth_check(self, request: Request) -> Response:
        token, refused = await self._caller(request)
        if refused:
            return refused
        if request.query_params:
            return _error(400, "auth-check takes no query parameters", None)
        repo = self._canonical(f"{request.path_params['ns']}/{request.path_params['name']}")
        if repo is None:
            return _not_found(token)
        if not self.repos[repo]:
            return JSONResponse({})
        if token is None:
            msg = f"Access to model {repo} is restricted. You must have access to it and be authenticated to access it."
            return _error(401, msg, "GatedRepo")
        if token in self.no_gated_scope:
            msg = (
                f"Access to model {repo} is restricted: this fine-grained token does not have the permission to "
                "access public gated repositories."
            )
            return _error(403, msg, None)
        if repo not in self.tokens[token]:
            msg = (
                f"Access to model {repo} is restricted and you are not in the authorized list. Visit "
                f"{request.base_url}{repo} to ask for access."
            )
            return _error(403, msg, "GatedRepo")
        return JSONResponse({})


def _not_found(token: str | None) -> Response:
    return _error(404 if token else 401, "Repository not found", "RepoNotFound")


def _error(status: int, message: str, code: str | None) -> Response:
    headers = {"X-Error-Message": message}
    if code:
        headers["X-Error-Code"] = code
    return JSONResponse({"error": message}, status_code=status, headers=headers)

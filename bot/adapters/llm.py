"""The self-hosted model's OpenAI-compatible endpoint: base URL, auth, model id, and an AsyncOpenAI client.

Shared by the agent loop and the model-server tools (health, query, bench) so there is one place that knows
how to reach the model: VLLM_BASE_URL if set, else the Cloud Run service's URL, with an identity token when
the service is private.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

import httpx2  # the HTTP client the openai SDK (3.x) is built on

from bot.adapters.google_auth import IdentityTokens
from bot.settings import Settings
from skills.control_tokens import neutralise_messages
from skills.errors import UserFacingError
from skills.ports import (
    ChatChunk,
    ChatReply,
    ModelAPIError,
    ModelCard,
    ModelHTTPError,
    ModelServer,
    ModelTimeout,
    ModelUnreachable,
    Runtime,
)

if TYPE_CHECKING:  # openai is imported where used: a slow import (~0.5 s) a request may never need
    import openai
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletionMessageParam


def model_api_error(exc: openai.OpenAIError) -> ModelAPIError:
    """The port's view of an openai SDK error (the timeout check first: APITimeoutError is a connection error)."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return ModelTimeout(str(exc))
    if isinstance(exc, openai.APIConnectionError):
        return ModelUnreachable(str(exc))
    if isinstance(exc, openai.APIStatusError):
        return ModelHTTPError(str(exc), exc.status_code, _status_message(exc))
    return ModelAPIError(str(exc))


def _status_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        msg = body.get("message") or (body.get("error") or {}).get("message")
        if msg:
            return str(msg)[:300]
    return str(exc.message)[:300]


def _reasoning(delta: Any) -> str:
    """vLLM's reasoning parser fills `reasoning_content` (older) or `reasoning` (newer), outside the SDK's model."""
    extra = getattr(delta, "model_extra", None) or {}
    return getattr(delta, "reasoning_content", None) or extra.get("reasoning_content") or extra.get("reasoning") or ""


class OpenAIModelAPI:
    """The ModelAPI port over the openai SDK's AsyncOpenAI (vLLM's OpenAI-compatible server)."""

    def __init__(self, client: AsyncOpenAI) -> None:
        self.openai = client

    async def chat(
        self, model: str, messages: list[dict[str, Any]], *, max_tokens: int, tools: list[dict[str, Any]] | None = None
    ) -> ChatReply:
        import openai

        extra: dict[str, Any] = {"tools": tools, "tool_choice": "auto"} if tools else {}
        try:
            resp = await self.openai.chat.completions.create(
                model=model,
                messages=cast("list[ChatCompletionMessageParam]", neutralise_messages(messages)),
                max_tokens=max_tokens,
                **extra,
            )
        except openai.OpenAIError as exc:
            raise model_api_error(exc) from exc
        msg = resp.choices[0].message if resp.choices else None
        return ChatReply(content=(msg.content or "") if msg else "", tool_calls=len(msg.tool_calls or []) if msg else 0)

    async def chat_stream(
        self, model: str, messages: list[dict[str, Any]], *, max_tokens: int
    ) -> AsyncIterator[ChatChunk]:
        import openai

        try:
            stream = await self.openai.chat.completions.create(
                model=model,
                messages=cast("list[ChatCompletionMessageParam]", neutralise_messages(messages)),
                max_tokens=max_tokens,
                stream=True,
                stream_options={"include_usage": True},
            )
            async for chunk in stream:
                if chunk.usage is not None:
                    yield ChatChunk(
                        prompt_tokens=int(chunk.usage.prompt_tokens),
                        completion_tokens=int(chunk.usage.completion_tokens),
                    )
                for choice in chunk.choices:
                    delta = choice.delta
                    yield ChatChunk(
                        content=delta.content or "",
                        reasoning=_reasoning(delta),
                        tool_call=bool(delta.tool_calls),
                        finish_reason=choice.finish_reason,
                    )
        except openai.OpenAIError as exc:
            raise model_api_error(exc) from exc

    async def models(self) -> list[ModelCard]:
        import openai

        try:
            page = await self.openai.models.list()
        except openai.OpenAIError as exc:
            raise model_api_error(exc) from exc
        cards = []
        for m in page.data:
            value = (m.model_extra or {}).get("max_model_len")
            cards.append(ModelCard(id=m.id, max_model_len=int(value) if value else None))
        return cards


class LLMEndpoint:
    def __init__(self, settings: Settings, runtime: Runtime, model_server: ModelServer, tokens: IdentityTokens) -> None:
        self._settings = settings
        self._runtime = runtime
        self._model_server = model_server
        self._tokens = tokens
        self._model_id = settings.vllm_model_id
        # One connection pool for every client we hand out (clients differ only in auth headers).
        self._http = httpx2.AsyncClient(timeout=httpx2.Timeout(settings.model_timeout_s, connect=10.0))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def base_url(self) -> str:
        """The server root (no /v1)."""
        if self._settings.vllm_base_url:
            return self._settings.vllm_base_url.rstrip("/")
        info = await self._runtime.get_service(self._settings.vllm_service_name)
        if not info.uri:
            raise UserFacingError(
                f"Service {info.name} has no URL yet.", "Set VLLM_BASE_URL, or wait until the service is ready."
            )
        return info.uri.rstrip("/")

    async def client(self, *, timeout_s: float | None = None) -> OpenAIModelAPI:
        """The ModelAPI port (what skills speak); `.openai` is the SDK client for the agent's own calls."""
        return OpenAIModelAPI(await self.openai_client(timeout_s=timeout_s))

    async def openai_client(self, *, timeout_s: float | None = None) -> AsyncOpenAI:
        from openai import AsyncOpenAI

        base = await self.base_url()
        headers = await self._tokens.header_for(base)
        api_key = self._settings.vllm_api_key.get_secret_value() if self._settings.vllm_api_key else "unused"
        return AsyncOpenAI(
            base_url=base + "/v1",
            api_key=api_key,
            default_headers=headers,
            http_client=self._http,
            timeout=timeout_s or self._settings.model_timeout_s,
            max_retries=0,  # retries (cold starts) are the caller's decision, with user-visible progress
        )

    async def auth_headers(self) -> dict[str, str]:
        """The auth headers client() sends, for callers with their own HTTP client (the bench's load
        generator): VLLM_API_KEY as a bearer token, replaced by the identity token when the service needs one."""
        key = self._settings.vllm_api_key.get_secret_value() if self._settings.vllm_api_key else ""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        headers.update(await self._tokens.header_for(await self.base_url()))
        return headers

    async def model_id(self) -> str:
        """VLLM_MODEL_ID, else the first id the server lists (cached for the process)."""
        if self._model_id:
            return self._model_id
        ids, probe = await self._model_server.models(await self.base_url())
        if not ids:
            raise UserFacingError(
                f"Could not discover the model id from /v1/models ({probe.error or 'empty list'}).",
                "Set VLLM_MODEL_ID, or check that the model server is up (`/gemma status`).",
            )
        self._model_id = ids[0]
        return self._model_id

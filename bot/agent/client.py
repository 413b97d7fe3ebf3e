"""One streamed chat completion against the self-hosted model, reached only through the LLMEndpoint.

Streaming keeps a slow generation from looking like a dead server (each chunk resets the read timeout) and
is what vLLM serves best. Reasoning deltas (`reasoning`, the field vLLM's Gemma 4 recipe names; older servers
said `reasoning_content`) are dropped here: they are never shown to users and never sent back to the model.

With tools, the request says `skip_special_tokens: false` (skills/data/vllm_images.yaml `serving`): Gemma 4's
tool-call delimiters are special tokens, and a server that strips them leaves the gemma4 parser nothing to parse
(vLLM's gemma4 tool parser sets it itself on the releases we pin; older ones relied on the request).

Every message leaves through here with its Gemma 4 control-token strings escaped (skills/control_tokens.py): a
question, an alert summary, a log line or a tool result can never become a turn marker or a tool call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from bot.adapters.llm import OpenAIModelAPI, model_api_error
from bot.agent.coldstart import ColdStart
from skills.bench.sweep_preview import server_max_model_len
from skills.capacity.image_compat import load_image_data
from skills.control_tokens import neutralise_messages
from skills.errors import UserFacingError
from skills.observe.query import explain_model_error

if TYPE_CHECKING:  # openai is imported where used: a slow import a request may never need
    import openai

    from bot.adapters.llm import LLMEndpoint

TOOL_FLAGS = "--enable-auto-tool-choice --tool-call-parser gemma4"


def tool_request_fields() -> dict[str, Any]:
    """The request fields tool calling needs on Gemma 4 (vLLM's recipe; see skills/data/vllm_images.yaml)."""
    return dict(load_image_data().serving.request_fields)


class ToolCallingDisabled(UserFacingError):
    pass


@dataclass
class StructuredCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the server sent it


@dataclass
class Completion:
    content: str
    tool_calls: list[StructuredCall] = field(default_factory=list)
    finish_reason: str = ""
    model_s: float = 0.0  # time inside the HTTP call, including cold-start waits


class ModelClient:
    def __init__(
        self, endpoint: LLMEndpoint, cold: ColdStart, max_tokens: int = 1500, temperature: float = 0.2
    ) -> None:
        self._endpoint = endpoint
        self._cold = cold
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._client: openai.AsyncOpenAI | None = None
        self._model = ""
        self._context: int | None = None
        self._root = ""
        self.requests = 0

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    async def _connect(self) -> openai.AsyncOpenAI:
        if self._client is None:
            self._client = await self._endpoint.openai_client()
            self._model = await self._endpoint.model_id()
            self._root = str(self._client.base_url).rstrip("/").removesuffix("/v1")
            # vLLM puts the served --max-model-len on each model card of /v1/models (ModelCard.max_model_len in
            # vllm/entrypoints/openai/protocol.py); other servers may not, and then no limit is enforced here.
            self._context = await server_max_model_len(OpenAIModelAPI(self._client), self._model)
        return self._client

    async def context_limit(self) -> int | None:
        """The served context length (max_model_len), or None when the server does not say."""
        import openai

        try:
            await self._connect()
        except (openai.OpenAIError, UserFacingError):
            return None
        return self._context

    async def count_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int | None:
        """Exact prompt tokens from vLLM's POST /tokenize (its TokenizeChatRequest takes `messages` and, on
        current vLLM, `tools`, rendered with the chat template as the server will count them), or None when
        the server has no /tokenize."""
        import openai

        client = await self._connect()
        body: dict[str, Any] = {"model": self._model, "messages": neutralise_messages(messages)}
        if tools:
            body["tools"] = tools
        try:
            resp = await client.post(self._root + "/tokenize", cast_to=httpx.Response, body=body)
            data = resp.json()
        except (openai.OpenAIError, ValueError):
            return None
        count = data.get("count") if isinstance(data, dict) else None
        return int(count) if isinstance(count, int) else None

    @property
    def cold_waited_s(self) -> float:
        return self._cold.waited_s

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        tool_choice: str = "auto",
        timeout_s: float | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        import openai

        t0 = time.perf_counter()
        try:
            result = await self._cold.call(lambda: self._once(messages, tools, tool_choice, timeout_s, max_tokens))
        except openai.BadRequestError as exc:
            raise _bad_request(exc) from None
        except openai.OpenAIError as exc:
            raise explain_model_error(model_api_error(exc), "The model could not answer") from None
        result.model_s = time.perf_counter() - t0
        return result

    async def _once(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        tool_choice: str,
        timeout_s: float | None,
        max_tokens: int | None = None,
    ) -> Completion:
        client = await self._connect()
        self.requests += 1
        extra: dict[str, Any] = {}
        if tools:
            extra = {"tools": tools, "tool_choice": tool_choice, "extra_body": dict(tool_request_fields())}
        stream = await client.chat.completions.create(
            model=self._model,
            # The one door to the model: no outside text in any message may become a Gemma 4 control token.
            messages=neutralise_messages(messages),  # type: ignore[arg-type]
            stream=True,
            max_tokens=max_tokens or self._max_tokens,
            temperature=self._temperature,
            timeout=timeout_s,
            **extra,
        )
        from openai.lib.streaming.chat import ChatCompletionStreamState

        # The SDK's own accumulator joins content and tool-call deltas (by `index`; id and name on the first
        # delta, arguments in pieces, as vLLM streams them). No input_tools: ours are not strict, so nothing is
        # parsed, and the snapshot is read directly (get_final_completion refuses finish_reason "length").
        state = ChatCompletionStreamState()
        seen = False
        async for chunk in stream:  # type: ignore[union-attr]
            state.handle_chunk(chunk)
            seen = True
        if not seen:
            return Completion(content="")
        choices = state.current_completion_snapshot.choices
        if not choices:
            return Completion(content="")
        message = choices[0].message
        structured = [
            StructuredCall(
                id=tc.id or f"call_{self.requests}_{i}", name=tc.function.name, arguments=tc.function.arguments
            )
            for i, tc in enumerate(message.tool_calls or [])
        ]
        return Completion(
            content=message.content or "", tool_calls=structured, finish_reason=choices[0].finish_reason or ""
        )


def _bad_request(exc: openai.BadRequestError) -> UserFacingError:
    text = str(exc)
    if "tool choice" in text.lower() or "enable-auto-tool-choice" in text or "tool-call-parser" in text:
        return ToolCallingDisabled(
            "The model server refused tool calling (HTTP 400): vLLM was started without tool-call support.",
            f"Start vLLM with `{TOOL_FLAGS}` (and `--reasoning-parser gemma4`), e.g. redeploy the service "
            "with those args.",
        )
    if "context length" in text.lower() or "max_model_len" in text or "maximum context" in text.lower():
        return UserFacingError(
            "The request was longer than the model's context window (HTTP 400).",
            "Use a shorter log window (`--since`), or raise --max-model-len if KV cache allows.",
        )
    return explain_model_error(model_api_error(exc), "The model rejected the request")

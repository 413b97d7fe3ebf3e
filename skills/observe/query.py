"""One streamed chat completion with honest statistics.

- TTFT is taken at the first chunk that carries generated text (content, reasoning or a tool call): vLLM's
  first chat chunk carries only the role, and timing it would report ~0 s.
- Output tokens come from the server's usage (`stream_options.include_usage`), never from counting chunks:
  a chunk can carry several tokens.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel

from skills.errors import InvalidInput, UserFacingError
from skills.ports import ChatChunk, ModelAPI, ModelAPIError, ModelHTTPError, ModelTimeout, ModelUnreachable

MAX_PROMPT_CHARS = 8000


class QueryResult(BaseModel):
    model: str
    text: str
    finish_reason: str | None = None
    ttft_s: float | None = None
    total_s: float
    prompt_tokens: int | None = None
    output_tokens: int | None = None  # from the server's usage; None if the server sent none
    chunks: int = 0  # content-bearing chunks (not tokens)
    tokens_per_s: float | None = None  # output tokens / total time
    decode_tokens_per_s: float | None = None  # (output tokens - 1) / (total - TTFT): generation speed alone


def explain_model_error(exc: ModelAPIError, what: str) -> UserFacingError:
    """One readable sentence for a failed call to the model's API."""
    if isinstance(exc, ModelTimeout):
        return UserFacingError(
            f"{what}: the model server did not answer in time.",
            "If it scales to zero it may be cold (loading weights takes minutes); see `/gemma status`.",
        )
    if isinstance(exc, ModelUnreachable):
        return UserFacingError(f"{what}: could not connect to the model server ({exc}).", "Check `/gemma status`.")
    if isinstance(exc, ModelHTTPError):
        hint = ""
        if exc.status_code in (401, 403):
            hint = "The bot's service account needs roles/run.invoker on the service (or set VLLM_API_KEY)."
        elif exc.status_code in (429, 503):
            hint = "No instance is free (cold start or max-instances reached); try again in a minute."
        return UserFacingError(f"{what}: HTTP {exc.status_code} {exc.message}".strip(), hint)
    return UserFacingError(f"{what}: {exc}")


async def stream_query(client: ModelAPI, model: str, prompt: str, max_tokens: int = 512) -> QueryResult:
    prompt = prompt.strip()
    if not prompt:
        raise InvalidInput("Nothing to ask.", "Usage: `/gemma query PROMPT`.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise InvalidInput(f"The prompt is {len(prompt)} characters; the limit is {MAX_PROMPT_CHARS}.")
    parts: list[str] = []
    ttft: float | None = None
    usage: ChatChunk | None = None
    finish: str | None = None
    chunks = 0
    t0 = time.perf_counter()
    try:
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        async for chunk in client.chat_stream(model, messages, max_tokens=max_tokens):
            if chunk.completion_tokens is not None:
                usage = chunk
            # TTFT at the first chunk with generated text of any kind (see the module's docstring)
            if chunk.content or chunk.reasoning or chunk.tool_call:
                if ttft is None:
                    ttft = time.perf_counter() - t0
                chunks += 1
                parts.append(chunk.content)
            if chunk.finish_reason:
                finish = chunk.finish_reason
    except ModelAPIError as exc:
        raise explain_model_error(exc, "The query failed") from None
    total = time.perf_counter() - t0
    out = usage.completion_tokens if usage is not None else None
    res = QueryResult(
        model=model,
        text="".join(parts),
        finish_reason=finish,
        ttft_s=ttft,
        total_s=total,
        prompt_tokens=usage.prompt_tokens if usage is not None else None,
        output_tokens=out,
        chunks=chunks,
    )
    if out:
        res.tokens_per_s = out / total if total > 0 else None
        if ttft is not None and out > 1 and total > ttft:
            res.decode_tokens_per_s = (out - 1) / (total - ttft)
    return res

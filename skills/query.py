"""One streamed chat completion with honest statistics.

- TTFT is taken at the first chunk that carries generated text (content, reasoning or a tool call): vLLM's
  first chat chunk carries only the role, and timing it would report ~0 s.
- Output tokens come from the server's usage (`stream_options.include_usage`), never from counting chunks:
  a chunk can carry several tokens.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .errors import InvalidInput, UserFacingError

if TYPE_CHECKING:  # openai is imported where used: a slow import a request may never need
    import openai

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


def _delta_text(delta: Any) -> str:
    text = getattr(delta, "content", None) or ""
    extra = getattr(delta, "model_extra", None) or {}
    reasoning = getattr(delta, "reasoning_content", None) or extra.get("reasoning_content") or extra.get("reasoning")
    return text + (reasoning or "")


def explain_openai_error(exc: openai.OpenAIError, what: str) -> UserFacingError:
    """One readable sentence for a failed call to the model's API."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return UserFacingError(
            f"{what}: the model server did not answer in time.",
            "If it scales to zero it may be cold (loading weights takes minutes); see `/gemma status`.",
        )
    if isinstance(exc, openai.APIConnectionError):
        return UserFacingError(f"{what}: could not connect to the model server ({exc}).", "Check `/gemma status`.")
    if isinstance(exc, openai.APIStatusError):
        msg = _status_message(exc)
        hint = ""
        if exc.status_code in (401, 403):
            hint = "The bot's service account needs roles/run.invoker on the service (or set VLLM_API_KEY)."
        elif exc.status_code in (429, 503):
            hint = "No instance is free (cold start or max-instances reached); try again in a minute."
        return UserFacingError(f"{what}: HTTP {exc.status_code} {msg}".strip(), hint)
    return UserFacingError(f"{what}: {exc}")


def _status_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        msg = body.get("message") or (body.get("error") or {}).get("message") if isinstance(body, dict) else None
        if msg:
            return str(msg)[:300]
    return str(exc.message)[:300]


async def stream_query(client: openai.AsyncOpenAI, model: str, prompt: str, max_tokens: int = 512) -> QueryResult:
    import openai

    prompt = prompt.strip()
    if not prompt:
        raise InvalidInput("Nothing to ask.", "Usage: `/gemma query PROMPT`.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise InvalidInput(f"The prompt is {len(prompt)} characters; the limit is {MAX_PROMPT_CHARS}.")
    parts: list[str] = []
    ttft: float | None = None
    usage: Any = None
    finish: str | None = None
    chunks = 0
    t0 = time.perf_counter()
    try:
        stream = await client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=max_tokens,
            stream=True,
            stream_options={"include_usage": True},
        )
        async for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                text = _delta_text(choice.delta)
                if text or choice.delta.tool_calls:
                    if ttft is None:
                        ttft = time.perf_counter() - t0
                    chunks += 1
                    parts.append(getattr(choice.delta, "content", None) or "")
                if choice.finish_reason:
                    finish = choice.finish_reason
    except openai.OpenAIError as exc:
        raise explain_openai_error(exc, "The query failed") from None
    total = time.perf_counter() - t0
    out = int(usage.completion_tokens) if usage is not None else None
    res = QueryResult(
        model=model,
        text="".join(parts),
        finish_reason=finish,
        ttft_s=ttft,
        total_s=total,
        prompt_tokens=int(usage.prompt_tokens) if usage is not None else None,
        output_tokens=out,
        chunks=chunks,
    )
    if out:
        res.tokens_per_s = out / total if total > 0 else None
        if ttft is not None and out > 1 and total > ttft:
            res.decode_tokens_per_s = (out - 1) / (total - ttft)
    return res

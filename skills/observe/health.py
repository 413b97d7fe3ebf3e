"""Deep health: not just /health, but a real chat completion and whether tool calling works.

Tool calling needs vLLM flags (`--enable-auto-tool-choice --tool-call-parser gemma4`); without them any
request carrying `tools` gets HTTP 400 '"auto" tool choice requires --enable-auto-tool-choice and
--tool-call-parser to be set'. The bot's agent depends on tool calling, so this check names the flags to add.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel

from skills.observe.query import explain_model_error
from skills.ports import ModelAPI, ModelAPIError, ModelHTTPError, ModelServer, ProbeResult
from skills.text import shorten

TOOL_FLAGS = "--enable-auto-tool-choice --tool-call-parser gemma4"
_TRIVIAL_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_current_time",
        "description": "Return the current UTC time.",
        "parameters": {"type": "object", "properties": {}, "required": []},
    },
}


class DeepHealth(BaseModel):
    base_url: str
    model: str = ""
    http_health: ProbeResult | None = None
    chat_ok: bool = False
    chat_latency_ms: float | None = None
    chat_reply: str = ""
    chat_error: str = ""
    tools: Literal["enabled", "disabled", "unknown"] = "unknown"
    tool_called: bool = False  # the model actually answered with a tool call
    tools_detail: str = ""
    hints: list[str] = []

    @property
    def ok(self) -> bool:
        return self.chat_ok and self.tools == "enabled"


async def deep_health(
    client: ModelAPI, model: str, base_url: str, model_server: ModelServer | None = None
) -> DeepHealth:
    h = DeepHealth(base_url=base_url, model=model)
    if model_server is not None:
        h.http_health = await model_server.health(base_url)

    t0 = time.perf_counter()
    try:
        reply = await client.chat(model, [{"role": "user", "content": "Reply with the single word OK."}], max_tokens=8)
        h.chat_ok = True
        h.chat_reply = shorten(reply.content.strip(), 200)
    except ModelAPIError as exc:
        err = explain_model_error(exc, "chat completion")
        h.chat_error = err.message
        if err.hint:
            h.hints.append(err.hint)
    h.chat_latency_ms = round((time.perf_counter() - t0) * 1000, 1)
    if not h.chat_ok:
        h.tools_detail = "not checked (the chat completion failed)"
        return h

    try:
        reply = await client.chat(
            model, [{"role": "user", "content": "What time is it? Use the tool."}], max_tokens=64, tools=[_TRIVIAL_TOOL]
        )
        h.tools = "enabled"
        h.tool_called = reply.tool_calls > 0
        h.tools_detail = (
            "the model answered with a tool call"
            if h.tool_called
            else "accepted; the model answered in text (fine for a trivial prompt; check --tool-call-parser)"
        )
    except ModelHTTPError as exc:
        if exc.status_code != 400:
            h.tools_detail = explain_model_error(exc, "tool call").message
            return h
        text = str(exc)
        if "tool choice requires" in text or "enable-auto-tool-choice" in text:
            h.tools = "disabled"
            h.tools_detail = "HTTP 400: auto tool choice is not enabled on the server"
            h.hints.append(f"Add `{TOOL_FLAGS}` to the vLLM args (and `--reasoning-parser gemma4` for Gemma 4).")
        else:
            h.tools_detail = f"HTTP 400: {explain_model_error(exc, 'tool call').message}"
    except ModelAPIError as exc:
        h.tools_detail = explain_model_error(exc, "tool call").message
    return h

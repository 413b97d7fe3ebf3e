"""Streamed tool calls: the scripted stand-in streams them as vLLM's tool parsers do, and the bot's client
assembles them with the openai SDK's ChatCompletionStreamState (real SDK, real HTTP, no fakes)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from bot.agent.client import ModelClient
from bot.agent.coldstart import ColdStart
from bot.sandbox.openai_script import OpenAIScript, Turn, call, say
from bot.sandbox.server import serve

MODEL = "google/gemma-4-12b-it"
# Long, nested, non-ASCII arguments: split across many deltas, some mid-escape and mid-character.
BIG = {"service": "vllm-gemma4", "filter": 'textPayload:"CUDA out of memory" — ünïcode', "lines": list(range(40))}


class Endpoint:
    def __init__(self, url: str) -> None:
        self.url = url

    async def openai_client(self, *, timeout_s: float | None = None) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.url + "/v1", api_key="unused", max_retries=0)

    async def model_id(self) -> str:
        return MODEL


@pytest.fixture
def stand_in() -> Iterator[tuple[OpenAIScript, str]]:
    script = OpenAIScript(model_id=MODEL)
    with serve(script.app) as url:
        yield script, url


def tools() -> list[dict[str, Any]]:
    params = {"type": "object", "properties": {}}
    return [{"type": "function", "function": {"name": n, "parameters": params}} for n in ("get_logs", "status")]


async def raw_deltas(url: str) -> list[dict[str, Any]]:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "stream": True, "tools": tools()}
    out = []
    async with httpx.AsyncClient() as http, http.stream("POST", url + "/v1/chat/completions", json=body) as resp:
        async for line in resp.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                out.append(json.loads(line[6:])["choices"][0]["delta"])
    return out


async def test_stand_in_streams_tool_calls_like_vllm(stand_in: tuple[OpenAIScript, str]) -> None:
    script, url = stand_in
    script.push(Turn(tool_calls=[("get_logs", json.dumps(BIG)), ("status", "{}")]))
    calls = [tc for d in await raw_deltas(url) for tc in d.get("tool_calls", [])]
    first = [tc for tc in calls if "id" in tc]
    # vLLM: the first delta of a call carries index, id, type and the name only (no "arguments" key) ...
    assert [tc["index"] for tc in first] == [0, 1]
    assert all(tc["type"] == "function" and set(tc["function"]) == {"name"} for tc in first)
    # ... then the arguments in pieces that carry only the index.
    pieces = [tc for tc in calls if "id" not in tc and tc["index"] == 0]
    assert len(pieces) > 10 and all(set(tc) == {"index", "function"} for tc in pieces)
    assert "".join(tc["function"]["arguments"] for tc in pieces) == json.dumps(BIG)


async def test_client_assembles_parallel_calls_split_across_chunks(stand_in: tuple[OpenAIScript, str]) -> None:
    script, url = stand_in
    script.push(call("get_logs", BIG, ("status", {})))
    client = ModelClient(Endpoint(url), ColdStart(budget_s=1.0))
    comp = await client.complete([{"role": "user", "content": "why?"}], tools())
    assert comp.finish_reason == "tool_calls"
    assert [c.name for c in comp.tool_calls] == ["get_logs", "status"]
    assert json.loads(comp.tool_calls[0].arguments) == BIG and json.loads(comp.tool_calls[1].arguments) == {}
    assert all(c.id for c in comp.tool_calls) and len({c.id for c in comp.tool_calls}) == 2  # the server's ids


async def test_client_keeps_content_and_drops_reasoning(stand_in: tuple[OpenAIScript, str]) -> None:
    script, url = stand_in
    script.push(say("The KV cache is too small for --max-model-len.", reasoning="thinking about it " * 5))
    comp = await ModelClient(Endpoint(url), ColdStart(budget_s=1.0)).complete([{"role": "user", "content": "?"}], None)
    assert comp.content == "The KV cache is too small for --max-model-len."
    assert comp.tool_calls == [] and comp.finish_reason == "stop"

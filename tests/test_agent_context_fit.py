"""Every request fits the served context: an analysis against a 4,096-token server completes.

The scripted server advertises max_model_len on its model card (as vLLM does), counts tokens on /tokenize
more harshly than the bot's 4-characters estimate, and rejects a longer request with vLLM's HTTP 400.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bot.sandbox.openai_script import OpenAIScript, call, say
from bot.sandbox.server import serve
from tests.agent_helpers import MODEL_ID, log_line, plan_json

pytest_plugins = ["tests.agent_fixtures"]


@pytest.fixture
def script() -> Iterator[OpenAIScript]:
    standin = OpenAIScript(model_id=MODEL_ID, max_model_len=4096)
    with serve(standin.app) as url:
        standin.base_url = url  # type: ignore[attr-defined]
        yield standin


async def test_analysis_against_a_4096_token_server_completes(make_deps: Any, script: OpenAIScript) -> None:
    noisy = [log_line(f"worker {i} failed to allocate KV cache block {i * 7919} on rank {i % 4}") for i in range(300)]
    script.push(
        call("get_logs", {"since_minutes": 60, "min_severity": "ERROR"}),
        call("service_status"),
        say(plan_json()),
    )
    deps = make_deps(extra_entries=noisy)
    result = await deps.agent.analyze(since_minutes=60)
    assert result.error == "" and result.plan.fallback_note == ""
    loop = result.loop
    assert loop is not None and loop.stop_reason == "answered"
    assert loop.context_limit == 4096
    # Every request the server saw fitted (it would have answered 400 otherwise), and /tokenize was used.
    reqs = script.chat_requests
    assert len(reqs) == 3
    for r in reqs:
        assert script.count_tokens(r) + r["max_tokens"] <= 4096
    assert script.tokenize_calls >= 1
    # The loop reports its largest request (tool schemas included); the answer kept at least 512 tokens.
    assert loop.largest_request > 0 and all(r["max_tokens"] >= 512 for r in reqs)


async def test_the_server_rejects_an_oversized_request_with_vllms_400(script: OpenAIScript) -> None:
    import openai

    client = openai.AsyncOpenAI(base_url=script.base_url + "/v1", api_key="x")  # type: ignore[attr-defined]
    with pytest.raises(openai.BadRequestError) as err:
        await client.chat.completions.create(
            model=MODEL_ID, messages=[{"role": "user", "content": "x " * 8000}], max_tokens=100
        )
    assert "maximum context length is 4096 tokens" in str(err.value)
    models = await client.models.list()
    assert (models.data[0].model_extra or {})["max_model_len"] == 4096

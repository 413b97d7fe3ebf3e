"""The sandbox's vLLM answers as what was deployed (issue 49): `/gemma metrics` reports the KV capacity the
deploy's plan predicted for the configuration that now serves, for one deploy and the next, not a constant;
/v1/models names the checkpoint and context the serving revision runs."""

from __future__ import annotations

import re

import httpx

from bot.sandbox.console_session import ConsoleSession
from tests.test_truthful_writes import console

__all__ = ["console"]  # a fixture, used by name


def _tokens(pattern: str, text: str) -> int:
    found = re.search(pattern, text)
    assert found, text
    return int(found.group(1).replace(",", ""))


async def test_metrics_report_the_kv_capacity_the_plan_predicted(console: ConsoleSession) -> None:
    assert console.sandbox is not None
    seen = set()
    for flags in ("--max-model-len 8192 --kv-cache-dtype fp8", "--max-model-len 32768"):
        plan = await console.line(f"/gemma deploy gemma4-12b-qat-l4 {flags}")
        predicted = _tokens(r"KV cache ([\d,]+) tokens", plan)
        done = await console.line("click Confirm")
        assert "is ready and serving 100% of traffic" in done, done

        metrics = await console.line("/gemma metrics")
        assert _tokens(r"KV cache capacity\s+([\d,]+) tokens", metrics) == predicted, (plan, metrics)
        async with httpx.AsyncClient() as client:
            card = (await client.get(f"{console.sandbox.urls['vllm']}/v1/models")).json()["data"][0]
        assert card["max_model_len"] == int(flags.split()[1]) and card["id"].endswith("qat-w4a16-ct")
        seen.add(predicted)
    assert len(seen) == 2  # two configurations, two capacities


async def test_a_deploys_durations_are_on_one_clock(console: ConsoleSession) -> None:
    """The watch's "ready after" and the self-check's cold start are on the time the revision's vLLM logged its
    weights load in (the sandbox's clock, there): the whole holds its part."""
    await console.line("/gemma deploy gemma4-12b-qat-l4 --max-model-len 8192")
    done = await console.line("click Confirm")
    load = _tokens(r"weights load: (\d+) s", done)
    cold = _tokens(r"cold start (\d+) s \(predicted", done)
    assert cold > load, done

"""Status during a canary split says what the world shows (issue 49): the split with each revision's share and tag,
one instance per revision taking traffic (the plan's second GPU instance), and request rates whose parts add up to
the total, read through Cloud Monitoring's aggregation as the real API applies it (the stand-in aligns and sums
per response code class across the revisions' series)."""

from __future__ import annotations

import re

from bot.sandbox.console_session import ConsoleSession
from tests.test_truthful_writes import console

__all__ = ["console"]  # a fixture, used by name


def _rates(status: str) -> tuple[float, float, float]:
    found = re.search(r"Requests\s+([\d.]+)/s now, peak [\d.]+/s \(2xx ([\d.]+)/s, 5xx ([\d.]+)/s\)", status)
    assert found, status
    total, ok, errors = (float(g) for g in found.groups())
    return total, ok, errors


async def test_status_shows_the_split_its_instances_and_rates_that_add_up(console: ConsoleSession) -> None:
    before = await console.line("/gemma status --fresh")
    assert "Traffic" not in before and re.search(r"Instances\s+1 now", before), before
    await console.line("/gemma deploy gemma4-12b-qat-l4 --max-model-len 8192 --canary 20")
    await console.line("click Confirm")
    revisions = await console.line("/gemma revisions")
    canary = re.search(r"`(vllm-gemma4-canary-[\w-]+)`\s+● ready\s+20% traffic", revisions)
    assert canary, revisions
    status = await console.line("/gemma status --fresh")
    split = re.search(r"Traffic\s+split: 80% `([\w-]+)` \(stable\) · 20% `([\w-]+)` \(canary\)", status)
    assert split and split.group(2) == canary.group(1), status
    assert re.search(r"Instances\s+2 now", status), status  # a GPU instance per revision that takes traffic
    total, ok, errors = _rates(status)
    assert abs(ok + errors - total) <= 0.02, status  # the parts are the total, to the rounding of two decimals


async def test_after_a_redeploy_the_rate_is_the_services_not_each_revisions_last(console: ConsoleSession) -> None:
    """A revision that stops taking traffic has a rate of 0 from then on in its request history, so the service's
    rate after a redeploy is its users' (16 req/s in the sandbox), not the old revision's last point added on."""
    before, _, _ = _rates_or_total(await console.line("/gemma status --fresh"))
    await console.line("/gemma deploy gemma4-12b-qat-l4 --max-model-len 8192")
    await console.line("click Confirm")
    assert console.sandbox is not None
    console.sandbox.tick()
    after, _, _ = _rates_or_total(await console.line("/gemma status --fresh"))
    assert abs(after - before) < 1.0, (before, after)


def _rates_or_total(status: str) -> tuple[float, float, float]:
    found = re.search(r"Requests\s+([\d.]+)/s now", status)
    assert found, status
    return float(found.group(1)), 0.0, 0.0

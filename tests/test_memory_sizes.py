"""One reader of memory sizes (skills/serving/sizes.py): Kubernetes quantities, as Cloud Run's memory limit is one, so a
plan, a price and the sandbox read `32G` the same way (issue 44: one reader took it as 32 GiB, the other as
32 x 10^9 bytes = 29.8 GiB, so one service was planned and priced at two sizes)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.deps import Deps
from bot.sandbox.cloud import Sandbox
from skills.capacity.cost import hourly_cost
from skills.errors import InvalidInput
from skills.ports import ServiceInfo
from skills.serving.sizes import gib
from tests.deploy_helpers import command
from tests.test_canary import SERVICE, deps, sandbox  # noqa: F401  (the sandbox's Cloud Run and the bot on it)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("32Gi", 32.0),
        ("16384Mi", 16.0),
        ("512Mi", 0.5),
        ("1Ti", 1024.0),
        ("32G", 32e9 / 2**30),  # decimal: 29.80 GiB
        ("512M", 512e6 / 2**30),
        ("4000000k", 4e9 / 2**30),
        ("34359738368", 32.0),  # a plain number is bytes
        (" 8Gi ", 8.0),
    ],
)
def test_binary_and_decimal_suffixes_mean_what_kubernetes_says(text: str, expected: float) -> None:
    assert gib(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["32GB", "32gi", "32 GiB", "lots", "", "-1Gi", "1.5.2Gi"])
def test_anything_else_is_refused_with_the_forms_that_work(text: str) -> None:
    with pytest.raises(InvalidInput) as err:
        gib(text)
    assert "32Gi" in (err.value.hint or "")


def test_a_service_written_in_decimal_gigabytes_is_priced_at_its_real_size() -> None:
    def cost(memory: str) -> tuple[float, float]:
        c = hourly_cost(ServiceInfo(name="s", gpu_type="nvidia-l4", gpu_count=1, cpu="8", memory=memory))
        return c.memory_gib, c.usd_per_hour

    (mem_g, usd_g), (mem_gi, usd_gi) = cost("32G"), cost("32Gi")
    assert mem_g == pytest.approx(29.8, abs=0.01) and mem_gi == 32
    # Memory is billed per GiB-second (skills/data/prices.yaml: 0.000002 $/GiB-s, tier 1, instance-based).
    assert usd_gi - usd_g == pytest.approx((32 - 32e9 / 2**30) * 0.000002 * 3600, rel=0.01)


@pytest.mark.parametrize(
    ("memory", "shown_gib", "usd"),
    # 8 vCPU + one L4 + memory at us-central1's instance-based rates; 2.2 GiB less is 1.6 cents less an hour
    [("32G", "29.8 GiB", "$1.41/h"), ("32Gi", "32 GiB", "$1.42/h")],
)
async def test_what_cost_and_a_canary_plan_say_for_one_service_agree(
    deps: Deps,  # noqa: F811
    sandbox: Sandbox,  # noqa: F811
    memory: str,
    shown_gib: str,
    usd: str,
) -> None:
    """A service whose memory limit is written `32G`: `/gemma cost` and a canary plan's price (a second instance of
    the same configuration) say the same size and price, and both differ from `32Gi`. Before, `/gemma cost` read
    29.8 GiB ($1.41/h) and the canary plan 32 GiB ($1.42/h) for the same `32G` service."""
    container: dict[str, Any] = sandbox.cloud_run.services[SERVICE]["template"]["containers"][0]
    container["resources"]["limits"].update(memory=memory, cpu="8")
    cost, _ = await command(deps, "cost")
    assert cost is not None and cost.title == f":moneybag: {SERVICE}: {usd[:-2]}/hour per running instance"
    assert dict(cost.sections[0].fields)["Configuration"] == f"GPU 1 x nvidia-l4, 8 vCPU, {shown_gib}"
    plan = await deps.writes.propose("redeploy", {"max_model_len": 8192, "canary": 10}, user_id="U1", channel_id="C1")
    assert plan.spec is not None and plan.spec["template"]["containers"][0]["resources"]["limits"]["memory"] == memory
    assert f"~{usd} while the canary runs" in plan.notes[0]

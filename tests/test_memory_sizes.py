"""One reader of memory sizes (skills/sizes.py): Kubernetes quantities, as Cloud Run's memory limit is one, so a
plan, a price and the sandbox read `32G` the same way (issue 44: one reader took it as 32 GiB, the other as
32 x 10^9 bytes = 29.8 GiB, so one service was planned and priced at two sizes)."""

from __future__ import annotations

import pytest

from skills.capacity.cost import hourly_cost
from skills.errors import InvalidInput
from skills.ports import ServiceInfo
from skills.sizes import gib


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

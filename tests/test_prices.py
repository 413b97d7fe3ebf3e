"""The one price table and function: Google's instance-based rates, worked by hand, and what fit/cost show."""

from __future__ import annotations

import datetime as dt

import pytest

from skills.capacity.cost import hourly_cost
from skills.capacity.fit import FitRequest, check_fit
from skills.capacity.prices import instance_price, load_prices, region_advice, regions_offering, usage_cost
from skills.errors import InvalidInput
from skills.ports import ServiceInfo


def test_worked_example_l4_4_vcpu_16_gib_one_hour_tier_1() -> None:
    # Cloud Run pricing page, Tier 1, instance-based billing (skills/data/prices.yaml, read 2026-11-27):
    #   CPU    4 vCPU  x 3600 s x $0.000018   = $0.2592
    #   memory 16 GiB  x 3600 s x $0.000002   = $0.1152
    #   L4     1 GPU   x 3600 s x $0.0001867  = $0.67212   (without zonal redundancy)
    p = instance_price("nvidia-l4", 1, 4, 16, "us-central1")
    assert p.breakdown == pytest.approx({"cpu": 0.2592, "memory": 0.1152, "gpu": 0.67212})
    assert p.usd_per_hour == pytest.approx(1.04652)
    assert (p.billing, p.tier, p.zonal_redundancy) == ("instance", "1", False)
    # The request-based CPU rate ($0.000024) priced CPU a third too high.
    assert p.breakdown["cpu"] * 24 / 18 == pytest.approx(4 * 0.000024 * 3600)


def test_zonal_redundancy_and_rtx_pro_6000() -> None:
    p = instance_price("nvidia-l4", 1, 4, 16, zonal_redundancy=True)
    assert p.breakdown["gpu"] == pytest.approx(0.0002909 * 3600)
    rtx = instance_price("nvidia-rtx-pro-6000", 1, 20, 80, "europe-west4")
    assert rtx.usd_per_hour == pytest.approx(20 * 0.0648 + 80 * 0.0072 + 0.00036522 * 3600)


def test_tier_2_region_says_it_used_tier_1_rates() -> None:
    p = instance_price("nvidia-l4", 1, 4, 16, "asia-southeast1")
    assert p.tier == "1" and any("tier (2)" in n for n in p.notes)


def test_gpu_services_must_bill_instance_based_and_unknowns_are_refused() -> None:
    with pytest.raises(InvalidInput, match="instance-based"):
        instance_price("nvidia-l4", 1, 4, 16, billing="request")
    with pytest.raises(InvalidInput, match="No Cloud Run price"):
        instance_price("h100-80gb", 1, 4, 16)
    unlisted = instance_price("nvidia-l4", 1, 4, 16, "us-west1")  # no Cloud Run GPU there
    assert any("does not offer nvidia-l4" in n for n in unlisted.notes)
    assert any("Tier 1 rates used" in n for n in unlisted.notes)


def test_every_rate_names_a_source_and_a_date() -> None:
    t = load_prices()
    modes = [mode for tier in t.tiers.values() for mode in tier.values()]
    rates = [r for mode in modes for r in (mode.vcpu_usd_per_s, mode.memory_usd_per_gib_s)]
    gpus = [tier for g in t.gpus.values() for tier in g.values()]
    rates += [r for tier in gpus for r in (tier.no_zonal_redundancy, tier.zonal_redundancy)]
    rates += [r for free in t.free_tier.values() for r in (free.vcpu_s, free.memory_gib_s)]
    assert rates and all(r.source and r.checked <= dt.date(2026, 11, 27) for r in rates)


def test_fit_cost_and_catalog_price_with_the_same_function() -> None:
    r = check_fit(FitRequest(model="gemma-4-12b-qat", gpu="nvidia-l4", host_memory_gib=32))
    cpu = r.recommended_cpu
    assert r.cost_per_hour_usd == round(instance_price("nvidia-l4", 1, cpu, 32).usd_per_hour, 2)
    cost = hourly_cost(ServiceInfo(name="s", gpu_type="nvidia-l4", gpu_count=1, cpu=str(cpu), memory="32Gi"))
    assert round(cost.usd_per_hour, 2) == r.cost_per_hour_usd
    assert r.gpu.price_per_hour_usd == pytest.approx(0.67212)


def test_regions_offering_each_gpu_and_the_default_region_advice() -> None:
    assert regions_offering("nvidia-l4") == ["us-east4", "europe-west1", "europe-west4", "asia-southeast1"]
    assert "us-central1" in regions_offering("nvidia-rtx-pro-6000")
    advice = region_advice("nvidia-l4", "us-central1")
    assert advice is not None and "invitation only" in advice and "us-east4" in advice
    assert region_advice("nvidia-rtx-pro-6000", "us-central1") is None
    assert "does not offer" in (region_advice("nvidia-rtx-pro-6000", "us-east4") or "")


def test_fit_warns_when_the_region_offers_the_gpu_only_by_invitation_and_names_alternatives() -> None:
    default = check_fit(FitRequest(model="gemma-4-12b-qat", gpu="nvidia-l4"))  # default region us-central1
    assert any("us-central1 offers nvidia-l4 by invitation only" in w and "us-east4" in w for w in default.warnings)
    east = check_fit(FitRequest(model="gemma-4-12b-qat", gpu="nvidia-l4", region="us-east4"))
    assert not any("invitation" in w for w in east.warnings)
    assert east.cost_per_hour_usd == default.cost_per_hour_usd  # both Tier 1


def test_googles_ai_inference_example_reproduced_to_the_cent() -> None:
    # Pricing page example "AI inference (GPU): 4 vCPU, 16 GiB, L4, 2 peak instances": $822.40 a month.
    # One instance all month (730 h) + a second 2 h a day (730 / 24 days), no zonal redundancy, free tier deducted:
    #   CPU    4 x 2,847,000 s - 240,000 = 11,148,000 vCPU-s x 0.000018  = 200.664
    #   memory 16 x 2,847,000 s - 450,000 = 45,102,000 GiB-s x 0.000002  =  90.204
    #   L4     2,847,000 GPU-s x 0.0001867                                = 531.5349
    example = load_prices().worked_example
    assert example is not None and example.usd_per_month == 822.40
    seconds = 730 * 3600 + 2 * 3600 * 730 / 24
    assert seconds == 2_847_000
    assert round(usage_cost("nvidia-l4", 4, 16, seconds, "us-central1"), 2) == example.usd_per_month
    # The request-based CPU rate alone ($0.000024, what the catalog used before) adds ~$67 a month to it.
    assert usage_cost("nvidia-l4", 4, 16, seconds) + 11_148_000 * (0.000024 - 0.000018) > 889

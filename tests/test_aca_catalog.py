"""skills/data/aca.yaml as skills/capacity/aca_catalog.py loads it: strict, every figure cited, every profile keyed to
a catalog GPU; the one ACA price function and the cost report priced through it."""

from __future__ import annotations

import copy
import re
from importlib import resources
from typing import Any

import pytest
import yaml

from skills.capacity.aca_catalog import PROFILE_FIGURES, AcaCatalog, load_aca_catalog, parse_aca_catalog
from skills.capacity.aca_prices import aca_price
from skills.capacity.catalog import ACA_PLATFORM, load_catalog
from skills.capacity.cost import aca_cost
from skills.capacity.prices import UNKNOWN_PRICE, format_usd
from skills.errors import InvalidInput
from skills.ports import ServiceInfo
from skills.serving.profiles import load_profiles


def _raw() -> dict[str, Any]:
    return yaml.safe_load(resources.files("skills").joinpath("data/aca.yaml").read_text(encoding="utf-8"))


def test_the_data_loads_and_names_the_profiles_the_target_reads() -> None:
    aca = load_aca_catalog()
    a100 = aca.profile("Consumption-GPU-NC24-A100")
    assert a100.serverless and a100.gpu == "a100-80gb" and a100.gpu_count == 1
    assert a100.quota_usage == "ManagedEnvironmentConsumptionNCA100Gpus"
    t4 = aca.profile("consumption-gpu-nc8as-t4")  # ARM spells types case-insensitively
    assert t4.type == "Consumption-GPU-NC8as-T4" and t4.quota_usage == "ManagedEnvironmentConsumptionT4Gpus"
    assert {p.type for p in aca.profiles.values() if not p.serverless} == {"NC24-A100", "NC48-A100", "NC96-A100"}
    assert aca.sandbox_region() in a100.regions and aca.sandbox_region() in t4.regions
    with pytest.raises(InvalidInput, match="Unknown Azure Container Apps GPU workload profile"):
        aca.profile("Consumption-GPU-NC4-H100")


@pytest.mark.parametrize(
    "path",
    [(), ("profiles", "Consumption-GPU-NC8as-T4"), ("probe_limits", "periodSeconds"), ("prices",), ("app_name",)],
)
def test_an_unknown_key_is_refused(path: tuple[str, ...]) -> None:
    data = _raw()
    node = data
    for key in path:
        node = node[key]
    node["surprise"] = 1
    with pytest.raises(ValueError, match="surprise"):
        parse_aca_catalog(data)


@pytest.mark.parametrize("field", PROFILE_FIGURES)
def test_a_profile_figure_without_a_source_is_refused(field: str) -> None:
    data = _raw()
    del data["profiles"]["Consumption-GPU-NC24-A100"]["sources"][field]
    with pytest.raises(ValueError, match=f"without a source: {field}"):
        parse_aca_catalog(data)


def test_a_citation_of_an_unknown_source_is_refused() -> None:
    data = _raw()
    data["profiles"]["NC48-A100"]["sources"]["vcpu"] = "a_blog_post"
    with pytest.raises(ValueError, match=r"unknown source.*a_blog_post"):
        parse_aca_catalog(data)
    data = _raw()
    data["gpu_notes"]["t4"][0]["source"] = "memory"
    with pytest.raises(ValueError, match="unknown source"):
        parse_aca_catalog(data)


def test_every_source_says_where_and_when_it_was_read() -> None:
    for key, text in load_aca_catalog().sources.items():
        assert re.search(r"read 20\d\d-\d\d-\d\d", text) or "as entered 20" in text, key
        assert re.search(r"https://|file id|issue \d+|@ [0-9a-f]{7}|azure-mgmt|catalog\.yaml", text), key


def test_every_price_is_sourced_or_null_and_estimates_say_so() -> None:
    prices = load_aca_catalog().prices
    rates = [prices.vcpu_usd_per_s, prices.memory_usd_per_gib_s]
    for pp in prices.profiles.values():
        rates += [pp.gpu_usd_per_s, pp.all_in_usd_per_hour]
    for rate in rates:
        assert rate.source
        if rate.value is not None and rate in [pp.all_in_usd_per_hour for pp in prices.profiles.values()]:
            assert rate.source.startswith("estimate:")  # not the pricing page's rates


def test_every_profile_keys_to_a_catalog_gpu() -> None:
    cat, aca = load_catalog(), load_aca_catalog()
    for p in aca.profiles.values():
        g = cat.gpus[p.gpu]
        assert g.platform == ACA_PLATFORM, p.type
        assert g.memory_gb == p.gpu_memory_gb, p.type  # the catalog's GPU is the one the profile carries
    for g in cat.gpus.values():
        if g.platform == ACA_PLATFORM:
            prof = aca.default_profile_for(g.name)
            assert prof is not None and prof.serverless and prof.gpu == g.name


def test_deploy_profiles_name_a_known_workload_profile() -> None:
    aca = load_aca_catalog()
    aca_profiles = {n: p for n, p in load_profiles().items() if p.target == "azure-container-apps"}
    assert {"gemma4-12b-qat-aca-a100", "gemma4-e4b-aca-t4"} <= set(aca_profiles)
    for p in aca_profiles.values():
        assert p.aca_profile is not None
        wp = aca.profile(p.aca_profile)
        assert (wp.gpu, wp.gpu_count) == (p.gpu, p.gpu_count)


def test_probe_limits_and_the_rules_the_target_reads() -> None:
    aca = load_aca_catalog()
    lim = aca.probe_limits
    assert lim["periodSeconds"].min == 1 and lim["failureThreshold"].max >= 1
    for name, limit in lim.items():
        assert limit.min <= limit.max, name
        assert limit.default is None or limit.min <= limit.default <= limit.max, name
    assert aca.max_startup_window_s() == (
        lim["initialDelaySeconds"].max + lim["failureThreshold"].max * lim["periodSeconds"].max
    )
    assert set(aca.probe_types) == {"Liveness", "Readiness", "Startup"}
    assert aca.revision_modes == ["Single", "Multiple"] and aca.traffic_weights_total == 100
    assert aca.default_max_replicas <= aca.max_replicas
    assert aca.app_name.check("gemma4-12b") is None
    longest = "g" * aca.app_name.max_length
    assert aca.app_name.check(longest) is None and aca.app_name.check(longest + "x") is not None
    for bad in ("Gemma", "4gemma", "gemma-", "g"):
        assert aca.app_name.check(bad) is not None, bad
    assert aca.driver.cuda_driver is None and "not documented" in aca.driver.note  # said, not guessed


def _with_rates(gpu: float, vcpu: float, mem: float) -> AcaCatalog:
    data = _raw()
    data["prices"]["vcpu_usd_per_s"] = {"value": vcpu, "source": "billing"}
    data["prices"]["memory_usd_per_gib_s"] = {"value": mem, "source": "billing"}
    for pp in data["prices"]["profiles"].values():
        pp["gpu_usd_per_s"] = {"value": gpu, "source": "billing"}
    return parse_aca_catalog(data)


def test_the_price_follows_from_the_per_second_rates_when_they_are_sourced() -> None:
    cat = _with_rates(gpu=0.0005, vcpu=0.00003, mem=0.000004)
    for prof in cat.profiles.values():
        rates = cat.prices.profiles[prof.type]
        assert rates.gpu_usd_per_s.value is not None
        assert cat.prices.vcpu_usd_per_s.value is not None and cat.prices.memory_usd_per_gib_s.value is not None
        each = 3600 * (
            rates.gpu_usd_per_s.value * prof.gpu_count
            + cat.prices.vcpu_usd_per_s.value * prof.vcpu
            + cat.prices.memory_usd_per_gib_s.value * prof.memory_gib
        )
        p = aca_price(prof.type, prof.regions[0], replicas=3, catalog=cat)
        assert p.per_replica_usd_per_hour == pytest.approx(each)
        assert p.usd_per_hour == pytest.approx(3 * each)
        assert sum(p.breakdown.values()) == pytest.approx(each) and not p.estimate


def test_without_rates_the_price_is_the_estimate_or_unknown() -> None:
    aca = load_aca_catalog()
    for prof in aca.profiles.values():
        estimate = aca.prices.profiles[prof.type].all_in_usd_per_hour.value
        p = aca_price(prof.type, replicas=2)
        if estimate is None:
            assert p.usd_per_hour is None and UNKNOWN_PRICE in p.describe()
            assert format_usd(p.usd_per_hour, "h") == UNKNOWN_PRICE
        else:
            assert p.estimate and p.usd_per_hour == pytest.approx(2 * estimate)
            assert "estimate" in p.describe()


def test_a_region_that_does_not_offer_the_profile_is_said() -> None:
    p = aca_price("Consumption-GPU-NC24-A100", "westeurope")
    assert any("westeurope does not offer Consumption-GPU-NC24-A100" in n for n in p.notes)
    assert not aca_price("Consumption-GPU-NC8as-T4", "westeurope").notes[:-1]  # offered: only the estimate note


def test_cost_prices_a_running_app_through_the_same_function() -> None:
    info = ServiceInfo(name="gemma-aca", min_instances=1, max_instances=3)
    for prof in load_aca_catalog().profiles.values():
        rep = aca_cost(info, prof.type, prof.regions[0])
        each = aca_price(prof.type, prof.regions[0]).per_replica_usd_per_hour
        assert rep.usd_per_hour == each
        assert rep.max_usd_per_hour == (3 * each if each is not None else None)
        assert rep.idle_usd_per_hour == each  # min replicas 1: a GPU replica has no idle rate
        assert (rep.vcpu, rep.memory_gib, rep.gpu_count) == (prof.vcpu, prof.memory_gib, prof.gpu_count)
        assert prof.type in rep.accelerator


def test_the_catalog_keeps_no_second_price_for_an_aca_gpu() -> None:
    raw = yaml.safe_load(resources.files("skills").joinpath("data/catalog.yaml").read_text(encoding="utf-8"))
    cat = load_catalog()
    for name, g in cat.gpus.items():
        if g.platform != ACA_PLATFORM:
            continue
        assert "price_per_hour_usd" not in raw["gpus"][name]
        prof = load_aca_catalog().default_profile_for(name)
        assert prof is not None
        assert g.price_per_hour_usd == aca_price(prof.type).per_replica_usd_per_hour
        assert prof.type in g.price_source


def test_the_strict_model_rejects_a_profile_default_that_is_not_serverless() -> None:
    data = copy.deepcopy(_raw())
    data["default_profile"]["a100-80gb"] = "NC24-A100"
    with pytest.raises(ValueError, match="not a serverless a100-80gb profile"):
        parse_aca_catalog(data)

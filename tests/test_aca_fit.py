"""The planner on Azure Container Apps GPU workload profiles (issue 54): a fit on the T4 or the A100 runs on the
profile that carries it (its vCPU and memory), is priced per hour and per million tokens by the one ACA price
function, and says what the data says of the GPU; through `gemma-sre fit` as a user types it."""

from __future__ import annotations

import pytest

from bot.cli import main as gemma_sre
from skills.capacity.aca_catalog import load_aca_catalog
from skills.capacity.aca_prices import aca_price
from skills.capacity.cost import usd_per_m_tokens
from skills.capacity.fit import check_fit
from skills.capacity.fit_accuracy import load_measurements
from skills.capacity.fit_types import FitRequest
from skills.capacity.prices import UNKNOWN_PRICE, format_usd
from skills.serving.profiles import load_profiles


def test_fit_on_t4_explains_bf16_and_prices_the_t4_profile(capsys: pytest.CaptureFixture[str]) -> None:
    rc = gemma_sre(["fit", "gemma-4-e4b-qat", "--gpu", "t4", "--max-model-len", "16384"])
    out = capsys.readouterr().out
    assert rc == 0
    aca = load_aca_catalog()
    prof = aca.profile("Consumption-GPU-NC8as-T4")
    # bf16: the change, and why, with its sources
    assert "--dtype half" in out
    assert "Bfloat16 is only supported on GPUs with compute capability of at least 8.0" in out
    assert "fp16 can overflow in Gemma" in out and "tool calls" in out
    assert aca.cite("vllm_bf16") in out and aca.cite("issue_54") in out
    # the profile, its resources and its price per hour and per million tokens
    r = check_fit(FitRequest(model="gemma-4-e4b-qat", gpu="t4", max_model_len=16384))
    price = aca_price(prof.type)
    assert r.aca_profile == prof.type and r.request.dtype == "half"
    assert (r.recommended_cpu, r.recommended_memory_gib) == (prof.vcpu, int(prof.memory_gib))
    assert r.cost_per_hour_usd == pytest.approx(price.per_replica_usd_per_hour, abs=0.005)
    assert r.est_tokens_per_s and r.cost_per_hour_usd is not None
    per_m = usd_per_m_tokens(r.cost_per_hour_usd, r.est_tokens_per_s)
    assert r.usd_per_m_tokens == pytest.approx(per_m)
    assert f"Cost           {format_usd(r.cost_per_hour_usd, 'h')}, {prof.vcpu:g} vCPU" in out
    assert prof.type in out and format_usd(per_m, "M output tokens") in out
    assert "estimate" in out  # the price is the field figure, and the reply says so


def test_a_model_that_does_not_fit_the_t4_says_so_with_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    rc = gemma_sre(["fit", "gemma-4-e4b", "--gpu", "t4"])
    out = capsys.readouterr().out
    assert rc == 1 and "does NOT fit on t4" in out
    r = check_fit(FitRequest(model="gemma-4-e4b", gpu="t4"))
    assert r.verdict == "does_not_fit"
    # the budget arithmetic, in the numbers the report carries
    assert f"exceed the {r.budget_gib:.1f} GiB budget ({r.gpu.memory_gib:g} GiB x 0.9)" in out
    assert f"Weights        {r.weights_gib:g} GiB" in out
    assert "gemma-4-e4b-qat on t4" in out  # the lighter build that fits, priced on the same profile
    assert format_usd(aca_price("Consumption-GPU-NC8as-T4").per_replica_usd_per_hour, "h") in out


def test_12b_qat_on_the_a100_profile_matches_the_field_write_up() -> None:
    """gemma4-12b-qat-aca-a100's settings: within 2% of the write-up's KV tokens (predicted 1,059,163 vs 1,050,170
    reported: +0.9%) and of its KV GiB (66.83 vs 66.26: +0.9%); the weights land under the report (structure
    only, as bench/fit_accuracy.py says)."""
    p = load_profiles()["gemma4-12b-qat-aca-a100"]
    field = next(m for m in load_measurements() if m.id == "12b-qat-a100-80")
    r = check_fit(
        FitRequest(
            model=p.model,
            gpu=p.gpu,
            max_model_len=p.max_model_len,
            gpu_memory_utilization=p.gpu_memory_utilization,
            kv_cache_dtype=p.kv_cache_dtype,
            max_num_batched_tokens=field.assumed["max_num_batched_tokens"],
            vllm_image=field.assumed["vllm_image"],
        )
    )
    tokens, kv_gib = float(field.reported["kv_cache_tokens"]), float(field.reported["kv_cache_gib"])
    assert r.verdict == "fits" and r.aca_profile == p.aca_profile
    assert abs(r.kv_cache_tokens - tokens) / tokens < 0.02
    assert abs(r.kv_cache_gib - kv_gib) / kv_gib < 0.02
    assert r.weights_gib == pytest.approx(float(field.reported["weights_gib"]), abs=0.7)
    prof = load_aca_catalog().profile("Consumption-GPU-NC24-A100")
    assert (r.recommended_cpu, r.recommended_memory_gib) == (prof.vcpu, int(prof.memory_gib))
    assert r.cost_per_hour_usd == pytest.approx(aca_price(prof.type).per_replica_usd_per_hour, abs=0.005)


def test_two_a100s_plan_on_the_dedicated_profile_and_say_the_price_is_unknown() -> None:
    r = check_fit(FitRequest(model="gemma-4-31b", gpu="a100-80gb", gpu_count=2))
    prof = load_aca_catalog().profile("NC48-A100")
    assert r.aca_profile == prof.type and r.recommended_memory_gib == int(prof.memory_gib)
    assert r.cost_per_hour_usd is None and r.usd_per_m_tokens is None  # no sourced rate: never a made-up figure
    assert any(UNKNOWN_PRICE in n for n in r.notes)


def test_no_profile_for_two_t4s_is_a_warning() -> None:
    r = check_fit(FitRequest(model="gemma-4-e2b", gpu="t4", gpu_count=2))
    assert r.aca_profile == "" and r.cost_per_hour_usd is None
    assert any("no workload profile with 2 x t4" in w for w in r.warnings)


def test_an_azure_region_that_lacks_the_profile_is_warned() -> None:
    r = check_fit(FitRequest(model="gemma-4-12b-qat", gpu="a100-80gb", region="westeurope"))
    assert any("westeurope does not offer Consumption-GPU-NC24-A100" in w for w in r.warnings)
    ok = check_fit(FitRequest(model="gemma-4-12b-qat", gpu="a100-80gb", region="swedencentral"))
    assert not any("does not offer" in w for w in ok.warnings)


def test_cloud_run_fits_are_unchanged_by_the_aca_notes() -> None:
    r = check_fit(FitRequest(model="gemma-4-12b-qat", gpu="nvidia-l4"))
    assert r.aca_profile == "" and not any("Azure Container Apps" in n for n in r.notes)
    assert r.cost_per_hour_usd is not None

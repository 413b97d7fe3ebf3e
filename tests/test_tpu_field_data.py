"""Field data IV (TPU), issue 51, through the commands a user types (console on the sandbox: the real
google-cloud-tpu and Cloud Quotas clients against the stand-ins on 127.0.0.1, Redis real):

- a TPU plan's image is a pinned vllm/vllm-tpu release that preflight checked (exists, and its release serves the
  model); a floating tag is refused by preflight as on GPU;
- TPU support is labelled as the sources state it (tested upstream / untested upstream / runs in a field report /
  known to fail), each with its source; `/gemma fit --tpu` shows the state and its source; only "known to fail" is
  refused; the others warn and keep Confirm, and the sandbox's slice then starts."""

from __future__ import annotations

import copy
from importlib import resources
from typing import Any

import yaml

from bot.sandbox.console_session import ConsoleSession
from bot.sandbox.tpu_scenarios import SERVICE, TPU_PROFILE
from skills.capacity.image_compat import check_tpu_image, load_image_data
from skills.capacity.tpu_catalog import load_tpu_catalog, parse_tpu_catalog
from skills.capacity.tpu_fit import TpuFitRequest, check_tpu_fit
from skills.targets.tpu.spec import DEFAULT_IMAGE
from tests.test_truthful_writes import console

RAW: dict[str, Any] = yaml.safe_load(resources.files("skills").joinpath("data/tpu.yaml").read_text())


__all__ = ["console"]  # a fixture, used by name


# --- item 1: a pinned TPU image, checked in preflight -------------------------------------------------------------


def test_the_tpu_image_is_a_pinned_release_named_in_the_image_data() -> None:
    data = load_image_data()
    assert DEFAULT_IMAGE == data.tpu.default
    repo, _, tag = DEFAULT_IMAGE.partition(":")
    assert repo == "vllm/vllm-tpu" and tag.startswith("v") and tag != "latest", DEFAULT_IMAGE
    assert data.tpu.source in data.sources and data.tpu.min_release_source in data.sources
    assert check_tpu_image(DEFAULT_IMAGE, "gemma-4-31b").ok
    latest = check_tpu_image("vllm/vllm-tpu:latest", "gemma-4-31b")
    assert not latest.ok and "floating" in latest.problems[0]
    old = check_tpu_image("vllm/vllm-tpu:v0.18.0", "gemma-4-31b")
    assert not old.ok and "0.19" in old.problems[0] and old.suggestion == DEFAULT_IMAGE
    # the 12B is a later architecture: the image's vLLM release must be new enough for it too
    assert not check_tpu_image("vllm/vllm-tpu:v0.19.0", "gemma-4-12b").ok


async def test_a_tpu_plan_runs_the_pinned_image_and_preflight_checks_it(console: ConsoleSession) -> None:
    plan = await console.line(f"/gemma deploy {TPU_PROFILE}")
    assert DEFAULT_IMAGE in plan, plan
    image_line = next(line for line in plan.splitlines() if "image `" in line and DEFAULT_IMAGE in line)
    assert image_line.lstrip(" |").startswith("✓"), image_line
    assert "serves gemma-4-31b" in image_line, image_line


def test_the_analyzer_recommends_the_pinned_image() -> None:
    text = resources.files("skills").joinpath("diagnosis/analyzers/tpu.py").read_text()
    assert "vllm/vllm-tpu:latest" not in text


# --- item 2: support as the sources state it ----------------------------------------------------------------------


def test_every_support_state_is_one_the_sources_can_state_and_names_its_source() -> None:
    tpu = load_tpu_catalog()
    states = {"tested_upstream", "untested_upstream", "field_report", "known_to_fail"}
    for table in (tpu.support.models, tpu.support.quantizations):
        for name, s in table.items():
            assert s.status in states, (name, s.status)
            assert all(k.strip().split(" ")[0] in tpu.sources for k in s.source.split(",")), (name, s.source)
            if s.status == "field_report":
                assert s.detail, name  # with what it ran
    assert tpu.support.models["gemma-4-26b-a4b"].status == "field_report"
    assert tpu.support.models["gemma-4-12b"].status == "field_report"
    assert tpu.support.quantizations["w4a16"].status == "field_report"
    assert tpu.support.quantizations["fp8"].status == "untested_upstream"
    assert tpu.support.models["gemma-4-31b"].status == "tested_upstream"


def test_only_known_to_fail_is_refused() -> None:
    moe = check_tpu_fit(TpuFitRequest(model="gemma-4-26b-a4b", accelerator_type="v6e-4"))
    assert moe.verdict == "fits" and not moe.unsupported, moe
    assert any("runs in a field report" in n and "v6e-4" in n for n in moe.notes), moe.notes
    raw = copy.deepcopy(RAW)
    raw["support"]["models"]["gemma-4-26b-a4b"] = {
        "status": "known_to_fail",
        "detail": "EngineCore fails to start",
        "source": "issue_26b_v5e",
    }
    failing = check_tpu_fit(
        TpuFitRequest(model="gemma-4-26b-a4b", accelerator_type="v6e-4"), tpu=parse_tpu_catalog(raw)
    )
    assert failing.verdict == "unsupported" and "known to fail" in failing.unsupported[0], failing.unsupported


async def test_fit_on_a_tpu_shows_the_support_state_and_its_source(console: ConsoleSession) -> None:
    tested = await console.line("/gemma fit gemma-4-31b --tpu v6e-4")
    assert "tested upstream" in tested and "model_support_matrix.csv" in tested, tested
    moe = await console.line("/gemma fit gemma-4-26b-a4b --tpu v6e-4")
    assert "unsupported" not in moe.splitlines()[0], moe
    assert "runs in a field report" in moe and "xbill9/sagemaker-gemma" in moe, moe
    fp8 = await console.line("/gemma fit gemma-4-31b-fp8 --tpu v6e-8")
    assert "untested upstream" in fp8 and "quantization_support_matrix.csv" in fp8, fp8


async def test_a_field_report_model_warns_keeps_confirm_and_the_slice_starts(console: ConsoleSession) -> None:
    plan = await console.line("/gemma deploy gemma4-26b-tpu-v6e4 --service " + SERVICE)
    assert "runs in a field report" in plan, plan
    assert "Confirm" in plan and "Refused" not in plan.splitlines()[0], plan
    out = await console.line("click Confirm")
    assert f"deploy `{SERVICE}`: ready" in out, out


# --- item 3: every zone that lists v6e, and the regional quota -----------------------------------------------------


async def test_the_zone_search_covers_the_ai_zones_and_says_what_they_need(console: ConsoleSession) -> None:
    out = await console.line("/gemma tpu zones v6e-1")
    for zone in ("us-central1-ai1", "us-south1-ai1b"):
        line = next((ln for ln in out.splitlines() if f" {zone}:" in ln), "")
        assert line and "AI zone" in line, (zone, out)


async def test_the_regional_quota_is_checked_as_well_as_the_zones(console: ConsoleSession) -> None:
    assert console.sandbox is not None
    tpu = load_tpu_catalog()
    regional = tpu.quota.on_demand_region
    assert regional == "TPUV6EPerProjectPerRegionForTPUAPI" and tpu.quota.spot_region == (
        "TPUV6EPreemptiblePerProjectPerRegionForTPUAPI"
    )
    console.sandbox.tpu.set_region_quota("us-east5", "on-demand", 0)
    console.sandbox.preflight.quotas.set(tpu.quota.service, regional, "us-east5", 0, dimension="region")
    out = await console.line("/gemma tpu zones v6e-4")
    for zone in ("us-east5-a", "us-east5-b"):
        line = next(ln for ln in out.splitlines() if f" {zone}:" in ln)
        assert line.lstrip(" |").startswith("✗") and regional in line and "region us-east5 quota 0" in line, line
    assert any(ln.lstrip(" |").startswith("✓ us-east1-d") for ln in out.splitlines()), out
    plan = await console.line(f"/gemma deploy {TPU_PROFILE} --zone us-east5-a")
    assert "Plan: " in plan and regional in plan, plan


# --- item 5: no HF token for a checkpoint the Hub does not gate ---------------------------------------------------


async def test_a_tpu_slice_pulls_an_ungated_gemma4_checkpoint_without_an_hf_token(console: ConsoleSession) -> None:
    assert console.sandbox is not None
    await console.line(f"/gemma deploy {TPU_PROFILE}")
    out = await console.line("click Confirm")
    assert f"deploy `{SERVICE}`: ready" in out, out
    node = next(q.node for q in console.sandbox.tpu.queued.values())
    script = node.metadata["startup-script"]
    assert "HF_TOKEN" not in script and "--secret=hf-token" not in script, script
    assert "VLLM_API_KEY" in script  # the API key is still required


async def test_a_suspended_queued_resource_holds_spot_quota_and_the_search_and_destroy_say_so(
    console: ConsoleSession,
) -> None:
    out = await console.line("/gemma sandbox tpu-preempted")  # a spot node by hand, then preempted
    assert console.sandbox is not None
    console.sandbox.clock.advance(600)  # SUSPENDING -> SUSPENDED
    zone = next(q.zone for q in console.sandbox.tpu.queued.values())
    out = await console.line("/gemma tpu zones v6e-4 --provisioning spot")
    line = next(ln for ln in out.splitlines() if f" {zone}:" in ln)
    assert f"held by SUSPENDED `{SERVICE}`" in line and "until deleted" in line, line
    destroy = await console.line(f"/gemma destroy {SERVICE}")
    assert "holds" in destroy and "spot quota until deleted" in destroy, destroy


async def test_flex_start_says_where_it_is_known_to_work_or_that_it_is_unknown(console: ConsoleSession) -> None:
    out = await console.line("/gemma tpu zones v6e-4 --provisioning flex-start")
    assert "flex-start works on v6e are unknown" in out and "request-using-flex-start" in out, out


# --- item 4: a reserved plan names its reservation (tpu_v2 reservation_name), not `guaranteed` ----------------------


async def test_a_reserved_plan_names_its_reservation_and_the_create_carries_it(console: ConsoleSession) -> None:
    assert console.sandbox is not None
    asked = await console.line(f"/gemma deploy {TPU_PROFILE} --provisioning reserved")
    assert "--reservation NAME" in asked, asked
    console.sandbox.tpu.set_capacity("us-east5-a", "guaranteed", 8)
    plan = await console.line(
        f"/gemma deploy {TPU_PROFILE} --provisioning reserved --reservation my-res --zone us-east5-a"
    )
    assert "reservation `my-res`" in plan and "--reservation=my-res" in plan, plan
    out = await console.line("click Confirm")
    assert f"deploy `{SERVICE}`: ready" in out, out
    create = next(r for verb, r in console.sandbox.tpu.requests if verb == "CreateQueuedResource")
    qr = create.queued_resource  # type: ignore[attr-defined]
    assert qr.reservation_name.endswith("/locations/us-east5-a/reservations/my-res"), qr
    assert "guaranteed" not in qr, qr

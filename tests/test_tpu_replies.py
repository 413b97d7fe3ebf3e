"""TPU replies speak TPU (issue 49, item 4, and item 2's TPU status): a console session on the sandbox, as a user
types it (the real google-cloud-tpu and Cloud Quotas clients against the stand-ins on 127.0.0.1, Redis real).

- a TPU deploy's progress shows the queued resource's own stages (QueuedResourceState names), never Cloud Run's
  revision stages or its "traffic moves only when ready"; the cost of the slice speaks of no instances;
- a plan refused because no zone has quota names no zone in its header, shows no ✓, names every zone it searched,
  and offers another provisioning model only when that model has quota somewhere;
- the destroy plan of a SUSPENDED queued resource says what a SUSPENDED one is, not what an ACTIVE one is;
- status says ready only when vLLM's /health answers."""

from __future__ import annotations

import re

from bot.sandbox.console_session import ConsoleSession
from bot.sandbox.tpu_scenarios import SERVICE, TPU_PROFILE
from skills.capacity.tpu_catalog import load_tpu_catalog
from tests.eventually import eventually
from tests.test_truthful_writes import console

CLOUD_RUN_WORDS = ("revision created", "instance starting", "weights loading", "traffic moves only when ready")


__all__ = ["console"]  # a fixture, used by name


def _plan_header(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("Plan: "))


async def test_a_tpu_deploy_shows_the_queued_resources_stages_not_cloud_runs(console: ConsoleSession) -> None:
    await console.line(f"/gemma deploy {TPU_PROFILE}")
    out = await console.line("click Confirm")
    assert f"deploy `{SERVICE}`: ready" in out, out
    for words in CLOUD_RUN_WORDS:
        assert words not in out, (words, out)
    stages = next(line for line in out.splitlines() if line.lstrip(" |").startswith("submitted  →"))
    assert stages.split("  →  ")[1:4] == ["queued", "PROVISIONING", "ACTIVE: vLLM loading and compiling (XLA)"], stages
    assert re.search(r"deploy `[\w-]+`: PROVISIONING in [a-z0-9-]+", out), out  # the state, and the zone it is in
    status = await console.line(f"/gemma status {SERVICE} --fresh")
    assert status.startswith(f"● {SERVICE}: ready"), status  # vLLM answers now
    assert "concurrency" not in status and "CPU / memory" not in status, status  # Cloud Run's fields
    cost = await console.line(f"/gemma cost {SERVICE}")
    assert re.search(rf"^{SERVICE}: \$[\d,.]+/hour", cost, re.M), cost
    assert "instance" not in cost, cost  # a slice has no instances, min- or max-
    console.modal_answer = SERVICE
    await console.line(f"/gemma destroy {SERVICE}")
    out = await console.line("click Destroy…")
    assert f"destroy `{SERVICE}`: deleted" in out, out
    for words in CLOUD_RUN_WORDS:
        assert words not in out, (words, out)


def _zero_quota(console: ConsoleSession, tier: str, chips: int = 0) -> None:
    """`tier`'s TPU quota in every v6e zone: what the Cloud Quotas API reports and what the TPU API enforces."""
    assert console.sandbox is not None
    tpu = load_tpu_catalog()
    quota_id = tpu.quota.spot if tier == "spot" else tpu.quota.on_demand
    for zone in tpu.zones:
        console.sandbox.tpu.set_quota(zone, tier, chips)
        console.sandbox.preflight.quotas.set(tpu.quota.service, quota_id, zone, chips, dimension="zone")


async def test_a_plan_refused_for_quota_everywhere_says_so_and_suggests_nothing_that_fails(
    console: ConsoleSession,
) -> None:
    await console.line("/gemma sandbox tpu-quota-zero")  # on-demand and spot quota 0 in every zone
    zones = load_tpu_catalog().zones
    for provisioning, other in (("on-demand", "spot"), ("spot", "on-demand")):
        out = await console.line(f"/gemma deploy {TPU_PROFILE} --provisioning {provisioning}")
        header = _plan_header(out)
        assert not any(z in header for z in zones), header  # no zone was found: none is named as the place
        assert "✓ fits" not in out and "[1] Confirm" not in out, out
        refusal = next(line for line in out.splitlines() if line.startswith("✗ ") and "zone" in line)
        for zone in zones:  # every zone searched is named in the refusal
            assert zone in refusal, (zone, refusal)
        assert f"{len(zones)} zones" in refusal, refusal
        assert f"try {other}" not in refusal and "try another provisioning model" not in refusal, refusal
        assert f"{other} has no quota" in refusal, refusal  # the alternative was asked, and it fails too
        zones_out = await console.line(f"/gemma tpu zones --provisioning {provisioning}")
        assert f"0 of {len(zones)} zones usable" in zones_out and f"--provisioning {other}`)" not in zones_out, (
            zones_out
        )
        assert f"{other} has no quota" in zones_out, zones_out


async def test_spot_is_offered_only_where_spot_quota_holds(console: ConsoleSession) -> None:
    await console.line("/gemma sandbox tpu-quota-zero")
    _zero_quota(console, "spot", chips=8)  # spot quota back everywhere; on-demand stays 0
    out = await console.line(f"/gemma deploy {TPU_PROFILE}")
    refusal = next(line for line in out.splitlines() if line.startswith("✗ ") and "zone" in line)
    assert "spot" in refusal and "has no quota" not in refusal.split("spot", 1)[1][:40], refusal
    assert re.search(r"\[\d+\] .*provisioning=spot", out), out  # offered as a plan, one click away
    out = await console.line(f"/gemma deploy {TPU_PROFILE} --provisioning spot")
    assert "[" in out and "] Confirm" in out, out  # the alternative holds: its own plan may be confirmed


async def test_a_zone_asked_for_without_quota_heads_its_plan_with_the_refusal(console: ConsoleSession) -> None:
    await console.line("/gemma sandbox tpu-quota-zero")
    zone = next(iter(load_tpu_catalog().zones))
    out = await console.line(f"/gemma deploy {TPU_PROFILE} --zone {zone}")
    header = _plan_header(out)
    assert header.startswith("Plan: Cannot create Cloud TPU queued resource") and zone in header, header
    assert "✓ fits" not in out and "] Confirm" not in out, out
    assert "leave out `--zone`" not in out, out  # no other zone has quota: not an alternative that holds


async def test_a_slice_too_small_offers_the_one_that_fits_only_where_it_has_quota(console: ConsoleSession) -> None:
    out = await console.line(f"/gemma deploy {TPU_PROFILE} --accelerator-type v6e-1")
    assert _plan_header(out).startswith("Plan: Cannot create") and "needs more chips" in _plan_header(out), out
    assert re.search(r"\[\d+\] .*accelerator_type=v6e-4", out), out  # the slice that fits, one click away
    await console.line("/gemma sandbox tpu-quota-zero")
    out = await console.line(f"/gemma deploy {TPU_PROFILE} --accelerator-type v6e-1")
    assert "accelerator_type=v6e-4" not in out, out  # no quota for it anywhere: not offered
    assert "v6e-4 would fit, but no zone searched has on-demand quota for it" in out, out


async def test_the_destroy_plan_of_a_suspended_queued_resource_speaks_of_a_suspended_one(
    console: ConsoleSession,
) -> None:
    out = await console.line("/gemma sandbox tpu-preempted")  # a spot node by hand, then preempted
    assert "SUSPENDING then SUSPENDED" in out, out
    assert console.sandbox is not None
    console.sandbox.clock.advance(600)  # SUSPENDING -> SUSPENDED
    out = await console.line(f"/gemma destroy {SERVICE}")
    header = _plan_header(out)
    assert "SUSPENDED" in header, header
    assert "An ACTIVE slice serves" not in out, out
    assert "SUSPENDED" in out.split("== Notes", 1)[1] and "serves nothing" in out, out
    assert "/h" not in header, header  # no node, nothing billed by the hour


async def test_status_says_ready_only_when_vllm_answers(console: ConsoleSession) -> None:
    out = await console.line("/gemma sandbox tpu-hbm-oom")  # ACTIVE, node READY, vLLM stops at load: /health 503
    assert "HBM" in out, out
    assert console.sandbox is not None
    sandbox = console.sandbox
    assert await eventually(lambda: sandbox.tpu.node_ip(SERVICE) is not None, timeout=30)
    sandbox.clock.advance(600)  # long past the load: vLLM has stopped
    out = await console.line(f"/gemma status {SERVICE} --fresh")
    title = out.splitlines()[0]
    health = next(line for line in out.splitlines() if line.strip().startswith("/health "))
    assert "✗" in health, out  # vLLM does not answer
    assert ": ready" not in title, out
    assert "rolling out" not in title, out  # Cloud Run's word

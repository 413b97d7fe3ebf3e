"""The Cloud TPU target on the sandbox (real google-cloud-tpu and Cloud Quotas clients on 127.0.0.1, the sandbox
clock stopped): zone search, deploy plan -> queued resource -> ACTIVE -> vLLM ready with the states as progress,
status, logs read back through the TPU filter, destroy; and each TPU scenario diagnosed as its kind."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from bot.deps import Deps
from bot.sandbox.clock import SandboxClock
from bot.sandbox.cloud import Sandbox
from bot.sandbox.tpu_scenarios import SERVICE, TPU_PROFILE, TPU_SCENARIOS, _first_zone
from bot.settings import Settings, load_settings
from bot.wiring import build_deps, close_deps
from skills.capacity.tpu_catalog import load_tpu_catalog
from skills.deploy.execute import execute as execute_plan
from skills.deploy.plan_builder import build_plan
from skills.diagnosis.diagnose import diagnose_service
from skills.ports import LogQuery
from skills.targets.tpu.spec import DEFAULT_IMAGE
from skills.targets.tpu.target import TpuTarget
from tests.eventually import eventually


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    sb = Sandbox(clock=SandboxClock(speed=0)).start()
    yield sb
    sb.close()


@pytest.fixture
async def deps(sandbox: Sandbox, key_prefix: str):  # type: ignore[no-untyped-def]
    settings: Settings = sandbox.configure(load_settings(key_prefix=key_prefix)).model_copy(
        update={"tpu_queue_wait_s": 600}
    )
    d = build_deps(settings)
    yield d
    await close_deps(d)


def _tpu(deps: Deps) -> TpuTarget:
    target = deps.targets.for_service(SERVICE)
    assert isinstance(target, TpuTarget)
    return target


async def _kinds(deps: Deps) -> list[str]:
    target = _tpu(deps)
    query = LogQuery(service=SERVICE, since=datetime.now(UTC) - timedelta(hours=2))
    assert target.logs is not None
    info = await target.get_service(SERVICE)
    return (await diagnose_service(target.logs, query, token_budget=3000, service=info)).root_kinds()


async def _deploy(sandbox: Sandbox, deps: Deps, phases: list[str]) -> object:
    target = _tpu(deps)
    plan = await build_plan("deploy", {"profile": TPU_PROFILE}, target, deps.writes.env)
    assert not plan.blocked(), plan.blocked()

    async def progress(p) -> None:  # type: ignore[no-untyped-def]
        phases.append(p.phase)
        sandbox.clock.advance(120)  # each poll: two simulated minutes pass

    return await execute_plan(target, plan, logs=target.logs, progress=progress, poll_s=0.01, progress_every_s=0)


async def test_a_tpu_profile_deploys_end_to_end_and_is_destroyed(sandbox: Sandbox, deps: Deps) -> None:
    target = _tpu(deps)
    zones = await target.zone_search("v6e-4", "on-demand")
    assert zones[0].usable and zones[0].zone == _first_zone()
    phases: list[str] = []
    result = await _deploy(sandbox, deps, phases)
    assert result.ok, (result.detail, phases)  # type: ignore[attr-defined]
    assert any(p.startswith("PROVISIONING") for p in phases)
    assert any("vLLM loading and compiling" in p for p in phases)
    info = await target.get_service(SERVICE)
    assert info.ready is True and info.uri.endswith("/nodes/" + sandbox.tpu.node_ip(SERVICE))  # type: ignore[operator]
    assert info.gpu_type == "v6e-4" and "--tensor-parallel-size" in info.args
    node = next(q.node for q in sandbox.tpu.queued.values())
    script = node.metadata["startup-script"]
    assert "--privileged --net=host" in script and DEFAULT_IMAGE in script and "--log-driver=gcplogs" in script
    assert "--api-key" not in script or "$KEY" in script  # the key comes from Secret Manager, never the metadata
    assert await _kinds(deps) == []  # a clean start diagnoses clean
    destroy = await build_plan("destroy", {"service": SERVICE}, target, deps.writes.env)
    assert "Delete Cloud TPU queued resource" in destroy.summary

    async def tick(p) -> None:  # type: ignore[no-untyped-def]
        sandbox.clock.advance(30)

    done = await execute_plan(target, destroy, progress=tick, poll_s=0.01, progress_every_s=0)
    assert done.ok and not sandbox.tpu.queued


async def test_no_capacity_in_the_first_zone_moves_to_the_next(sandbox: Sandbox, deps: Deps) -> None:
    said: list[str] = []

    async def say(text: str) -> None:
        said.append(text)

    await TPU_SCENARIOS["tpu-no-capacity"].run(sandbox, say)
    phases: list[str] = []
    result = await _deploy(sandbox, deps, phases)
    first = _first_zone()
    assert result.ok, phases  # type: ignore[attr-defined]
    assert any(p.startswith(f"WAITING_FOR_RESOURCES in {first}") for p in phases)
    assert any(p.startswith(f"no capacity in {first}; queued in") for p in phases)
    assert next(iter(sandbox.tpu.queued.values())).zone != first


async def test_quota_zero_everywhere_refuses_the_plan(sandbox: Sandbox, deps: Deps) -> None:
    async def say(text: str) -> None:
        assert "nothing the bot can do" in text

    await TPU_SCENARIOS["tpu-quota-zero"].run(sandbox, say)
    plan = await build_plan("deploy", {"profile": TPU_PROFILE}, _tpu(deps), deps.writes.env)
    assert "No zone offers this slice with quota" in plan.blocked()
    assert "quota 0 chips" in plan.blocked()


async def test_preempted_while_serving_is_diagnosed(sandbox: Sandbox, deps: Deps) -> None:
    async def say(text: str) -> None:
        pass

    await TPU_SCENARIOS["tpu-preempted"].run(sandbox, say)
    sandbox.clock.advance(60)
    info = await _tpu(deps).get_service(SERVICE)
    assert info.ready is False and info.terminal_condition is not None
    assert info.terminal_condition.reason == "SUSPENDED"
    assert await _kinds(deps) == ["tpu_preempted"]


async def test_hbm_oom_at_load_is_diagnosed_from_vllm_lines(sandbox: Sandbox, deps: Deps) -> None:
    async def say(text: str) -> None:
        pass

    await TPU_SCENARIOS["tpu-hbm-oom"].run(sandbox, say)
    sandbox.clock.advance(300)
    sandbox.tpu_nodes.tick()
    assert await eventually(lambda: any("exceeds total_hbm_limit_cap_gb" in str(e) for e in sandbox.logging.entries))
    assert await _kinds(deps) == ["tpu_hbm_oom"]


def test_the_console_deploys_a_tpu_profile_and_destroys_it_by_typed_name() -> None:
    """As a user runs it: `./dev console` in the sandbox (a subprocess), the fast clock, no credentials."""
    from tests.test_sandbox_console import _console, _env

    script = "\n".join(
        [
            "/gemma fit gemma-4-31b --tpu v6e-1",
            f"/gemma deploy {TPU_PROFILE}",
            "click Confirm",
            f"/gemma status {SERVICE}",
            f"/gemma destroy {SERVICE}",
            "click Destroy…",
            "not-this-one",
            f"/gemma destroy {SERVICE}",
            "click Destroy…",
            SERVICE,
            f"/gemma status {SERVICE} --fresh",
            "quit",
        ]
    )
    result = _console(script + "\n", _env())
    out = result.stdout
    assert result.returncode == 0, result.stderr
    assert "needs more chips than v6e-1" in out and "Smallest slice that fits: `v6e-4`" in out
    assert f"Plan: Create Cloud TPU queued resource `{SERVICE}`: v6e-4 on-demand" in out
    assert f"deploy `{SERVICE}`: PROVISIONING in" in out
    assert f"deploy `{SERVICE}`: ready" in out
    assert f"● {SERVICE}: ready" in out and "Served models  `google/gemma-4-31B-it`" in out
    # a slice is shown as one: its chips and HBM, not "4 x v6e-4" GPUs
    assert "TPU v6e-4 slice: 4 chip(s), 128 GB HBM in all" in out and "x v6e-4" not in out
    assert "The name typed does not match" in out  # the first destroy: refused, nothing deleted
    assert f"destroy `{SERVICE}`: deleted" in out
    assert f"Service `{SERVICE}` does not exist" in out


async def test_tpu_zones_command_lists_usable_zones_and_says_when_none_is(sandbox: Sandbox, deps: Deps) -> None:
    from handlers.context import CommandContext
    from handlers.registry import load_all
    from handlers.render_text import to_text
    from handlers.router import run_command
    from tests.agent_helpers import RecordingResponder

    load_all()

    def ctx(args: str) -> CommandContext:
        return CommandContext(
            deps=deps, responder=RecordingResponder(), user_id="U1", channel_id="C1", args=args.split()
        )  # type: ignore[arg-type]

    reply = await run_command(ctx("zones v6e-8"), "tpu")
    n = len(load_tpu_catalog().zones)
    assert reply is not None and f"{n} of {n} zones usable" in reply.title
    assert "TPUV6EPerProjectPerZoneForTPUAPI" in to_text(reply)

    async def say(text: str) -> None:
        pass

    await TPU_SCENARIOS["tpu-quota-zero"].run(sandbox, say)
    reply = await run_command(ctx("zones v6e-8 --provisioning spot"), "tpu")
    assert reply is not None and f"0 of {n} zones usable" in reply.title
    assert "Nothing the bot can do" in to_text(reply)


async def test_one_price_for_a_running_slice_in_every_reply(sandbox: Sandbox, deps: Deps) -> None:
    """The slice's price per hour is one number: the deploy plan, /gemma fit --tpu, the zone search, /gemma cost
    of the running slice and its destroy plan all say it (TpuCatalog.slice_hour_usd), and cost prices the slice,
    not a Cloud Run instance of 1 vCPU and 512 MiB."""
    import re

    from handlers.render_text import to_text
    from skills.capacity.tpu_catalog import load_tpu_catalog
    from tests.deploy_helpers import command

    tpu = load_tpu_catalog()
    zone = _first_zone()
    rate, _ = tpu.chip_hour_usd("on-demand", tpu.region_of(zone))
    assert rate is not None
    usd = rate * tpu.accelerator("v6e-4")[1].chips
    price = f"${usd:,.2f}/h"

    def text(reply: object) -> str:
        assert reply is not None, "no reply"
        return to_text(reply)  # type: ignore[arg-type]

    plan, _ = await command(deps, "deploy gemma4-31b-tpu-v6e4")
    assert f"Cost while ACTIVE, serving or idle (no scale to zero): {price}" in text(plan), text(plan)
    assert "New service" in text(plan) and "No field changes" not in text(plan)  # a create lists its fields
    phases: list[str] = []
    assert (await _deploy(sandbox, deps, phases)).ok  # type: ignore[attr-defined]

    fit, _ = await command(deps, f"fit gemma-4-31b --tpu v6e-4 --region {tpu.region_of(zone)}")
    zones, _ = await command(deps, "tpu zones v6e-4")
    cost, _ = await command(deps, f"cost {SERVICE}")
    destroy, _ = await command(deps, f"destroy {SERVICE}")
    assert price in text(fit), text(fit)
    assert next(line for line in text(zones).splitlines() if f" {zone}:" in line).endswith(price)
    assert price.removesuffix("/h") + "/hour while the slice exists" in text(cost), text(cost)
    assert "vCPU" not in text(cost) and "v6e-4" in text(cost)
    amounts = {float(m.replace(",", "")) for m in re.findall(r"\$([\d,]+\.\d\d)/h(?:our)?\b", text(cost))}
    assert amounts == {round(usd, 2)}, text(cost)  # idle and busy alike: a slice bills while it exists
    assert price in text(destroy), text(destroy)

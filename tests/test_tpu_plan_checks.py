"""Issue 45 item 5: service names are unique across serving targets, and every argument of a TPU deploy (zone, name,
flags) is checked at plan time. On the sandbox (the real google-cloud-tpu and Cloud Run clients on 127.0.0.1, the
sandbox clock stopped): a TPU deploy may not take a Cloud Run service's name (nor the reverse), a slice deployed
under its own name is what status and destroy of that name reach, and a bad zone, a bad node id or a GPU-only flag
is refused before any Confirm, with nothing created."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.deps import Deps
from bot.sandbox.clock import SandboxClock
from bot.sandbox.cloud import Sandbox
from bot.sandbox.tpu_scenarios import TPU_PROFILE
from bot.settings import Settings, load_settings
from bot.wiring import build_deps, close_deps
from handlers.commands.status import read_status
from handlers.fit_args import chat_parser
from handlers.tpu_fit_render import tpu_request
from skills.capacity.tpu_catalog import load_tpu_catalog
from skills.deploy.execute import execute as execute_plan
from skills.errors import InvalidInput
from skills.targets.plan import Plan
from skills.targets.registry import Targets

CLOUD_RUN_SERVICE = "vllm-gemma4"  # the sandbox's Cloud Run service (seeded at start)
SLICE = "my-slice"


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


async def _propose(deps: Deps, **params: object) -> Plan:
    return await deps.writes.propose("deploy", dict(params), user_id="U1", channel_id="C1")


def _created(sandbox: Sandbox) -> list[str]:
    return [name for name, _ in sandbox.tpu.requests if name == "CreateQueuedResource"]


async def test_a_tpu_deploy_may_not_take_a_cloud_run_services_name(sandbox: Sandbox, deps: Deps) -> None:
    assert CLOUD_RUN_SERVICE in sandbox.cloud_run.services
    plan = await _propose(deps, profile=TPU_PROFILE, service=CLOUD_RUN_SERVICE)
    blocked = plan.blocked()
    assert plan.target == "cloud-tpu" and blocked, plan.summary  # no Confirm
    assert f"`{CLOUD_RUN_SERVICE}` is already a Cloud Run service" in blocked
    assert "--service" in blocked and f"/gemma destroy {CLOUD_RUN_SERVICE}" in blocked  # the two ways out
    assert not _created(sandbox) and not sandbox.tpu.queued


async def test_a_cloud_run_deploy_may_not_take_a_slices_name(sandbox: Sandbox, deps: Deps) -> None:
    tpu_plan = await _propose(deps, profile=TPU_PROFILE, service=SLICE)
    assert not tpu_plan.blocked(), tpu_plan.blocked()
    tpu = deps.targets.for_kind("cloud-tpu")
    assert tpu_plan.spec is not None
    await tpu.apply_service(SLICE, tpu_plan.spec, create=True)  # the slice exists (queued)
    plan = await _propose(deps, profile="gemma4-12b-qat-l4", service=SLICE)
    assert plan.target == "cloud-run"
    assert f"`{SLICE}` is already a Cloud TPU service" in plan.blocked()
    assert SLICE not in sandbox.cloud_run.services


async def test_a_tpu_deploy_may_not_take_the_name_the_settings_give_cloud_run(sandbox: Sandbox, deps: Deps) -> None:
    """VLLM_SERVICE_NAME is the default target's by the settings (status of it asks no other target): a slice under
    that name would be unreachable by it, even while Cloud Run has no such service yet."""
    from skills.deploy.plan_builder import build_plan

    reserved = "not-deployed-yet"
    targets = Targets(by_kind=deps.targets.by_kind, default_kind="cloud-run", default_service=reserved)
    tpu = targets.for_kind("cloud-tpu")
    plan = await build_plan(
        "deploy", {"profile": TPU_PROFILE, "service": reserved}, tpu, deps.writes.env, targets=targets
    )
    assert f"`{reserved}` is the Cloud Run service this bot's settings name" in plan.blocked()
    assert "--service" in plan.blocked()


async def test_a_slice_under_its_own_name_is_what_status_and_destroy_reach(sandbox: Sandbox, deps: Deps) -> None:
    plan = await _propose(deps, profile=TPU_PROFILE, service=SLICE)
    assert not plan.blocked(), plan.blocked()
    tpu = deps.targets.for_kind("cloud-tpu")

    async def tick(_p: object) -> None:
        sandbox.clock.advance(120)

    result = await execute_plan(tpu, plan, logs=tpu.logs, progress=tick, poll_s=0.01, progress_every_s=0)
    assert result.ok, result.detail
    # As after a restart: a registry that knows only the names in the settings asks the targets who holds it.
    report = await read_status(deps, SLICE, fresh=True)
    assert report.service.accelerator.startswith("TPU v6e-4 slice") and report.service.ready is True
    assert deps.targets.for_service(SLICE).kind == "cloud-tpu"  # learned, for the commands that do not ask
    fresh = Targets(by_kind=deps.targets.by_kind, default_kind="cloud-run")
    assert (await fresh.locate(SLICE)).kind == "cloud-tpu"
    assert (await fresh.locate(CLOUD_RUN_SERVICE)).kind == "cloud-run"
    destroy = await deps.writes.propose("destroy", {"service": SLICE}, user_id="U1", channel_id="C1")
    assert destroy.target == "cloud-tpu" and destroy.summary.startswith(f"Delete Cloud TPU queued resource `{SLICE}`")
    assert CLOUD_RUN_SERVICE in sandbox.cloud_run.services and SLICE not in sandbox.cloud_run.services


@pytest.mark.parametrize(
    ("zone", "said"),
    [
        ("us-central1-a", "not a Cloud TPU v6e zone"),  # a real zone, but not one skills/data/tpu.yaml lists
        ("mars-north1-z", "not a Cloud TPU v6e zone"),
    ],
)
async def test_a_zone_outside_the_tpu_data_is_refused_before_anything_is_asked(
    sandbox: Sandbox, deps: Deps, zone: str, said: str
) -> None:
    with pytest.raises(InvalidInput) as exc:
        await _propose(deps, profile=TPU_PROFILE, zone=zone)
    assert said in exc.value.message and "regions-zones" in exc.value.message  # the data's source, named
    assert "us-east5-a" in exc.value.hint  # the zones it may be
    assert not _created(sandbox)


async def test_a_zone_whose_api_does_not_offer_the_type_is_refused(sandbox: Sandbox, deps: Deps) -> None:
    zone = "europe-west4-a"
    assert zone in load_tpu_catalog().zones
    sandbox.tpu.add_zone(zone, types=("v6e-1",))  # the API lists only v6e-1 there
    plan = await _propose(deps, profile=TPU_PROFILE, zone=zone)
    assert f"Cloud TPU API does not list v6e-4 in {zone}" in plan.blocked()
    assert not _created(sandbox)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("My_Slice", "lower-case"),
        ("9slice", "start with a lower-case letter"),
        ("slice-", "cannot end with '-'"),
        ("s" * 64, "longer than 63"),
    ],
)
async def test_a_bad_node_id_is_refused_at_plan_time(sandbox: Sandbox, deps: Deps, name: str, why: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        await _propose(deps, profile=TPU_PROFILE, service=name)
    assert "not a Cloud TPU node id" in exc.value.message and why in exc.value.message
    assert not _created(sandbox) and not sandbox.tpu.requests  # refused before any call carried the name


@pytest.mark.parametrize(
    ("params", "flag"),
    [
        ({"gpu": "nvidia-l4"}, "--gpu"),
        ({"gpu_count": 2}, "--gpu-count"),
        ({"enforce_eager": True}, "--enforce-eager"),
        ({"kv_cache_dtype": "fp8"}, "--kv-cache-dtype"),
        ({"cpu_offload_gb": 4}, "--cpu-offload-gb"),
        ({"memory": "32Gi"}, "--memory"),
    ],
)
async def test_gpu_only_flags_are_refused_on_a_tpu_deploy_as_fit_refuses_them(
    sandbox: Sandbox, deps: Deps, params: dict[str, object], flag: str
) -> None:
    with pytest.raises(InvalidInput) as exc:
        await _propose(deps, profile=TPU_PROFILE, **params)
    assert f"`{flag}`" in exc.value.message and "Cloud TPU" in exc.value.message
    assert not _created(sandbox)
    fit_args = {"memory": "--memory 32Gi", "gpu_count": "--gpu-count 2", "enforce_eager": "--enforce-eager"}
    typed = fit_args.get(next(iter(params)), f"{flag} {next(iter(params.values()))}")
    with pytest.raises(InvalidInput) as fit_exc:  # `/gemma fit --tpu` refuses the same flag, from the same list
        tpu_request(chat_parser().parse(["31b", "--tpu", "v6e-4", *typed.split()]))
    assert f"`{flag}`" in fit_exc.value.message


async def test_cloud_run_settings_are_refused_on_a_tpu_deploy(sandbox: Sandbox, deps: Deps) -> None:
    with pytest.raises(InvalidInput) as exc:
        await _propose(deps, profile=TPU_PROFILE, cpu="8", max_instances=3)
    assert "`--cpu`" in exc.value.message and "`--max-instances`" in exc.value.message
    assert not _created(sandbox)


def test_the_console_refuses_a_taken_name_and_reaches_a_slice_by_its_own() -> None:
    """As a user runs it: `./dev console` in the sandbox (a subprocess), the fast clock, no credentials."""
    from tests.test_sandbox_console import _console, _env

    script = "\n".join(
        [
            f"/gemma deploy {TPU_PROFILE} --service {CLOUD_RUN_SERVICE}",
            f"/gemma deploy {TPU_PROFILE} --service Bad_Name",
            f"/gemma deploy {TPU_PROFILE} --zone us-central1-a",
            f"/gemma deploy {TPU_PROFILE} --enforce-eager",
            f"/gemma deploy {TPU_PROFILE} --service {SLICE}",
            "click Confirm",
            f"/gemma status {SLICE}",
            f"/gemma destroy {SLICE}",
            "click Destroy…",
            SLICE,
            f"/gemma status {CLOUD_RUN_SERVICE}",
            "quit",
        ]
    )
    result = _console(script + "\n", _env())
    out = result.stdout
    assert result.returncode == 0, result.stderr
    refused, rest = out.split(f"Plan: Create Cloud TPU queued resource `{SLICE}`", 1)
    assert f"`{CLOUD_RUN_SERVICE}` is already a Cloud Run service" in refused
    assert "not a Cloud TPU node id" in refused and "not a Cloud TPU v6e zone" in refused
    assert "`--enforce-eager`" in refused
    assert "Confirm" not in refused  # nothing before the good plan could be confirmed
    assert f"deploy `{SLICE}`: ready" in rest
    assert f"● {SLICE}: ready" in rest and "TPU v6e-4 slice" in rest
    assert f"destroy `{SLICE}`: deleted" in rest
    assert f"● {CLOUD_RUN_SERVICE}: ready" in rest  # the Cloud Run service was never touched

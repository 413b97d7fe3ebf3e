"""TpuWorld scenarios for the Cloud TPU target: no capacity in the first zone, quota zero everywhere, a spot node
preempted while serving, HBM out of memory at load. Each changes the TPU stand-in (and the Cloud Quotas one) the
way the cloud would, or deploys by hand as a teammate with gcloud would (straight to the TPU API, past the bot's
planner); then the bot's own commands show it: the deploy's progress, the plan's refusal, `/gemma status` and
`/gemma diagnose` on the TPU service."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from google.cloud import tpu_v2

from bot.sandbox.clock import SandboxClock
from bot.sandbox.preflight_standins import PreflightStandIns
from bot.sandbox.tpu_api import State, TpuStandIn
from skills.capacity.catalog import load_catalog
from skills.capacity.tpu_catalog import load_tpu_catalog
from skills.targets.tpu.spec import DEFAULT_IMAGE, metadata_of


class TpuWorld(Protocol):
    """What a TPU scenario changes in the sandbox (bot/sandbox/cloud.py TpuWorld is one): named here, so the
    scenarios need not import the sandbox that lists them."""

    project: str
    tpu: TpuStandIn
    preflight: PreflightStandIns
    clock: SandboxClock


Narrate = Callable[[str], Awaitable[None]]
SERVICE = "vllm-gemma4-tpu"  # the TPU service name the sandbox's settings give (TPU_SERVICE_NAME's default)
TPU_PROFILE = "gemma4-31b-tpu-v6e4"


@dataclass(frozen=True)
class TpuScenario:
    name: str
    summary: str
    kind: str
    run: Callable[[TpuWorld, Narrate], Awaitable[None]]


def _first_zone() -> str:
    """The zone the zone search tries first for an on-demand v6e-4 (every zone offers it with quota in the sandbox):
    the cheapest region's first zone in skills/data/tpu.yaml order."""
    tpu = load_tpu_catalog()

    def key(z: str) -> tuple[float, int]:
        rate, _ = tpu.chip_hour_usd("on-demand", tpu.region_of(z))
        return (rate if rate is not None else 1e9, list(tpu.zones).index(z))

    return min(tpu.zones, key=key)


async def _no_capacity(sb: TpuWorld, say: Narrate) -> None:
    zone = _first_zone()
    sb.tpu.set_capacity(zone, "on-demand", 0)
    sb.tpu.set_capacity(zone, "spot", 0)
    await say(
        f"{zone} has no v6e capacity left (its quota is fine). `/gemma deploy {TPU_PROFILE}` then Confirm: the queued "
        f"resource waits in WAITING_FOR_RESOURCES there, fails for capacity, and the deploy moves to the next zone the "
        "search found with quota."
    )


async def _quota_zero(sb: TpuWorld, say: Narrate) -> None:
    tpu = load_tpu_catalog()
    for zone in tpu.zones:
        for tier in ("on-demand", "spot"):
            sb.tpu.set_quota(zone, tier, 0)
        sb.preflight.quotas.set(tpu.quota.service, tpu.quota.on_demand, zone, 0, dimension="zone")
        sb.preflight.quotas.set(tpu.quota.service, tpu.quota.spot, zone, 0, dimension="zone")
    await say(
        f"Every v6e zone now has 0 chips of TPU quota ({tpu.quota.on_demand}, {tpu.quota.spot}). "
        f"`/gemma deploy {TPU_PROFILE}` is refused at plan time: nothing the bot can do but say so — request "
        "quota (Console > IAM & Admin > Quotas, service tpu.googleapis.com)."
    )


def _by_hand(sb: TpuWorld, model: str, accel: str, *, spot: bool, mml: int) -> str:
    """A queued resource created straight through the TPU API (gcloud), with the node's startup spec."""
    tpu = load_tpu_catalog()
    m = load_catalog().model(model)
    zone = next(z for z in tpu.zones if sb.tpu.zones[z].capacity["spot" if spot else "on-demand"] >= int(accel[4:]))
    spec = {
        "project": sb.project,
        "zone": zone,
        "zones": [zone],
        "acceleratorType": accel,
        "runtimeVersion": tpu.chip.runtime_version,
        "provisioning": "spot" if spot else "on-demand",
        "nodeId": SERVICE,
        "image": DEFAULT_IMAGE,
        "model": m.name,
        "hfRepo": m.hf_repo,
        "vllmArgs": ["--tensor-parallel-size", accel[4:], "--max-model-len", str(mml)],
        "apiKeySecret": "vllm-api-key",
        "hfTokenSecret": "hf-token",
        "queueWaitS": 900,
    }
    parent = f"projects/{sb.project}/locations/{zone}"
    node = tpu_v2.Node(accelerator_type=accel, runtime_version=spec["runtimeVersion"], metadata=metadata_of(spec))
    qr = tpu_v2.QueuedResource(
        tpu=tpu_v2.QueuedResource.Tpu(
            node_spec=[tpu_v2.QueuedResource.Tpu.NodeSpec(parent=parent, node_id=SERVICE, node=node)]
        )
    )
    if spot:
        qr.spot = tpu_v2.QueuedResource.Spot()
    sb.tpu.create_by_hand(parent, SERVICE, qr)
    return zone


def _exists(sb: TpuWorld) -> bool:
    return any(n.endswith(f"/queuedResources/{SERVICE}") for n in sb.tpu.queued)


async def _preempted(sb: TpuWorld, say: Narrate) -> None:
    if not _exists(sb):
        zone = _by_hand(sb, "gemma-4-e4b", "v6e-1", spot=True, mml=16384)
        await say(f"A teammate created `{SERVICE}` by hand: gemma-4-e4b on a spot v6e-1 in {zone}.")
    q = next(q for n, q in sb.tpu.queued.items() if n.endswith(f"/queuedResources/{SERVICE}"))
    for _ in range(10):  # let it come up, one state at a time (simulated minutes)
        if q.qr.state.state == State.ACTIVE:
            break
        sb.clock.advance(120)
        with sb.tpu._lock:
            sb.tpu._advance()
    if q.qr.state.state != State.ACTIVE:
        await say(f":warning: `{SERVICE}` is {q.qr.state.state.name}, not ACTIVE: nothing to preempt yet.")
        return
    if q.tier != "spot":
        await say(f":warning: `{SERVICE}` is {q.tier}, not spot: Cloud TPU does not preempt it.")
        return
    sb.tpu.preempt(SERVICE)
    await say(
        f"Cloud TPU reclaimed the spot node of `{SERVICE}`: PREEMPTED, its queued resource SUSPENDING then "
        f"SUSPENDED. Try `/gemma status {SERVICE}` and `/gemma diagnose {SERVICE}`."
    )


async def _hbm_oom(sb: TpuWorld, say: Narrate) -> None:
    if _exists(sb):
        await say(f":warning: `{SERVICE}` exists: `/gemma destroy {SERVICE}` first, then run this again.")
        return
    zone = _by_hand(sb, "gemma-4-31b", "v6e-1", spot=False, mml=8192)
    await say(
        f"A teammate deployed gemma-4-31B on one v6e chip in {zone} by hand (no fit check): 57 GiB of weights on a "
        f"30.75 GiB chip. Once ACTIVE, vLLM's TPU worker stops at load. Try `/gemma diagnose {SERVICE}`."
    )


_ALL = [
    TpuScenario("tpu-no-capacity", "no v6e capacity in the zone searched first", "tpu_no_capacity", _no_capacity),
    TpuScenario("tpu-quota-zero", "0 chips of TPU quota in every zone", "tpu_quota_exceeded", _quota_zero),
    TpuScenario("tpu-preempted", "a spot TPU node preempted while serving", "tpu_preempted", _preempted),
    TpuScenario("tpu-hbm-oom", "31B by hand on one v6e chip: HBM out of memory at load", "tpu_hbm_oom", _hbm_oom),
]
TPU_SCENARIOS: dict[str, TpuScenario] = {s.name: s for s in _ALL}

"""What the running configuration costs: $/hour from the service spec and list prices, and $/million output
tokens at the throughput the last benchmark sweep measured (single stream and best batched cell).

Prices come from skills/data/prices.yaml through skills/capacity/prices.instance_price, the one function fit,
deploy plans and bench price with too. A GPU service bills instance-based (the whole instance while it runs), so
$/hour is per running instance; scale-to-zero costs nothing while idle.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from skills.capacity.aca_catalog import load_aca_catalog
from skills.capacity.aca_prices import aca_price
from skills.capacity.catalog import load_catalog
from skills.capacity.prices import format_usd, instance_price
from skills.capacity.tpu_catalog import Provisioning, TpuCatalog, load_tpu_catalog
from skills.errors import InvalidInput
from skills.ports import ServiceInfo
from skills.serving.sizes import gib


def parse_cpu(cpu: str) -> float:
    """Kubernetes CPU quantity: '4', '4.0', '4000m'."""
    s = cpu.strip().lower()
    try:
        return float(s[:-1]) / 1000 if s.endswith("m") else float(s)
    except ValueError:
        raise InvalidInput(f"Cannot read the CPU limit {cpu!r}.") from None


class Throughput(BaseModel):
    concurrency: int
    context: int
    output_tok_per_s: float
    usd_per_m_output_tokens: float


class Rate(BaseModel):
    """One measured throughput: output tokens/s at a concurrency and context."""

    concurrency: int
    context: int
    output_tok_per_s: float


class Measured(BaseModel):
    """What a benchmark measured, as cost needs it: plain values (skills/bench/report.py `measured` reads them
    off a sweep), so the price list does not depend on how benchmarks are stored."""

    sweep_id: str
    model: str = ""
    single_stream: Rate | None = None  # the best concurrency-1 cell
    batched: Rate | None = None  # the best cell at any concurrency


class CostReport(BaseModel):
    service: str
    gpu_type: str = ""
    gpu_count: int = 0
    accelerator: str = ""  # a target's own accelerator line (a TPU slice) instead of "GPU N x type, vCPU, GiB"
    vcpu: float
    memory_gib: float
    usd_per_hour: float | None  # one running instance; None: no sourced price (said as "price unknown")
    breakdown: dict[str, float] = Field(default_factory=dict)  # gpu / cpu / memory, $/h
    min_instances: int = 0
    max_instances: int = 0
    scaling_unit: str = "instance"  # what min/max count (ACA: "replica"); "": nothing scales, it bills while it exists
    idle_usd_per_hour: float | None = 0.0  # what min-instances cost with no traffic
    # Instances other revisions keep running besides this configuration's (ACA's Multiple revision mode keeps an
    # old revision active with its min replicas until it is deactivated): in the idle and busy figures.
    kept_instances: int = 0
    max_usd_per_hour: float | None = 0.0  # all max-instances running
    single_stream: Throughput | None = None
    batched: Throughput | None = None
    sweep_id: str = ""
    notes: list[str] = Field(default_factory=list)


def usd_per_m_tokens(usd_per_hour: float, tok_per_s: float) -> float:
    return usd_per_hour / (tok_per_s * 3600) * 1e6


def container_limits(container: dict[str, Any]) -> tuple[float, float]:
    """A Cloud Run container's CPU (vCPU) and memory (GiB) limits; Cloud Run's defaults (1 vCPU, 512 MiB) for a
    limit not set."""
    limits = (container.get("resources") or {}).get("limits") or {}
    return parse_cpu(str(limits.get("cpu") or "1")), gib(str(limits.get("memory") or "512Mi"))


def _sidecar_limits(spec: dict[str, Any]) -> tuple[float, float, list[str]]:
    """CPU and memory of the containers other than the serving one (the one with a port), and their names."""
    containers = (spec.get("template") or {}).get("containers") or []
    sidecars = [c for c in containers if not c.get("ports")] if len(containers) > 1 else []
    each = [container_limits(c) for c in sidecars]
    return sum(c for c, _ in each), sum(m for _, m in each), [str(c.get("name") or "?") for c in sidecars]


def hourly_cost(info: ServiceInfo, region: str | None = None) -> CostReport:
    """$/hour of one running instance of `info` in `region` (None: the price table's default region)."""
    cat = load_catalog()
    notes: list[str] = []
    vcpu = parse_cpu(info.cpu) if info.cpu else 1.0
    mem = gib(info.memory) if info.memory else 0.5
    if not info.cpu or not info.memory:
        notes.append("CPU or memory limit not set in the spec; Cloud Run defaults (1 vCPU, 512 MiB) assumed.")
    side_cpu, side_gib, sidecars = _sidecar_limits(info.spec)
    if sidecars:
        # Cloud Run bills an instance's containers together: a sidecar's CPU and memory are on the bill too.
        vcpu, mem = vcpu + side_cpu, mem + side_gib
        notes.append(f"Sidecar containers ({', '.join(sidecars)}): +{side_cpu:g} vCPU, +{side_gib:g} GiB in the price.")
    gpu_name: str | None = None
    if info.gpu_type:
        try:
            gpu_name = cat.gpu(info.gpu_type).name
        except InvalidInput:
            notes.append(f"No price for GPU type {info.gpu_type} in the catalog; GPU cost left out.")
    # A GPU service bills instance-based; without a GPU the spec's cpu_idle says which mode, and the bot's services
    # keep CPU always allocated, so instance-based is what it prices either way.
    try:
        price = instance_price(gpu_name, max(info.gpu_count, 1), vcpu, mem, region)
    except InvalidInput as exc:
        notes.append(f"{exc.message} GPU cost left out.")
        price = instance_price(None, 0, vcpu, mem, region)
    breakdown = price.breakdown
    notes += price.notes
    if "gpu" in breakdown:
        each = breakdown["gpu"] / max(info.gpu_count, 1)
        notes.append(
            f"GPU price: ${each:.4f}/h each (Cloud Run Tier {price.tier}, "
            f"{'with' if price.zonal_redundancy else 'without'} zonal redundancy)."
        )
    notes.append(
        f"Instance-based billing rates in {price.region} (Tier {price.tier}), read {price.checked.isoformat()}."
    )
    per_hour = price.usd_per_hour
    notes.append(
        "Scale to zero: $0 while idle." if info.min_instances == 0 else
        f"min-instances {info.min_instances}: billed around the clock even without traffic."
    )  # fmt: skip
    return CostReport(
        service=info.name,
        gpu_type=info.gpu_type,
        gpu_count=info.gpu_count,
        vcpu=vcpu,
        memory_gib=round(mem, 2),
        usd_per_hour=per_hour,
        breakdown=breakdown,
        min_instances=info.min_instances,
        max_instances=info.max_instances,
        idle_usd_per_hour=per_hour * info.min_instances,
        max_usd_per_hour=per_hour * max(info.max_instances, 1),
        notes=notes,
    )


def slice_cost(
    info: ServiceInfo, accelerator_type: str, provisioning: Provisioning, zone: str, tpu: TpuCatalog | None = None
) -> CostReport:
    """$/hour of a running Cloud TPU slice: the catalog's slice price (TpuCatalog.slice_hour_usd, the one every
    TPU reply shows) in the zone's region. A slice bills while it exists: no scale to zero."""
    tpu = tpu or load_tpu_catalog()
    name, acc = tpu.accelerator(accelerator_type)
    region = tpu.region_of(zone)
    usd, source = tpu.slice_hour_usd(name, provisioning, region)
    if usd is None:
        notes = [f"Price unknown: no {provisioning} price per chip-hour for {region} ({source})."]
    else:
        notes = [f"{provisioning} rate for {region}: {source}.", "A TPU slice bills while it exists: no scale to zero."]
    return CostReport(
        service=info.name,
        gpu_type=name,
        gpu_count=acc.chips,
        accelerator=f"Cloud TPU {name} ({acc.chips} chips), {provisioning}, {zone}",
        scaling_unit="",
        vcpu=0,
        memory_gib=0,
        usd_per_hour=usd,
        min_instances=1,
        max_instances=1,
        idle_usd_per_hour=usd,
        max_usd_per_hour=usd,
        notes=notes,
    )


def aca_cost(
    info: ServiceInfo, profile_type: str, region: str | None = None, kept: dict[str, int] | None = None
) -> CostReport:
    """$/hour of a running Azure Container Apps app on a GPU workload profile: the replica price fit and ACA plans
    show (skills/capacity/aca_prices.aca_price), times the replicas. A serverless GPU replica bills at the active
    rate while it runs and nothing at zero replicas; usd_per_hour is None ("price unknown") without a sourced rate.
    `kept`: other active revisions of the app and their min replicas, which run (and bill) whatever serves."""
    prof = load_aca_catalog().profile(profile_type)
    price = aca_price(prof.type, region)
    each = price.per_replica_usd_per_hour
    extra = sum((kept or {}).values())
    notes = [f"Workload profile {prof.label}: {price.describe()}.", *price.notes]
    for name, n in sorted((kept or {}).items()):
        notes.append(
            f"`{name}` is still active with min replicas {n} (Multiple revision mode keeps it): "
            f"{format_usd(each * n if each is not None else None, 'h')} more, idle or not, until it is deactivated."
        )
    notes.append(
        "Scale to zero: $0 while no replica runs; a running GPU replica is always billed at the active rate."
        if info.min_instances == 0
        else f"min replicas {info.min_instances}: billed around the clock even without traffic (no idle rate for GPUs)."
    )
    return CostReport(
        service=info.name,
        gpu_type=prof.gpu,
        gpu_count=prof.gpu_count,
        accelerator=f"Azure Container Apps {prof.label}, {price.region}",
        scaling_unit="replica",
        vcpu=prof.vcpu,
        memory_gib=prof.memory_gib,
        usd_per_hour=each,
        breakdown=price.breakdown,
        min_instances=info.min_instances,
        max_instances=info.max_instances,
        kept_instances=extra,
        idle_usd_per_hour=each * (info.min_instances + extra) if each is not None else None,
        max_usd_per_hour=each * (max(info.max_instances, 1) + extra) if each is not None else None,
        notes=notes,
    )


def cost_report(rep: CostReport, measured: Measured | None) -> CostReport:
    """An hourly price (the service's target computes it), plus $/M output tokens at the last sweep's
    single-stream and best batched throughput."""
    if measured is None:
        rep.notes.append("No benchmark stored yet: run `/gemma bench` for $/million tokens at measured throughput.")
        return rep
    rep.sweep_id = measured.sweep_id
    for attr, cell in (("single_stream", measured.single_stream), ("batched", measured.batched)):
        if cell is not None and cell.output_tok_per_s > 0 and rep.usd_per_hour is not None:
            setattr(
                rep,
                attr,
                Throughput(
                    concurrency=cell.concurrency,
                    context=cell.context,
                    output_tok_per_s=cell.output_tok_per_s,
                    usd_per_m_output_tokens=usd_per_m_tokens(rep.usd_per_hour, cell.output_tok_per_s),
                ),
            )
    if measured.single_stream is None:
        rep.notes.append("The last sweep had no successful concurrency-1 cell; single-stream cost unknown.")
    if measured.model:
        rep.notes.append(
            f"Throughput from sweep {measured.sweep_id} of {measured.model}, assuming the instance is kept busy."
        )
    return rep

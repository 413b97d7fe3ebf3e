"""Cloud Run prices, one table (skills/data/prices.yaml) and one function: what an instance costs per hour.

fit, deploy plans, `/gemma cost` and `/gemma bench` all price through `instance_price`, so the figure a plan shows
is the figure the cost report shows. GPU services bill instance-based (the Cloud Run GPU page), so CPU and memory
are priced at the instance-based rates; the GPU at the rate without zonal redundancy unless asked (the bot renders
`--no-gpu-zonal-redundancy`). Every rate in the table names its source and the date it was read.
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from skills.errors import InvalidInput

BillingMode = Literal["instance", "request"]
Availability = Literal["available", "invitation"]


class Rate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    value: float = Field(gt=0)
    source: str = Field(min_length=3)
    checked: dt.date


class TierRates(BaseModel):
    model_config = ConfigDict(extra="forbid")

    vcpu_usd_per_s: Rate
    memory_usd_per_gib_s: Rate


class GpuRates(BaseModel):
    model_config = ConfigDict(extra="forbid")

    no_zonal_redundancy: Rate
    zonal_redundancy: Rate


class Region(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tier: str
    gpus: dict[str, Availability] = Field(default_factory=dict)


class FreeTier(BaseModel):
    model_config = ConfigDict(extra="forbid")

    vcpu_s: Rate
    memory_gib_s: Rate


class WorkedExample(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str
    usd_per_month: float
    source: str
    checked: dt.date


class PriceTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    checked: dt.date
    currency: Literal["USD"]
    sources: dict[str, str]
    tiers: dict[str, dict[BillingMode, TierRates]]
    gpus: dict[str, dict[str, GpuRates]]
    regions: dict[str, Region]
    regions_source: dict[str, str]
    default_region: str
    free_tier: dict[BillingMode, FreeTier] = Field(default_factory=dict)
    worked_example: WorkedExample | None = None

    def region(self, name: str) -> Region:
        """A region the table lists; any other offers no Cloud Run GPU here and its tier is not on record."""
        return self.regions.get(name) or Region(tier="unlisted")


class Price(BaseModel):
    """One running instance, per hour, with the rates it used."""

    usd_per_hour: float
    breakdown: dict[str, float]  # gpu / cpu / memory, $/h
    region: str
    tier: str
    billing: BillingMode
    zonal_redundancy: bool
    notes: list[str] = Field(default_factory=list)
    checked: dt.date


UNKNOWN_PRICE = "price unknown"


def format_usd(amount: float | None, per: str = "", *, approx: bool = False, places: int = 2) -> str:
    """A price as replies show it: `$2.70/h`, `~$1,971/month`. A price with no sourced rate (None) is
    "price unknown", never a made-up `$0`."""
    if amount is None:
        return UNKNOWN_PRICE
    return ("~" if approx else "") + f"${amount:,.{places}f}" + (f"/{per}" if per else "")


@lru_cache(maxsize=1)
def load_prices() -> PriceTable:
    text = resources.files("skills").joinpath("data/prices.yaml").read_text(encoding="utf-8")
    return PriceTable.model_validate(yaml.safe_load(text))


def _tier_rates(table: PriceTable, tier: str, billing: BillingMode) -> tuple[TierRates, str, list[str]]:
    if tier in table.tiers and billing in table.tiers[tier]:
        return table.tiers[tier][billing], tier, []
    note = f"No sourced {billing}-based rates for this region's tier ({tier}): Tier 1 rates used (Tier 2 costs more)."
    return table.tiers["1"][billing], "1", [note]


def instance_price(
    gpu: str | None,
    gpu_count: int,
    vcpu: float,
    memory_gib: float,
    region: str | None = None,
    *,
    zonal_redundancy: bool = False,
    billing: BillingMode = "instance",
    table: PriceTable | None = None,
) -> Price:
    """$/hour of one running Cloud Run instance. `gpu` None: no GPU. Raises InvalidInput for a GPU the table does
    not price, or a GPU with request-based billing (Cloud Run refuses that combination). A region the table does not
    list, or one whose tier has no sourced rates, is priced at Tier 1 and the price's notes say so."""
    t = table or load_prices()
    where = region or t.default_region
    reg = t.region(where)
    if gpu and billing != "instance":
        raise InvalidInput("Cloud Run GPU services must use instance-based billing.")
    rates, tier, notes = _tier_rates(t, reg.tier, billing)
    breakdown = {
        "cpu": vcpu * rates.vcpu_usd_per_s.value * 3600,
        "memory": memory_gib * rates.memory_usd_per_gib_s.value * 3600,
    }
    checked = [rates.vcpu_usd_per_s.checked, rates.memory_usd_per_gib_s.checked]
    if gpu:
        if gpu not in t.gpus:
            raise InvalidInput(f"No Cloud Run price for GPU `{gpu}`.", f"Priced: {', '.join(t.gpus)}.")
        if gpu not in reg.gpus:
            notes.append(f"{where} does not offer {gpu} on Cloud Run ({', '.join(regions_offering(gpu, t))} do).")
        by_tier = t.gpus[gpu]
        g = by_tier.get(tier) or by_tier["1"]
        if tier not in by_tier:
            notes.append(f"No sourced Tier {tier} {gpu} rate: the Tier 1 rate is used.")
        rate = g.zonal_redundancy if zonal_redundancy else g.no_zonal_redundancy
        breakdown["gpu"] = rate.value * 3600 * max(gpu_count, 1)
        checked.append(rate.checked)
    return Price(
        usd_per_hour=sum(breakdown.values()),
        breakdown=breakdown,
        region=where,
        tier=tier,
        billing=billing,
        zonal_redundancy=zonal_redundancy,
        notes=notes,
        checked=min(checked),
    )


def regions_offering(gpu: str, table: PriceTable | None = None, *, invitation: bool = False) -> list[str]:
    """Regions offering `gpu` on Cloud Run, Tier 1 first (invitation-only ones only when asked)."""
    t = table or load_prices()
    names = [n for n, r in t.regions.items() if r.gpus.get(gpu) == "available" or (invitation and gpu in r.gpus)]
    return sorted(names, key=lambda n: (t.regions[n].tier, list(t.regions).index(n)))


def region_advice(gpu: str, region: str, table: PriceTable | None = None) -> str | None:
    """A line when `region` does not simply offer `gpu` (absent, or by invitation only), naming alternatives."""
    t = table or load_prices()
    offered = t.regions.get(region)
    status = offered.gpus.get(gpu) if offered else None
    if status == "available":
        return None
    others = [r for r in regions_offering(gpu, t) if r != region]
    alt = f"; regions that offer it: {', '.join(others)}" if others else ""
    src = f"(Cloud Run GPU regions, checked {t.checked.isoformat()})"
    if status == "invitation":
        return f"{region} offers {gpu} by invitation only {src}{alt}."
    return f"{region} does not offer {gpu} on Cloud Run {src}{alt}."


def usage_cost(
    gpu: str | None,
    vcpu: float,
    memory_gib: float,
    instance_seconds: float,
    region: str | None = None,
    *,
    zonal_redundancy: bool = False,
    free_tier: bool = True,
    table: PriceTable | None = None,
) -> float:
    """$ for `instance_seconds` of running instances (summed over instances) in a month, with the monthly free tier
    for CPU and memory deducted (there is none for GPUs). Rates from `instance_price`, so the two agree."""
    t = table or load_prices()
    p = instance_price(gpu, 1, vcpu, memory_gib, region, zonal_redundancy=zonal_redundancy, table=t)
    cpu_s, mem_s = vcpu * instance_seconds, memory_gib * instance_seconds
    free = t.free_tier.get("instance") if free_tier else None
    if free is not None:
        cpu_s, mem_s = max(cpu_s - free.vcpu_s.value, 0.0), max(mem_s - free.memory_gib_s.value, 0.0)
    per_vcpu_s = p.breakdown["cpu"] / 3600 / vcpu if vcpu else 0.0
    per_gib_s = p.breakdown["memory"] / 3600 / memory_gib if memory_gib else 0.0
    return cpu_s * per_vcpu_s + mem_s * per_gib_s + p.breakdown.get("gpu", 0.0) / 3600 * instance_seconds

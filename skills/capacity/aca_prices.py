"""What a replica on an Azure Container Apps GPU workload profile costs: one function, `aca_price`, that fit, ACA
deploy plans and `/gemma cost` all price with (skills/data/aca.yaml `prices`).

Serverless GPU replicas bill per second in GPU-seconds, vCPU-seconds and GiB-seconds while they run, always at the
active rate, and nothing at zero replicas (aca.yaml `billing`). When all three per-second rates are sourced the
price is their sum for the profile's GPU, vCPU and memory; otherwise the profile's all-in hourly estimate, said as
an estimate; with neither, `usd_per_hour` is None and replies say "price unknown" (prices.format_usd).
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field

from skills.capacity.aca_catalog import AcaCatalog, load_aca_catalog
from skills.capacity.prices import format_usd


class AcaPrice(BaseModel):
    """`replicas` running replicas of one profile, per hour, with what the figure rests on."""

    profile: str
    region: str
    replicas: int
    usd_per_hour: float | None  # None: no sourced rate
    per_replica_usd_per_hour: float | None
    breakdown: dict[str, float] = Field(default_factory=dict)  # gpu / cpu / memory, $/h per replica (rates only)
    estimate: bool = False  # the all-in field figure, not the pricing page's rates
    source: str = ""
    notes: list[str] = Field(default_factory=list)
    checked: dt.date

    def describe(self) -> str:
        """`$1.26/h per replica (estimate: ...)` / `price unknown (...)`, for replies."""
        per = format_usd(self.per_replica_usd_per_hour, "h")
        what = f"{per} per replica" if self.per_replica_usd_per_hour is not None else per
        return f"{what} ({'estimate: ' if self.estimate else ''}{self.source})"


def aca_price(
    profile_type: str, region: str | None = None, replicas: int = 1, *, catalog: AcaCatalog | None = None
) -> AcaPrice:
    """$/hour of `replicas` replicas on `profile_type` in `region` (None: the first region offering it). A region
    that does not offer the profile is priced anyway (the rates are not regional here) and a note says so."""
    cat = catalog or load_aca_catalog()
    prof = cat.profile(profile_type)
    where = region or prof.regions[0]
    rates = cat.prices.profiles[prof.type]
    notes: list[str] = []
    if not prof.offered_in(where):
        notes.append(
            f"{where} does not offer {prof.type} ({', '.join(prof.regions)} do; {cat.cite(prof.sources['regions'])})."
        )
    gpu, vcpu, mem = rates.gpu_usd_per_s.value, cat.prices.vcpu_usd_per_s.value, cat.prices.memory_usd_per_gib_s.value
    breakdown: dict[str, float] = {}
    estimate = False
    if gpu is not None and vcpu is not None and mem is not None:
        breakdown = {
            "gpu": gpu * prof.gpu_count * 3600,
            "cpu": vcpu * prof.vcpu * 3600,
            "memory": mem * prof.memory_gib * 3600,
        }
        each: float | None = sum(breakdown.values())
        source = "the Azure pricing page's per-second rates"
    elif rates.all_in_usd_per_hour.value is not None:
        each, estimate = rates.all_in_usd_per_hour.value, True
        source = cat.cite(rates.all_in_usd_per_hour.source.removeprefix("estimate: ").split(" (")[0])
        notes.append(
            "The Azure pricing page's per-second GPU, vCPU and memory rates were not readable: "
            f"{prof.type} is priced at the project's all-in field figure, an estimate."
        )
    else:
        each, source = None, "no sourced rate for this profile"
        notes.append(f"Price unknown: no sourced rate for {prof.type} (aca.yaml prices).")
    if not prof.serverless:
        notes.append("A dedicated profile bills per instance, plus the Dedicated plan management fee.")
    return AcaPrice(
        profile=prof.type,
        region=where,
        replicas=replicas,
        usd_per_hour=each * replicas if each is not None else None,
        per_replica_usd_per_hour=each,
        breakdown=breakdown,
        estimate=estimate,
        source=source,
        notes=notes,
        checked=cat.prices.checked,
    )

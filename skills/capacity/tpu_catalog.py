"""Cloud TPU v6e as typed data (skills/data/tpu.yaml): accelerator types, zones, prices, quota ids, vLLM's TPU
memory accounting constants and what its TPU backend serves. Every figure in the file names its source."""

from __future__ import annotations

import datetime as dt
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skills.errors import InvalidInput

Provisioning = Literal["on-demand", "spot", "flex-start", "reserved"]
PROVISIONING: tuple[Provisioning, ...] = ("on-demand", "spot", "flex-start", "reserved")
SupportStatus = Literal["tested_upstream", "untested_upstream", "field_report", "known_to_fail"]
# How each state reads in a reply (skills/data/tpu.yaml `support` says what each rests on).
SUPPORT_LABEL: dict[str, str] = {
    "tested_upstream": "tested upstream",
    "untested_upstream": "untested upstream",
    "field_report": "runs in a field report",
    "known_to_fail": "known to fail",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Chip(_Strict):
    name: str
    display: str
    hbm_gb: float
    hbm_bandwidth_gb_s: float
    memory_gib: float  # JAX's bytes_limit per chip: vLLM's budget base
    runtime_version: str
    sources: dict[str, str]
    checked: dt.date


class AcceleratorType(_Strict):
    chips: int = Field(ge=1)
    topology: str


class Zone(_Strict):
    region: str
    note: str = ""  # what the docs say the zone needs (an AI zone must be turned on for the project)


class Rate(_Strict):
    value: float | None  # $ per chip-hour; None: no readable source (said, never guessed)
    source: str
    note: str = ""


class Prices(_Strict):
    currency: str
    checked: dt.date
    on_demand: dict[str, Rate]  # region -> rate
    reserved_1y: Rate
    reserved_3y: Rate
    spot: Rate
    flex_start: Rate
    billing: str


class Quota(_Strict):
    service: str
    dimension: Literal["zone"]
    on_demand: str
    spot: str
    on_demand_region: str
    spot_region: str
    flex_start: str | None
    unit: str
    source: str

    def quota_id(self, provisioning: Provisioning) -> str | None:
        """Spot uses preemptible quota; on-demand and reservations use on-demand quota (consumption options)."""
        return {"spot": self.spot, "flex-start": self.flex_start}.get(provisioning, self.on_demand)

    def region_quota_id(self, provisioning: Provisioning) -> str | None:
        """The regional quota a create must fit as well as the zone's (tpu.yaml `quota_regional`)."""
        return {"spot": self.spot_region, "flex-start": None}.get(provisioning, self.on_demand_region)


class MemoryAccounting(_Strict):
    default_gpu_memory_utilization: float
    overhead_gib_per_chip: float
    head_dim_multiple: int
    min_block_tokens: int
    max_block_tokens: int
    sources: dict[str, str]
    checked: dt.date


class Startup(_Strict):
    compile_s: int
    readiness_deadline_s: int
    sources: dict[str, str]
    checked: dt.date


class Support(_Strict):
    status: SupportStatus
    detail: str = ""
    source: str

    @property
    def label(self) -> str:
        return SUPPORT_LABEL[self.status]


class SupportTable(_Strict):
    models: dict[str, Support]  # catalog model family -> support
    quantizations: dict[str, Support]
    checked: dt.date


class FlexStart(_Strict):
    zones: list[str]  # zones a source shows flex-start working in ([] = unknown)
    note: str
    source: str
    checked: dt.date


class TpuCatalog(_Strict):
    checked: dt.date
    sources: dict[str, str]
    chip: Chip
    accelerator_types: dict[str, AcceleratorType]
    accelerator_types_source: str
    zones: dict[str, Zone]
    zones_source: str
    flex_start: FlexStart
    prices: Prices
    quota: Quota
    memory_accounting: MemoryAccounting
    startup: Startup
    support: SupportTable

    def accelerator(self, name: str) -> tuple[str, AcceleratorType]:
        key = name.strip().lower()
        if key.isdigit():  # "--tpu 4" means v6e-4
            key = f"{self.chip.name}-{key}"
        if key not in self.accelerator_types:
            known = ", ".join(self.accelerator_types)
            raise InvalidInput(f"Unknown TPU accelerator type `{name}`.", f"Known: {known} (single-host v6e slices).")
        return key, self.accelerator_types[key]

    def region_of(self, zone: str) -> str:
        return self.zones[zone].region if zone in self.zones else zone.rsplit("-", 1)[0]

    def chip_hour_usd(self, provisioning: Provisioning, region: str | None) -> tuple[float | None, str]:
        """($ per chip-hour or None, where it comes from / why there is none)."""
        if provisioning == "spot":
            rate = self.prices.spot
        elif provisioning == "flex-start":
            rate = self.prices.flex_start
        elif provisioning == "reserved":
            rate = self.prices.reserved_1y
        else:
            rate = self.prices.on_demand.get(region or "", Rate(value=None, source=f"no on-demand rate for {region}"))
        return rate.value, rate.source

    def slice_hour_usd(
        self, accelerator_type: str, provisioning: Provisioning, region: str | None
    ) -> tuple[float | None, str]:
        """($ per hour of one slice or None, where the rate comes from / why there is none): the one price of a
        slice that fit, the TPU plan, the zone search, destroy and /gemma cost all show."""
        _, acc = self.accelerator(accelerator_type)
        rate, source = self.chip_hour_usd(provisioning, region)
        return (rate * acc.chips if rate is not None else None), source

    def cite(self, keys: str) -> str:
        """'ci_26b, issue_26b_v5e' -> where each says it (the source text up to its first colon)."""
        out = []
        for key in (k.strip() for k in keys.split(",")):
            text = self.sources.get(key)
            out.append(text.split(": ", 1)[0] if text else key)
        return "; ".join(out)

    def support_of(self, family: str, quantization: str) -> list[tuple[str, Support]]:
        """(what, support) for the model family and its quantization; a family not listed is untested."""
        model = self.support.models.get(
            family, Support(status="untested_upstream", detail="not in the support table", source="tpu.yaml")
        )
        quant = self.support.quantizations.get(
            quantization, Support(status="untested_upstream", detail=f"{quantization} not listed", source="tpu.yaml")
        )
        return [(family, model), (quantization, quant)]


def parse_tpu_catalog(data: dict[str, Any]) -> TpuCatalog:
    try:
        cat = TpuCatalog.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"invalid TPU catalog: {exc}") from exc
    for name, acc in cat.accelerator_types.items():
        if not name.startswith(f"{cat.chip.name}-") or name != f"{cat.chip.name}-{acc.chips}":
            raise ValueError(f"accelerator type {name}: the API names it {cat.chip.name}-<chips>")
    return cat


@lru_cache(maxsize=1)
def load_tpu_catalog() -> TpuCatalog:
    text = resources.files("skills").joinpath("data/tpu.yaml").read_text(encoding="utf-8")
    return parse_tpu_catalog(yaml.safe_load(text))

"""Azure Container Apps GPU workload profiles as typed data (skills/data/aca.yaml). Every figure in the file names
its source: a key of `sources:` or `estimate: ...`; the loader refuses unknown keys and uncited figures.

What the ACA target, the planner and /gemma cost read:

- `load_aca_catalog()` (cached) -> `AcaCatalog`
- `.profiles`: dict by workload profile type; `.profile(type_name)` -> `WorkloadProfile` with `type`
  ("Consumption-GPU-NC24-A100"), `serverless`, `gpu` (a catalog.yaml GPU key: `a100-80gb`, `t4`), `gpu_count`,
  `vcpu`, `memory_gib`, `gpu_memory_gb`, `regions` (ARM location names), `quota_usage` (the usages name its GPUs
  count against, or None), `quota_per_gpu`, `note`, `sources`; `.offered_in(region)`
- `.default_profile_for(gpu, gpu_count=1)`: the serverless profile for one GPU, a dedicated one for 2 or 4 A100s
- `.sandbox_region()`: the first region that offers every serverless GPU profile
- `.prices`: the rates (all None when unsourced) and the field estimate; price a replica with
  `skills.capacity.aca_prices.aca_price`
- `.quota` (api, unit, how to request, whether it starts at 0), `.probe_limits` (per ARM field: min, max,
  default; `.max_startup_window_s()`), `.probe_types`, `.revision_modes`, `.traffic_weights_total`,
  `.max_replicas`, `.default_max_replicas`, `.ingress.max_request_timeout_s`, `.app_name` (regex, min and max
  length; `.check(name)`), `.environment.note`, `.driver` (CUDA driver and version, None when undocumented, with a
  note), `.cold_start.notes`, `.gpu_notes[gpu]` (what a fit on that GPU must say, sourced)
- `.cite("a, b")`: where each source says it (its text up to the first colon)
"""

from __future__ import annotations

import datetime as dt
import re
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from skills.errors import InvalidInput

# The figures of a profile that must each name a source.
PROFILE_FIGURES = ("vcpu", "memory_gib", "gpu_count", "gpu_memory_gb", "regions", "quota_usage")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WorkloadProfile(_Strict):
    type: str = ""  # filled from the key
    serverless: bool
    gpu: str  # catalog.yaml GPU key
    gpu_count: int = Field(ge=1)
    vcpu: float = Field(gt=0)
    memory_gib: float = Field(gt=0)
    gpu_memory_gb: float = Field(gt=0)
    regions: list[str]
    quota_usage: str | None
    quota_per_gpu: int = Field(ge=1)
    sources: dict[str, str]
    note: str = ""

    @model_validator(mode="after")
    def _cited(self) -> WorkloadProfile:
        missing = [f for f in PROFILE_FIGURES if not self.sources.get(f)]
        if missing:
            raise ValueError(f"figures without a source: {', '.join(missing)}")
        return self

    def offered_in(self, region: str) -> bool:
        return region in self.regions

    @property
    def label(self) -> str:
        kind = "serverless" if self.serverless else "dedicated"
        return f"{self.type} ({kind}: {self.gpu_count} x {self.gpu}, {self.vcpu:g} vCPU, {self.memory_gib:g} GiB)"


class Rate(_Strict):
    value: float | None = Field(default=None, gt=0)  # None: no readable source, said as "price unknown"
    source: str = Field(min_length=3)


class ProfilePrice(_Strict):
    gpu_usd_per_s: Rate  # per GPU-second (the pricing page's GPU meter)
    all_in_usd_per_hour: Rate  # one replica, everything: an estimate where the per-second rates are unknown


class Prices(_Strict):
    currency: str
    checked: dt.date
    billing: str
    vcpu_usd_per_s: Rate
    memory_usd_per_gib_s: Rate
    profiles: dict[str, ProfilePrice]


class Quota(_Strict):
    api: str
    unit: str
    starts_at_zero: bool
    how_to_request: str
    note: str
    source: str


class Limit(_Strict):
    min: int
    max: int
    default: int | None


class Ingress(_Strict):
    max_request_timeout_s: int = Field(gt=0)
    target_port: str
    source: str


class AppNameRule(_Strict):
    regex: str
    min_length: int = Field(ge=1)
    max_length: int = Field(ge=1)
    source: str

    def check(self, name: str) -> str | None:
        """Why `name` is not a valid container app name, or None when it is."""
        if not self.min_length <= len(name) <= self.max_length:
            return f"`{name}` has {len(name)} characters; a container app name has {self.min_length}-{self.max_length}"
        if not re.fullmatch(self.regex, name):
            return (
                f"`{name}`: a container app name is lowercase letters, numbers and hyphens, starting with a letter "
                "and ending with a letter or number"
            )
        return None


class Note(_Strict):
    note: str
    source: str


class Driver(_Strict):
    cuda_driver: str | None
    cuda_version: str | None
    note: str
    source: str


class ColdStart(_Strict):
    notes: list[str]
    source: str


class Traffic(_Strict):
    """How ACA routes traffic between revisions (Multiple mode): label hosts, the latest-revision weight, what
    stays running, how a revision is named."""

    label_host: str  # format with app, label, domain
    latest_revision: str
    multiple_mode: str
    revision_name: str  # format with app, suffix
    source: str

    def label_fqdn(self, app: str, label: str, app_fqdn: str) -> str:
        """The host a label gives its revision, from the app's own FQDN (`<app>.<domain>`)."""
        return self.label_host.format(app=app, label=label, domain=app_fqdn.removeprefix(f"{app}."))


class GpuNote(_Strict):
    text: str
    source: str


class AcaCatalog(_Strict):
    checked: dt.date
    sources: dict[str, str]
    default_profile: dict[str, str]  # catalog GPU -> profile type
    profiles: dict[str, WorkloadProfile]
    prices: Prices
    quota: Quota
    probe_limits: dict[str, Limit]
    probe_types: list[str]
    probe_notes: str
    probe_source: str
    revision_modes: list[str]
    revision_notes: str
    traffic_weights_total: int
    revision_source: str
    traffic: Traffic
    max_replicas: int = Field(ge=1)
    default_max_replicas: int = Field(ge=1)
    replicas_source: str
    ingress: Ingress
    app_name: AppNameRule
    environment: Note
    driver: Driver
    cold_start: ColdStart
    gpu_notes: dict[str, list[GpuNote]]

    def profile(self, type_name: str) -> WorkloadProfile:
        if type_name in self.profiles:
            return self.profiles[type_name]
        folded = {k.lower(): k for k in self.profiles}
        if type_name.lower() in folded:
            return self.profiles[folded[type_name.lower()]]
        raise InvalidInput(
            f"Unknown Azure Container Apps GPU workload profile `{type_name}`.",
            f"Known: {', '.join(self.profiles)} (skills/data/aca.yaml).",
        )

    def default_profile_for(self, gpu: str, gpu_count: int = 1) -> WorkloadProfile | None:
        """The profile a fit on `gpu_count` x `gpu` runs on: the GPU's serverless profile for one GPU, else the
        dedicated profile with exactly that many GPUs; None when Container Apps has none."""
        default = self.default_profile.get(gpu)
        if gpu_count == 1 and default:
            return self.profiles[default]
        same = [p for p in self.profiles.values() if p.gpu == gpu and p.gpu_count == gpu_count]
        return min(same, key=lambda p: (not p.serverless, p.vcpu)) if same else None

    def sandbox_region(self) -> str:
        serverless = [p for p in self.profiles.values() if p.serverless]
        for region in serverless[0].regions:
            if all(region in p.regions for p in serverless):
                return region
        raise ValueError("aca.yaml: no region offers every serverless GPU profile")

    def regions_offering(self, type_name: str) -> list[str]:
        return list(self.profile(type_name).regions)

    def max_startup_window_s(self) -> int:
        """The longest a startup probe can wait before the replica is restarted: initial delay plus every allowed
        failure at the longest period (ARM's limits)."""
        lim = self.probe_limits
        return lim["initialDelaySeconds"].max + lim["failureThreshold"].max * lim["periodSeconds"].max

    def cite(self, keys: str) -> str:
        """'gpu_serverless, billing' -> where each says it (the source text up to its first colon)."""
        out = []
        for key in _source_keys(keys) or [keys]:
            text = self.sources.get(key)
            out.append(text.split(": ", 1)[0] if text else key)
        return "; ".join(out)


def _source_keys(text: str) -> list[str]:
    """The source keys a citation names: comma-separated words before any parenthesis or colon."""
    head = re.split(r"[(:]", text, maxsplit=1)[0]
    return [k.strip() for k in head.split(",") if k.strip()]


def _check_citations(cat: AcaCatalog) -> None:
    """Every citation names a known source or says it is an estimate (or that there is none)."""

    def check(where: str, text: str) -> None:
        if text.startswith(("estimate:", "no source", "secondary:")):
            return
        unknown = [k for k in _source_keys(text) if k not in cat.sources]
        if unknown:
            raise ValueError(f"aca.yaml {where}: cites unknown source(s) {', '.join(unknown)}")

    for name, p in cat.profiles.items():
        for field, text in p.sources.items():
            check(f"profiles.{name}.sources.{field}", text)
    for name, pp in cat.prices.profiles.items():
        check(f"prices.profiles.{name}.gpu_usd_per_s", pp.gpu_usd_per_s.source)
        check(f"prices.profiles.{name}.all_in_usd_per_hour", pp.all_in_usd_per_hour.source.removeprefix("estimate: "))
    for what, text in {
        "prices.vcpu_usd_per_s": cat.prices.vcpu_usd_per_s.source,
        "prices.memory_usd_per_gib_s": cat.prices.memory_usd_per_gib_s.source,
        "prices.billing": cat.prices.billing,
        "quota": cat.quota.source,
        "probe_source": cat.probe_source,
        "revision_source": cat.revision_source,
        "traffic": cat.traffic.source,
        "replicas_source": cat.replicas_source,
        "ingress": cat.ingress.source,
        "app_name": cat.app_name.source,
        "environment": cat.environment.source,
        "driver": cat.driver.source,
        "cold_start": cat.cold_start.source,
    }.items():
        check(what, text)
    for gpu, notes in cat.gpu_notes.items():
        for n in notes:
            check(f"gpu_notes.{gpu}", n.source)


def parse_aca_catalog(data: dict[str, Any]) -> AcaCatalog:
    """Validate an aca.yaml document; raises ValueError naming the offending entry."""
    try:
        profiles = {k: {**v, "type": k} for k, v in (data.get("profiles") or {}).items()}
        cat = AcaCatalog.model_validate({**data, "profiles": profiles})
    except ValidationError as exc:
        raise ValueError(f"invalid ACA catalog: {exc}") from exc
    for gpu, type_name in cat.default_profile.items():
        p = cat.profiles.get(type_name)
        if p is None or p.gpu != gpu or not p.serverless:
            raise ValueError(f"aca.yaml default_profile.{gpu}: {type_name} is not a serverless {gpu} profile")
    if set(cat.prices.profiles) != set(cat.profiles):
        raise ValueError("aca.yaml: prices.profiles must price exactly the profiles")
    for field in ("initialDelaySeconds", "periodSeconds", "failureThreshold", "timeoutSeconds"):
        if field not in cat.probe_limits:
            raise ValueError(f"aca.yaml probe_limits: {field} missing")
    _check_citations(cat)
    return cat


@lru_cache(maxsize=1)
def load_aca_catalog() -> AcaCatalog:
    text = resources.files("skills").joinpath("data/aca.yaml").read_text(encoding="utf-8")
    return parse_aca_catalog(yaml.safe_load(text))

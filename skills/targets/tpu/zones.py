"""Zone search: where a v6e slice can be created now. A zone qualifies when the Cloud TPU API lists the accelerator
type there and the project's TPU quota for the provisioning model covers the slice's chips (Cloud Quotas API,
per zone; spot draws on preemptible quota, on-demand and reservations on on-demand quota). Capacity cannot be
asked in advance: a queued resource finds out, and the target moves on to the next zone when one has none."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from skills.capacity.prices import format_usd
from skills.capacity.tpu_catalog import Provisioning, TpuCatalog
from skills.errors import NotFound, UserFacingError
from skills.ports import PreflightUnavailable, QuotaReader
from skills.targets.tpu.api import TpuApi

HOLDING = ("FAILED", "SUSPENDED")  # states whose queued resource still holds its quota (marin-community/marin#87)


class ZoneOption(BaseModel):
    zone: str
    region: str
    offered: bool | None  # the API lists the type there (None: could not ask)
    quota: int | None  # chips (None: no value / could not ask; -1 unlimited)
    quota_id: str
    region_quota: int | None = None  # chips in the region (None: not read; -1 unlimited)
    region_quota_id: str = ""
    chips: int
    held: list[str] = []  # "`name` (N chips, STATE)": FAILED/SUSPENDED queued resources of this tier's quota
    held_chips: int = 0
    chip_hour_usd: float | None
    hour_usd: float | None  # the slice (TpuCatalog.slice_hour_usd)
    note: str = ""

    def _short(self, value: int | None) -> bool:
        return value is not None and value != -1 and value - self.held_chips < self.chips

    @property
    def usable(self) -> bool:
        """Offered, and both the zone's and the region's quota cover the slice (a create must fit both)."""
        return self.offered is not False and not self._short(self.quota) and not self._short(self.region_quota)

    def why_not(self) -> str:
        """Why the zone cannot take the slice ('' when it can, as far as was asked)."""
        if self.offered is False:
            return "does not offer it"
        if self._short(self.quota):
            return f"quota {self.quota} chips" + (f", {self.held_chips} held" if self.held_chips else "")
        if self._short(self.region_quota):
            return f"region {self.region} quota {self.region_quota} chips ({self.region_quota_id})"
        return ""

    def line(self) -> str:
        price = format_usd(self.hour_usd, "h")
        offered = {True: "offers it", False: "does not offer it", None: "not asked"}[self.offered]
        quota = "quota unknown" if self.quota is None else ("unlimited" if self.quota == -1 else f"quota {self.quota}")
        mark = ":white_check_mark:" if self.usable else ":x:"
        regional = ""
        if self.region_quota is not None:
            value = "unlimited" if self.region_quota == -1 else str(self.region_quota)
            regional = f", region {self.region} quota {value} chips ({self.region_quota_id})"
        held = (
            f"; {self.held_chips} of them held by {', '.join(self.held)}: a FAILED or SUSPENDED queued resource holds "
            "its quota until deleted (`/gemma destroy NAME`)"
            if self.held
            else ""
        )
        return f"{mark} {self.zone}: {offered}, {quota} chips ({self.quota_id}){regional}{held}, {price}" + (
            f" — {self.note}" if self.note else ""
        )


async def search_zones(
    api: TpuApi,
    quotas: QuotaReader | None,
    tpu: TpuCatalog,
    accelerator_type: str,
    provisioning: Provisioning,
    zones: list[str] | None = None,
) -> list[ZoneOption]:
    """Every candidate zone with what it offers, usable ones first (cheapest region first, then catalog order)."""
    acc_name, acc = tpu.accelerator(accelerator_type)
    quota_id = tpu.quota.quota_id(provisioning) or ""
    region_quota_id = tpu.quota.region_quota_id(provisioning) or ""
    regional: dict[str, int | str | None] = {}  # region -> chips, or why it was not read (one read per region)

    async def region_quota(reader: QuotaReader, region: str) -> int | str | None:
        if region not in regional:
            try:
                regional[region] = await reader.quota_value(tpu.quota.service, region_quota_id, region)
            except PreflightUnavailable as exc:
                regional[region] = str(exc)[:120]
        return regional[region]

    async def one(zone: str) -> ZoneOption:
        region = tpu.region_of(zone)
        rate, _ = tpu.chip_hour_usd(provisioning, region)
        hourly, _ = tpu.slice_hour_usd(acc_name, provisioning, region)
        opt = ZoneOption(
            zone=zone,
            region=region,
            offered=None,
            quota=None,
            quota_id=quota_id,
            region_quota_id=region_quota_id,
            chips=acc.chips,
            chip_hour_usd=rate,
            hour_usd=hourly,
        )
        notes = [tpu.zones[zone].note] if zone in tpu.zones and tpu.zones[zone].note else []
        try:
            opt.offered = acc_name in await api.accelerator_types(zone)
        except NotFound:
            opt.offered = False
        except UserFacingError as exc:
            notes.append(f"types: {exc.message[:120]}")
        if quotas is not None and quota_id:
            try:
                opt.quota = await quotas.quota_value(tpu.quota.service, quota_id, zone)
            except PreflightUnavailable as exc:
                notes.append(f"quota: {str(exc)[:120]}")
        try:  # FAILED and SUSPENDED queued resources keep their quota until deleted (tpu.yaml `held_quota`)
            same = ("spot",) if provisioning == "spot" else ("on-demand", "reserved")
            for q in await api.queued(zone):
                if q.state in HOLDING and q.tier in same and q.accelerator_type:
                    n = int(q.accelerator_type.rsplit("-", 1)[1])
                    opt.held.append(f"{q.state} `{q.name}` ({n} chips)")
                    opt.held_chips += n
        except UserFacingError as exc:
            notes.append(f"queued resources: {exc.message[:120]}")
        if quotas is not None and region_quota_id:
            got = await region_quota(quotas, region)
            if isinstance(got, str):
                notes.append(f"regional quota not read: {got}")
            else:
                opt.region_quota = got
        opt.note = "; ".join(notes)
        return opt

    options = await asyncio.gather(*(one(z) for z in zones or list(tpu.zones)))
    order = {z: i for i, z in enumerate(zones or list(tpu.zones))}
    return sorted(
        options,
        key=lambda o: (not o.usable, o.chip_hour_usd if o.chip_hour_usd is not None else 1e9, order[o.zone]),
    )


def no_zone_text(
    options: list[ZoneOption],
    accelerator_type: str,
    provisioning: str,
    alternatives: dict[str, list[ZoneOption]],
    quota_service: str,
) -> str:
    """Why no zone can take the slice, naming every zone searched, and the other provisioning models: offered only
    where their own zone search found a zone (spot draws on preemptible quota, on-demand on on-demand quota)."""
    chips = options[0].chips if options else 0
    quota_id = options[0].quota_id if options else ""
    text = (
        f"No zone offers this slice with quota for it: none of the {len(options)} zones searched can take "
        f"{chips} {provisioning} chips of {accelerator_type}"
        + (f" ({quota_id})" if quota_id else "")
        + ": "
        + "; ".join(f"{o.zone}: {o.why_not() or 'not usable'}" for o in options)
        + "."
    )
    held = False
    for tier, found in alternatives.items():
        usable = [o.zone for o in found if o.usable]
        if usable:
            held = True
            text += (
                f" `--provisioning {tier}` has quota in {len(usable)} of them ({', '.join(usable)}): its plan is "
                "one click below."
            )
        else:
            qid = found[0].quota_id if found else ""
            text += f" And {tier} has no quota in any of them either" + (f" ({qid})." if qid else ".")
    return text + (
        f" {'Otherwise' if held else 'Nothing the bot can do'}: request TPU quota (Console > IAM & Admin > Quotas, "
        f"service {quota_service})."
    )

"""Cloud Run GPU quota in a region, read through the Cloud Quotas API (QuotaReader port): for preflight and for
`/gemma quota`.

Quota ids of service run.googleapis.com. The bot renders services without zonal redundancy
(render_service: gpuZonalRedundancyDisabled), which draw on the "...NoZonalRedundancy..." quota. Ids as
`gcloud beta quotas info describe ID --service=run.googleapis.com` takes them, seen in several public deploy
scripts and notes (public-code index, checked 2026-11-27: NvidiaL4GpuAllocNoZonalRedundancyPerProjectRegion and
NvidiaRtxPro6000GpuAllocNoZonalRedundancyPerProjectRegion); their display names ("Total Nvidia L4 GPU allocation
without zonal redundancy, per project per region") from the Cloud Run GPU pages' quota links.

Units (QUOTA_UNIT: what one GPU counts as in the quota's value). The L4 quota counts GPUs, the RTX Pro 6000 quota
milli-GPUs: field reports, public-code index, checked 2026-12-05 --
- a Cloud Run deploy script choosing the quota by GPU type: L4 `REQUIRED_QUOTA=1`, RTX Pro 6000
  `REQUIRED_QUOTA=1000` with "# RTX PRO 6000 quota is expressed in milliGPUs" (its check reads
  `gcloud beta quotas info describe ... | .details.value` for the region; public-code index file id 66510000598);
- a write-up of Google's RTX Pro 6000 Gemma 4 codelab on Cloud Run (europe-west4): `quotas info describe
  NvidiaRtxPro6000GpuAllocNoZonalRedundancyPerProjectRegion` gave `value: 1000` while the deploy with max
  instances 3 was refused with "Max instances must be set to 1 or fewer ... requested: 3 allowed: 1" (file ids
  69641025864, 69654167417);
- an L4 deploy refused with "Max instances must be set to 3 or fewer ... NvidiaL4GpuAllocNoZonalRedundancy
  PerProjectRegion requested: 4 allowed: 3" next to an L4 quota of 3 (the L4 value counts whole GPUs; file id
  68408999705).
Cloud Run's refusal speaks in GPUs (instances: one GPU each) for both. `gpus()` is the one conversion: every
reader of these quotas (preflight, the canary's check, `/gemma quota`, increase requests) goes through it.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from skills.ports import PreflightUnavailable, QuotaReader, QuotaRequest

QUOTA_SERVICE = "run.googleapis.com"
GPU_QUOTA_IDS = {
    "nvidia-l4": "NvidiaL4GpuAllocNoZonalRedundancyPerProjectRegion",
    "nvidia-rtx-pro-6000": "NvidiaRtxPro6000GpuAllocNoZonalRedundancyPerProjectRegion",
}
# What one GPU counts as in the quota's value (sources in the module docstring).
QUOTA_UNIT = {"nvidia-l4": 1, "nvidia-rtx-pro-6000": 1000}
_UNIT_NAME = {1: "GPUs", 1000: "milli-GPUs"}
_DISPLAY = {
    "nvidia-l4": "Total Nvidia L4 GPU allocation without zonal redundancy, per project per region",
    "nvidia-rtx-pro-6000": "Total Nvidia RTX Pro 6000 GPU allocation without zonal redundancy, per project per region",
}


def gpus(gpu: str, raw: int | None) -> int | None:
    """The quota value `raw` as read from the Cloud Quotas API, in whole GPUs (the instances it can hold; a part
    of a GPU holds none). None stays None; -1 (unlimited) stays -1."""
    if raw is None or raw < 0:
        return raw
    return raw // QUOTA_UNIT.get(gpu, 1)


def unit_note(gpu: str, raw: int) -> str:
    """How the raw value reads, when its unit is not whole GPUs ('' for those)."""
    unit = QUOTA_UNIT.get(gpu, 1)
    return f" (the API's value {raw} counts {_UNIT_NAME[unit]})" if unit != 1 and raw >= 0 else ""


def raw_value(gpu: str, n_gpus: int) -> int:
    """`n_gpus` in the quota's own unit (what an increase request asks for)."""
    return n_gpus * QUOTA_UNIT.get(gpu, 1)


class GpuQuota(BaseModel):
    gpu: str
    region: str
    quota_id: str
    display: str
    value: int | None  # whole GPUs (gpus()); None: no value for the region; -1: unlimited
    raw: int | None = None  # the API's value, in the quota's unit (QUOTA_UNIT)

    def request_fix(self, project: str | None, need_gpus: int | None = None) -> str:
        where = f"?project={project}" if project else ""
        ask = ""
        if need_gpus is not None:
            raw = raw_value(self.gpu, need_gpus)
            ask = f" for at least {need_gpus} GPU(s)"
            if raw != need_gpus:
                ask += f" (value {raw}: it counts {_UNIT_NAME[QUOTA_UNIT[self.gpu]]})"
        return (
            f"request quota *{self.display}* (`{self.quota_id}`, service {QUOTA_SERVICE}) in {self.region}{ask}: "
            f"https://console.cloud.google.com/iam-admin/quotas{where} (filter `{self.quota_id}`), or deploy to a "
            "region that has it."
        )


def quota_id(gpu: str) -> str | None:
    return GPU_QUOTA_IDS.get(gpu)


async def read_gpu_quota(reader: QuotaReader, gpu: str, region: str) -> GpuQuota | None:
    """The quota for `gpu` in `region` (None when no quota id is known for that GPU). Raises
    PreflightUnavailable (from the reader) when the API cannot be asked."""
    qid = quota_id(gpu)
    if qid is None:
        return None
    raw = await reader.quota_value(QUOTA_SERVICE, qid, region)
    return GpuQuota(gpu=gpu, region=region, quota_id=qid, display=_DISPLAY[gpu], value=gpus(gpu, raw), raw=raw)


class RegionQuota(BaseModel):
    region: str
    quota: GpuQuota | None = None
    why: str = ""  # when it could not be read
    requests: list[QuotaRequest] = []  # increase requests for this region


def request_text(r: QuotaRequest) -> str:
    granted = f", granted {r.granted}" if r.granted is not None else ""
    state = "pending Google's review" if r.pending else "decided"
    return f"request for {r.preferred}{granted} ({state})"


async def quota_requests(reader: QuotaReader, gpu: str, timeout_s: float) -> tuple[list[QuotaRequest], str]:
    """The increase requests for the GPU's quota, and why they could not be read ('' when they could)."""
    qid = quota_id(gpu)
    if qid is None:
        return [], ""
    try:
        found = await asyncio.wait_for(reader.quota_requests(QUOTA_SERVICE, qid), timeout=timeout_s)
    except TimeoutError:
        return [], f"no answer within {timeout_s:g} s"
    except PreflightUnavailable as exc:
        return [], str(exc)
    # in GPUs, as the quota's value is shown
    return [
        r.model_copy(update={"preferred": gpus(gpu, r.preferred), "granted": gpus(gpu, r.granted)}) for r in found
    ], ""


async def quota_by_region(reader: QuotaReader, gpu: str, regions: list[str], timeout_s: float) -> list[RegionQuota]:
    """The GPU's quota in each region, read at once, each within `timeout_s` (a failure says why)."""

    async def one(region: str) -> RegionQuota:
        try:
            q = await asyncio.wait_for(read_gpu_quota(reader, gpu, region), timeout=timeout_s)
        except TimeoutError:
            return RegionQuota(region=region, why=f"no answer within {timeout_s:g} s")
        except PreflightUnavailable as exc:
            return RegionQuota(region=region, why=str(exc))
        return RegionQuota(region=region, quota=q)

    rows, (requests, _) = await asyncio.gather(
        asyncio.gather(*(one(r) for r in regions)), quota_requests(reader, gpu, timeout_s)
    )
    for row in rows:
        row.requests = [q for q in requests if q.region == row.region]
    return list(rows)

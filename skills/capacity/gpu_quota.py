"""Cloud Run GPU quota in a region, read through the Cloud Quotas API (QuotaReader port): for preflight and for
`/gemma quota`.

Quota ids of service run.googleapis.com. The bot renders services without zonal redundancy
(render_service: gpuZonalRedundancyDisabled), which draw on the "...NoZonalRedundancy..." quota. Ids as
`gcloud beta quotas info describe ID --service=run.googleapis.com` takes them, seen in several public deploy
scripts and notes (public-code index, checked 2026-11-27: NvidiaL4GpuAllocNoZonalRedundancyPerProjectRegion and
NvidiaRtxPro6000GpuAllocNoZonalRedundancyPerProjectRegion); their display names ("Total Nvidia L4 GPU allocation
without zonal redundancy, per project per region") from the Cloud Run GPU pages' quota links.
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
_DISPLAY = {
    "nvidia-l4": "Total Nvidia L4 GPU allocation without zonal redundancy, per project per region",
    "nvidia-rtx-pro-6000": "Total Nvidia RTX Pro 6000 GPU allocation without zonal redundancy, per project per region",
}


class GpuQuota(BaseModel):
    gpu: str
    region: str
    quota_id: str
    display: str
    value: int | None  # None: no value for the region; -1: unlimited

    def request_fix(self, project: str | None) -> str:
        where = f"?project={project}" if project else ""
        return (
            f"request quota *{self.display}* (`{self.quota_id}`, service {QUOTA_SERVICE}) in {self.region}: "
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
    value = await reader.quota_value(QUOTA_SERVICE, qid, region)
    return GpuQuota(gpu=gpu, region=region, quota_id=qid, display=_DISPLAY[gpu], value=value)


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
        return await asyncio.wait_for(reader.quota_requests(QUOTA_SERVICE, qid), timeout=timeout_s), ""
    except TimeoutError:
        return [], f"no answer within {timeout_s:g} s"
    except PreflightUnavailable as exc:
        return [], str(exc)


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

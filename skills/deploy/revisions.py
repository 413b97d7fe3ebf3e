"""Read-side operations around writes: recent revisions, and how to check GPU quota."""

from __future__ import annotations

from pydantic import BaseModel

from skills.ports import RevisionInfo, Runtime, ServiceInfo
from skills.targets.env import DeployEnv


class RevisionsView(BaseModel):
    service: ServiceInfo
    revisions: list[RevisionInfo]


async def revisions(runtime: Runtime, service: str, limit: int = 10) -> RevisionsView:
    info = await runtime.get_service(service)
    return RevisionsView(service=info, revisions=await runtime.list_revisions(service, limit=limit))


class QuotaAdvice(BaseModel):
    region: str
    gpu: str
    text: str
    commands: list[str]


_QUOTA_NAMES = {
    "nvidia-l4": "Total Nvidia L4 GPU allocation without zonal redundancy, per project per region",
    "nvidia-rtx-pro-6000": (
        "Total Nvidia RTX Pro 6000 GPU allocation without zonal redundancy, per project per region"
    ),
}


def quota_advice(env: DeployEnv, gpu: str = "nvidia-l4") -> QuotaAdvice:
    """Cloud Run GPU quota is a Cloud Run quota (not Compute Engine's); the bot has no quota API port, so it
    says exactly where to look and which command lists it."""
    project = env.project or "PROJECT_ID"
    name = _QUOTA_NAMES.get(gpu, f"the Cloud Run {gpu} GPU allocation quota")
    text = (
        f"GPU quota for Cloud Run in `{env.region}` is not readable through the bot's APIs. Check "
        f"*{name}* for service `run.googleapis.com` in the console "
        "(IAM & Admin > Quotas & System Limits, filter "
        f"`GPU` and region `{env.region}`), or run the command below. Deploys without zonal redundancy "
        "(what the bot renders) need the 'without zonal redundancy' quota; a deploy refused with 429 / "
        "RESOURCE_EXHAUSTED means it is 0 or used up: request an increase there."
    )
    commands = [
        f"gcloud beta quotas info list --service=run.googleapis.com --project={project} "
        "--format='table(quotaId,dimensionsInfos[0].details.value)' | grep -i gpu",
        f"gcloud run services list --region={env.region} --project={project}",
    ]
    return QuotaAdvice(region=env.region, gpu=gpu, text=text, commands=commands)

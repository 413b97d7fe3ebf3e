"""What only Azure can say before an ACA deploy's Confirm: the environment has the GPU workload profile, the
region offers it, the subscription's GPU quota there holds the replicas. Each is a preflight line (✓, ✗ with the
fix, or "could not check"), beside the shared image and checkpoint checks (skills/deploy/preflight.py)."""

from __future__ import annotations

import asyncio

from skills.capacity.aca_catalog import AcaCatalog, WorkloadProfile
from skills.errors import UserFacingError
from skills.targets.aca.api import ContainerAppsApi, EnvironmentInfo
from skills.targets.preflight_check import PreflightCheck


def _profile(env: EnvironmentInfo, wp: WorkloadProfile) -> PreflightCheck:
    have = [w for w in env.workload_profiles if w.workload_profile_type == wp.type]
    if have:
        return PreflightCheck(
            name="profile",
            status="ok",
            text=f"environment `{env.name}` has workload profile `{have[0].name}` ({wp.type}).",
        )
    types = ", ".join(sorted({w.workload_profile_type for w in env.workload_profiles})) or "none"
    return PreflightCheck(
        name="profile",
        status="fail",
        text=f"environment `{env.name}` has no {wp.type} workload profile (it has: {types}).",
        fix=f"add it: `az containerapp env workload-profile add --name {env.name} --resource-group RG "
        f"--workload-profile-name {wp.type} --workload-profile-type {wp.type}`.",
    )


async def _region(api: ContainerAppsApi, aca: AcaCatalog, env: EnvironmentInfo, wp: WorkloadProfile) -> PreflightCheck:
    offered = await api.available_profiles(env.location)
    if wp.type in offered:
        return PreflightCheck(name="region", status="ok", text=f"{env.location} offers {wp.type}.")
    elsewhere = ", ".join(wp.regions) or "none recorded"
    return PreflightCheck(
        name="region",
        status="fail",
        text=f"{env.location} does not offer {wp.type} (Azure lists {len(offered)} other profile type(s) there).",
        fix=f"use an environment in a region that does ({elsewhere}; {aca.cite(wp.sources['regions'])}).",
    )


async def _quota(
    api: ContainerAppsApi, aca: AcaCatalog, env: EnvironmentInfo, wp: WorkloadProfile, replicas: int
) -> PreflightCheck:
    if not wp.quota_usage:
        return PreflightCheck(name="quota", status="unknown", text=f"no quota name is recorded for {wp.type}.")
    usages = {u.name: u for u in await api.environment_usages()}
    u = usages.get(wp.quota_usage)
    if u is None:
        return PreflightCheck(
            name="quota", status="unknown", text=f"Azure returned no `{wp.quota_usage}` usage for `{env.name}`."
        )
    need = replicas * wp.gpu_count * wp.quota_per_gpu
    free = u.limit - u.current
    what = f"`{wp.quota_usage}` of `{env.name}`: {u.current:g} used of {u.limit:g} ({u.unit})"
    if free >= need:
        return PreflightCheck(name="quota", status="ok", text=f"{what}; max replicas {replicas} need {need:g}.")
    return PreflightCheck(
        name="quota",
        status="fail",
        text=f"{what}; max replicas {replicas} need {need:g}.",
        fix=f"lower `--max-instances` to {int(free // max(wp.gpu_count * wp.quota_per_gpu, 1))} or request "
        f"{need:g}: {aca.quota.how_to_request}.",
    )


async def aca_preflight(
    api: ContainerAppsApi, aca: AcaCatalog, env: EnvironmentInfo, wp: WorkloadProfile, max_replicas: int
) -> list[PreflightCheck]:
    async def guarded(name: str, call: asyncio.Future[PreflightCheck] | object) -> PreflightCheck:
        try:
            return await call  # type: ignore[misc]
        except UserFacingError as exc:
            return PreflightCheck(name=name, status="unknown", text=exc.message[:200])

    region, quota = await asyncio.gather(
        guarded("region", _region(api, aca, env, wp)), guarded("quota", _quota(api, aca, env, wp, max_replicas))
    )
    return [_profile(env, wp), region, quota]

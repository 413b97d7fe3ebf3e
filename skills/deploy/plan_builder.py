"""Build the plan for each write action: deploy, redeploy, scale, rollback, destroy.

A plan says what will change (a field diff against the running service), what the capacity planner thinks
(verdict, figures, required changes), and the equivalent CLI command. Nothing is written here. The serving
target builds the plan in its own spec (the Cloud Run target: skills/targets/cloud_run/plan_*.py); here a write
the target cannot do is refused first (skills/targets/port.py capabilities), and preflight runs on the result.
"""

from __future__ import annotations

from typing import Any, cast, get_args

from skills.actions.params import ScaleParams
from skills.deploy.env import DeployEnv
from skills.deploy.plan_inputs import ActionKind, validate_params
from skills.deploy.plans import Plan
from skills.deploy.preflight import PreflightSources, run_preflight
from skills.deploy.profiles import load_profiles
from skills.errors import InvalidInput
from skills.targets.port import ServingTarget, require

__all__ = ["ActionKind", "build_plan", "check_capabilities"]

_KINDS: tuple[str, ...] = get_args(ActionKind)


def check_capabilities(kind: str, params: dict[str, Any], target: ServingTarget, service: str) -> None:
    """Refuse, before anything is read, a write that needs what the target lacks (TargetUnsupported)."""
    if kind == "rollback":
        require(target, "revisions", service)
    if kind == "promote" or params.get("canary") is not None:  # traffic shared (or moved) between revisions
        require(target, "traffic_split", service)
    if kind == "scale":
        p: ScaleParams = validate_params(ScaleParams, params, "scale")
        if p.min_instances == 0:
            require(target, "scale_to_zero", service)
    elif kind in ("deploy", "redeploy") and params.get("min_instances") in (0, "0"):
        require(target, "scale_to_zero", service)
    profile = (
        load_profiles().get(params["profile"]) if kind == "deploy" and isinstance(params.get("profile"), str) else None
    )
    if profile is not None:  # an unknown one is the planner's to refuse, as it always did
        wanted = profile.target
        if wanted != target.kind:
            raise InvalidInput(
                f"Profile `{params['profile']}` deploys to `{wanted}`, not to {target.display} (`{service}`).",
                "Pick a profile for that target, or deploy this one to a service on its own target.",
            )


async def build_plan(
    kind: str,
    params: dict[str, Any],
    target: ServingTarget,
    env: DeployEnv,
    *,
    user_id: str = "",
    channel_id: str = "",
    offline: bool = False,
    preflight: PreflightSources | None = None,
) -> Plan:
    """`offline` (deploy only): rendered without reading the running service. `preflight`: run the checks on a
    deploy or redeploy plan."""
    if kind not in _KINDS:
        raise InvalidInput(f"Unknown action `{kind}`.", "Known: " + ", ".join(sorted(_KINDS)) + ".")
    if not isinstance(params, dict):
        raise InvalidInput(f"Parameters for {kind} must be an object.")
    service = params.get("service")
    check_capabilities(kind, params, target, service if isinstance(service, str) and service else env.service)
    offline = offline and kind == "deploy"
    quotas = preflight.quotas if preflight is not None else None  # a canary's quota check reads them too
    plan = await target.plan(cast(ActionKind, kind), params, env, offline=offline, quotas=quotas)
    plan.target = target.kind
    plan.created_by, plan.channel_id = user_id, channel_id
    if preflight is not None and kind in ("deploy", "redeploy") and plan.spec is not None and not offline:
        plan.preflight = await run_preflight(preflight, target.preflight_target(plan.spec, env))
    return plan

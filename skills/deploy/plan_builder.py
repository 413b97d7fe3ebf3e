"""Build the plan for each write action: deploy, redeploy, scale, rollback, destroy.

A plan says what will change (a field diff against the running service), what the capacity planner thinks
(verdict, figures, required changes), and the equivalent gcloud command. Nothing is written here. One module per
kind of plan (plan_deploy, plan_redeploy, plan_operate), their shared steps in plan_common.
"""

from __future__ import annotations

from typing import Any

from skills.deploy.canary import apply_canary, canary_percent, plan_promote, unname_revision
from skills.deploy.env import DeployEnv
from skills.deploy.plan_common import ActionKind
from skills.deploy.plan_deploy import plan_deploy
from skills.deploy.plan_operate import plan_destroy, plan_rollback, plan_scale
from skills.deploy.plan_redeploy import plan_redeploy
from skills.deploy.plans import Plan
from skills.deploy.preflight import PreflightSources, run_preflight, target_of
from skills.errors import InvalidInput
from skills.ports import Runtime

__all__ = ["ActionKind", "build_plan"]

_BUILDERS = {
    "deploy": plan_deploy,
    "redeploy": plan_redeploy,
    "scale": plan_scale,
    "rollback": plan_rollback,
    "destroy": plan_destroy,
    "promote": plan_promote,
}


async def build_plan(
    kind: str,
    params: dict[str, Any],
    runtime: Runtime,
    env: DeployEnv,
    *,
    user_id: str = "",
    channel_id: str = "",
    offline: bool = False,
    preflight: PreflightSources | None = None,
) -> Plan:
    """`offline` (deploy only): see plan_deploy. `preflight`: run the checks on a deploy or redeploy plan."""
    builder = _BUILDERS.get(kind)
    if builder is None:
        raise InvalidInput(f"Unknown action `{kind}`.", "Known: " + ", ".join(sorted(_BUILDERS)) + ".")
    if not isinstance(params, dict):
        raise InvalidInput(f"Parameters for {kind} must be an object.")
    # `canary` is no setting of the service: the plan is built without it, then split (skills/deploy/canary.py).
    canary = params.get("canary") if kind in ("deploy", "redeploy") and not offline else None
    if canary is not None:
        percent = canary_percent(canary)
        params = {k: v for k, v in params.items() if k != "canary"}
    plan = await (
        plan_deploy(runtime, env, params, offline=True)
        if offline and kind == "deploy"
        else builder(runtime, env, params)
    )
    plan.created_by, plan.channel_id = user_id, channel_id
    if canary is not None:
        info = await apply_canary(plan, percent, runtime, env, preflight.quotas if preflight else None)
        plan.canary = info.model_dump()
    elif kind in ("deploy", "redeploy", "scale") and not offline:
        await unname_revision(plan, runtime)
    if preflight is not None and kind in ("deploy", "redeploy") and plan.spec is not None and not offline:
        plan.preflight = await run_preflight(preflight, target_of(plan.spec, env))
    return plan

"""Build the plan for each write action: deploy, redeploy, scale, rollback, destroy.

A plan says what will change (a field diff against the running service), what the capacity planner thinks
(verdict, figures, required changes), and the equivalent CLI command. Nothing is written here. The serving
target builds the plan in its own spec (the Cloud Run target: skills/targets/cloud_run/plan_*.py); here a write
the target cannot do is refused first (skills/targets/port.py capabilities), a deploy under a name another target
already holds is refused after (service names are unique across targets: status, logs and destroy reach a service
by its name alone, skills/targets/registry.py), and preflight runs on the result.
"""

from __future__ import annotations

from typing import Any, cast, get_args

from skills.actions.params import ScaleParams
from skills.deploy.preflight import PreflightSources, run_preflight
from skills.errors import InvalidInput
from skills.serving.profiles import load_profiles
from skills.targets.env import DeployEnv
from skills.targets.plan import Plan
from skills.targets.plan_inputs import ActionKind, validate_params
from skills.targets.port import ServingTarget, require
from skills.targets.registry import Targets, who_holds

__all__ = ["ActionKind", "build_plan", "check_capabilities"]

_KINDS: tuple[str, ...] = get_args(ActionKind)
_ASK_TIMEOUT_S = 10.0  # asking another target for a name, when no preflight limit is wired


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
    targets: Targets | None = None,
) -> Plan:
    """`offline` (deploy only): rendered without reading the running service. `preflight`: run the checks on a
    deploy or redeploy plan. `targets`: every wired target, for a deploy's name (another target may not hold it,
    nor may the settings give it to another target)."""
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
    if kind == "deploy" and (targets is not None or offline):
        await _unique_name(plan, target, targets, offline, preflight.timeout_s if preflight else _ASK_TIMEOUT_S)
    if preflight is not None and kind in ("deploy", "redeploy") and plan.spec is not None and not offline:
        # the target's own checks (what only its cloud can answer) first, then the shared ones
        plan.preflight = [*plan.preflight, *await run_preflight(preflight, target.preflight_target(plan.spec, env))]
    return plan


async def _unique_name(
    plan: Plan, target: ServingTarget, targets: Targets | None, offline: bool, timeout_s: float
) -> None:
    """Refuse a deploy under a name another target holds, or one the settings give another target (the fix:
    another name, or destroy the other); say so when a target could not be asked, or when the plan is rendered
    offline and none was."""
    name = plan.service
    others = targets.others(target) if targets is not None else []
    wired = targets.wired_kind(name) if targets is not None else None
    refusals: list[str] = []
    if wired is not None and targets is not None and wired != target.kind:
        refusals.append(
            f"`{name}` is the {targets.for_kind(wired).display} service this bot's settings name: status, logs and "
            f"destroy of `{name}` reach {targets.for_kind(wired).display}. Pick another `--service` name."
        )
    if offline:
        displays = " or ".join(t.display for t in others) or "another serving target"
        plan.notes.append(f"Not checked (rendered offline): whether {displays} already has a service `{name}`.")
    else:
        for h in await who_holds(others, name, timeout_s):
            if h.holds:
                refusals.insert(
                    0,
                    f"`{name}` is already a {h.target.display} service: a {target.display} deploy under that name "
                    f"would leave status, logs and destroy of `{name}` reaching only one of them. Pick another "
                    f"`--service` name, or `/gemma destroy {name}` (the {h.target.display} one) first.",
                )
            elif h.holds is None:
                plan.notes.append(f"Could not check whether {h.target.display} already has a service `{name}`: {h.why}")
    if refusals:
        plan.refusal = " ".join([*refusals[:1], plan.refusal]).strip()

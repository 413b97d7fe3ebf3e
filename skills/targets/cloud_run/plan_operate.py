"""Plans for scale, rollback and destroy: small changes to a running service."""

from __future__ import annotations

from typing import Any

from skills.actions.params import DestroyParams, RollbackParams, ScaleParams
from skills.errors import InvalidInput, NotFound
from skills.ports import RevisionInfo, Runtime
from skills.targets.canary import refuse_split
from skills.targets.cloud_run.canary import stable_revision
from skills.targets.cloud_run.diff import diff_specs, fingerprint
from skills.targets.cloud_run.gcloud import destroy_command, update_commands
from skills.targets.cloud_run.plan_common import (
    LATEST_TRAFFIC,
    current_spec,
    serving_base,
    validate_params,
)
from skills.targets.cloud_run.render import (
    strip_output_only,
)
from skills.targets.env import DeployEnv
from skills.targets.plan import Plan


async def plan_scale(runtime: Runtime, env: DeployEnv, params: dict[str, Any]) -> Plan:
    p: ScaleParams = validate_params(ScaleParams, params, "scale")
    service = p.service or env.service
    current = await current_spec(runtime, service)
    shares = [(t.revision, t.percent) for t in (await runtime.get_service(service)).traffic if t.percent > 0]
    refuse_split(service, shares, "a scale would send all of it to one new revision and end the canary unjudged")
    base = await serving_base(runtime, service, current)
    new = strip_output_only(base.spec)
    new.setdefault("template", {}).setdefault("scaling", {}).update(
        {"minInstanceCount": p.min_instances, "maxInstanceCount": p.max_instances}
    )
    pinned = any(t.get("type") != LATEST_TRAFFIC[0]["type"] for t in current.get("traffic") or [])
    if base.spec is not current or pinned:
        # The new revision is the serving configuration: it takes the traffic. Instance limits live in the
        # revision, so a scale that left traffic pinned (a rollback, a promote) would not reach what serves.
        new["traffic"] = LATEST_TRAFFIC
    changes = diff_specs(strip_output_only(current), new)
    if not changes:
        raise InvalidInput(
            f"Refused: `{service}` already runs with min {p.min_instances} / max {p.max_instances} instances: "
            "the scale would change nothing.",
            "See `/gemma status` for the instance limits in force.",
        )
    plan = Plan(
        kind="scale",
        service=service,
        summary=f"Scale `{service}` to min {p.min_instances} / max {p.max_instances} instances"
        + (f" (on the serving revision `{base.serving}`'s configuration)" if base.spec is not current else ""),
        params=p.model_dump(exclude_none=True),
        spec=new,
        base_fingerprint=fingerprint(current),
        changes=changes,
        gcloud=update_commands(service, strip_output_only(current), new, env.region, env.project),
        wait_budget_s=2400,
    )
    if base.note:
        plan.notes.append(base.note)
    plan.notes.append(
        "Instance limits live in the revision template: Cloud Run creates a revision with the same config."
    )
    if p.min_instances > 0:
        plan.notes.append(
            f"min-instances {p.min_instances} keeps GPUs running (and billed) while idle, but avoids cold starts."
        )
    else:
        plan.notes.append("min-instances 0 scales to zero when idle ($0), at the price of a cold start of minutes.")
    return plan


def pick_rollback_target(revisions: list[RevisionInfo], wanted: str | None) -> RevisionInfo:
    if wanted:
        for r in revisions:
            if r.name == wanted:
                if r.traffic_percent == 100:
                    raise InvalidInput(
                        f"Refused: `{wanted}` already serves 100% of traffic: the rollback would change nothing.",
                        "See `/gemma revisions`.",
                    )
                if r.ready is not True:
                    raise InvalidInput(
                        f"Revision `{wanted}` is not ready ({r.reason or 'unknown state'}).",
                        "Pick a ready revision from `/gemma revisions`.",
                    )
                return r
        raise NotFound(f"Revision `{wanted}` not found.", "See `/gemma revisions` for the names.")
    serving = max(revisions, key=lambda r: r.traffic_percent, default=None)
    if serving is None or serving.traffic_percent == 0:
        raise InvalidInput("No revision is serving traffic, so there is nothing to roll back from.")
    older = [
        r
        for r in revisions
        if r.ready is True
        and r.name != serving.name
        and (r.create_time is None or serving.create_time is None or r.create_time < serving.create_time)
    ]
    if not older:
        raise InvalidInput(
            f"No earlier ready revision to roll back to from `{serving.name}`.", "See `/gemma revisions`."
        )
    return older[0]  # list_revisions is newest first


async def plan_rollback(runtime: Runtime, env: DeployEnv, params: dict[str, Any]) -> Plan:
    p: RollbackParams = validate_params(RollbackParams, params, "rollback")
    service = p.service or env.service
    current = await current_spec(runtime, service)
    revisions = await runtime.list_revisions(service, limit=20)
    # During a canary a plain `/gemma rollback` means "back to the stable revision", not the one before it.
    target = pick_rollback_target(revisions, p.revision or stable_revision(await runtime.get_service(service)))
    new = strip_output_only(current)
    new["traffic"] = [{"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION", "revision": target.name, "percent": 100}]
    changes = diff_specs(strip_output_only(current), new)
    if not changes:
        raise InvalidInput(
            f"Refused: traffic is already pinned to `{target.name}`: the rollback would change nothing.",
            "See `/gemma revisions`.",
        )
    plan = Plan(
        kind="rollback",
        service=service,
        summary=f"Roll `{service}` back: 100% of traffic to `{target.name}`",
        params=p.model_dump(exclude_none=True),
        spec=new,
        target_revision=target.name,
        base_fingerprint=fingerprint(current),
        changes=changes,
        gcloud=update_commands(service, strip_output_only(current), new, env.region, env.project),
        wait_budget_s=600,
    )
    plan.notes.append("Traffic is pinned to that revision: later deploys by the bot move it back to latest-ready.")
    return plan


async def plan_destroy(runtime: Runtime, env: DeployEnv, params: dict[str, Any]) -> Plan:
    p: DestroyParams = validate_params(DestroyParams, params, "destroy")
    service = p.service or env.service
    current = await current_spec(runtime, service)
    info = await runtime.get_service(service)
    plan = Plan(
        kind="destroy",
        service=service,
        summary=f"Delete the Cloud Run service `{service}` and all its revisions",
        params=p.model_dump(exclude_none=True),
        base_fingerprint=fingerprint(current),
        gcloud=destroy_command(service, env.region, env.project),
        wait_budget_s=600,
    )
    plan.notes.append(f"Its URL {info.uri or '(none)'} stops answering. Weights in the bucket are not touched.")
    plan.notes.append("To confirm, type the service name in the dialog.")
    return plan

"""Scale, rollback, promote and canary on Azure Container Apps: revisions and their traffic weights.

An ACA app in Multiple revision mode (the bot's apps are) routes ingress by integer weights that add up to 100,
each naming a revision, the latest ready revision (`latestRevision`), and optionally a label that gives that
revision its own host, `<app>---<label>.<domain>` (skills/data/aca.yaml `traffic`). What each plan writes:
- scale: the replica range lives in the template, so a scale makes a new revision (a template change); built on
  the revision that serves, with the traffic on the latest revision again when it was pinned;
- rollback and promote: traffic only (no new revision): 100% to one named revision, labels gone;
- canary: a deploy whose new revision gets a known name (template.revisionSuffix, `<app>--canary-<id>`), N% on the
  latest-revision weight labelled `canary` and 100-N% pinned to the serving revision labelled `stable`. ARM
  refuses a weight that names a revision not yet made, and the latest-revision weight waits for the new revision
  to be ready, so one write starts the canary and it takes its share only once ready.
In Multiple mode an old revision stays active, running its min replicas (billed, holding GPU quota), until it is
deactivated: each plan says so when it leaves such a revision behind, with the az command that stops it.
The quota a plan needs is the environment's GPU usage (ManagedEnvironmentConsumption*Gpus), counted as ACA counts
it: every running replica of every active revision.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

from skills.actions.params import RollbackParams, ScaleParams
from skills.capacity.aca_catalog import AcaCatalog, WorkloadProfile
from skills.capacity.aca_prices import aca_price
from skills.capacity.prices import format_usd
from skills.durations import format_duration
from skills.errors import InvalidInput, NotFound, UserFacingError
from skills.targets.aca import spec as aspec
from skills.targets.aca.api import AppInfo, AppRevision, ContainerAppsApi
from skills.targets.aca.az import az_update, traffic_of
from skills.targets.canary import (
    CANARY_TAG,
    STABLE_TAG,
    CanaryInfo,
    PromoteParams,
    refuse_split,
    serving_revision_of,
)
from skills.targets.plan import Plan
from skills.targets.plan_inputs import validate_params

LATEST: list[dict[str, Any]] = [{"latestRevision": True, "weight": 100}]


@dataclass
class AcaScope:
    """What the traffic plans read and name: the ARM port, the catalog, the resource group (for az lines)."""

    api: ContainerAppsApi
    aca: AcaCatalog
    resource_group: str
    kind: str  # the target's kind, for the plan
    display: str


def weights(app: AppInfo) -> dict[str, int]:
    """Revision -> its share of traffic as ingress routes it now: the latest-revision weight goes to the latest
    ready revision (ACA: traffic does not switch to a new revision until it is ready)."""
    out: dict[str, int] = {}
    for t in traffic_of(app.body) or LATEST:
        name = (app.latest_ready_revision or "") if t.get("latestRevision") else str(t.get("revisionName", ""))
        if name:
            out[name] = out.get(name, 0) + int(t.get("weight", 0) or 0)
    return out


def labelled(app: AppInfo, label: str) -> str:
    """The revision a label points at ('' when no weight carries it)."""
    for t in traffic_of(app.body):
        if t.get("label") == label:
            return (app.latest_ready_revision or "") if t.get("latestRevision") else str(t.get("revisionName", ""))
    return ""


def serves(r: AppRevision) -> tuple[bool, str]:
    """Can traffic go to this revision now: active, provisioned, not failed, and running (healthy, or scaled to
    zero, when the next request starts a replica). The reason when not, in ACA's words."""
    if not r.active:
        return False, "inactive (deactivated: activate it first with `az containerapp revision activate`)"
    if r.provisioning_state != "Provisioned":
        return False, f"provisioning state {r.provisioning_state}"
    if r.running_state != "Running" or r.health_state == "Unhealthy":
        return False, f"{r.running_state}, health {r.health_state}" + (
            f": {r.provisioning_error}" if r.provisioning_error else ""
        )
    return True, ""


def _min_replicas(template: dict[str, Any]) -> int:
    return int(((template.get("scale") or {}).get("minReplicas", 0)) or 0)


def _max_replicas(template: dict[str, Any]) -> int:
    return int(((template.get("scale") or {}).get("maxReplicas", 10)) or 10)


async def _app(scope: AcaScope, service: str) -> AppInfo:
    app = await scope.api.get_app(service) if scope.aca.app_name.check(service) is None else None
    if app is None:
        raise NotFound(f"Service `{service}` does not exist (no container app of that name in this environment).")
    return app


async def _revisions(scope: AcaScope, service: str) -> dict[str, AppRevision]:
    return {r.name: r for r in await scope.api.list_revisions(service)}


def _kept(revisions: dict[str, AppRevision], besides: tuple[str, ...]) -> int:
    """The replicas active revisions (but `besides`) keep running at their min, whatever the traffic."""
    return sum(
        _min_replicas(r.template)
        for r in revisions.values()
        if r.active and r.name not in besides and r.provisioning_state != "Failed"
    )


def _left_running(leaving: list[AppRevision], az_where: str) -> list[str]:
    """Notes for revisions a plan takes traffic from that keep replicas running (Multiple mode keeps them active)."""
    out = []
    for r in leaving:
        if r.active and _min_replicas(r.template) > 0:
            out.append(
                f":warning: `{r.name}` stays active with min replicas {_min_replicas(r.template)} (Multiple revision "
                "mode keeps it): its replicas keep running, billed and holding GPU quota, until you deactivate it: "
                f"`az containerapp revision deactivate {az_where} --revision {r.name}`."
            )
    return out


async def _quota_refusal(
    scope: AcaScope,
    app: AppInfo,
    profile: WorkloadProfile | None,
    revisions: dict[str, AppRevision],
    need: int,
    why: str,
) -> tuple[str, str]:
    """(refusal, note) for `need` replicas of the app running at once: the environment's GPU usage minus what the
    app holds now, plus what it would hold. Unreadable or unrecorded: a note, never a refusal."""
    if profile is None or not profile.quota_usage:
        return "", f":warning: GPU quota not checked (no quota name recorded for `{app.workload_profile}`)."
    try:
        usages = {u.name: u for u in await scope.api.environment_usages()}
    except UserFacingError as exc:
        return "", f":warning: GPU quota could not be checked ({exc.message[:160]})."
    u = usages.get(profile.quota_usage)
    if u is None:
        return "", f":warning: Azure returned no `{profile.quota_usage}` usage for the environment."
    per = profile.gpu_count * profile.quota_per_gpu
    held = sum(r.replicas for r in revisions.values()) * per
    others = max(u.current - held, 0)
    wanted = need * per
    what = (
        f"`{profile.quota_usage}`: {u.current:g} used of {u.limit:g} ({held:g} by `{app.name}`); {why} need {wanted:g}"
    )
    if others + wanted <= u.limit:
        return "", f"GPU quota {what}: it holds."
    return (
        f"Refused: {what}, and only {max(u.limit - others, 0):g} is free for `{app.name}`. To go ahead: lower the "
        f"replicas, deactivate revisions that still run, or request more ({scope.aca.quota.how_to_request}).",
        "",
    )


async def plan_scale(scope: AcaScope, service: str, params: dict[str, Any]) -> Plan:
    p: ScaleParams = validate_params(ScaleParams, params, "scale")
    if p.max_instances > scope.aca.max_replicas:
        raise InvalidInput(
            f"Max replicas {p.max_instances} is above ACA's limit of {scope.aca.max_replicas} per revision.",
            f"({scope.aca.cite(scope.aca.replicas_source)})",
        )
    app = await _app(scope, service)
    revisions = await _revisions(scope, service)
    shares = {r: w for r, w in weights(app).items() if w > 0}
    refuse_split(
        service, list(shares.items()), "a scale makes one new revision, which would take the latest share only"
    )
    serving = next(iter(shares), "")
    base_rev = revisions.get(serving)
    new = aspec.sendable(app.body)
    props = new.setdefault("properties", {})
    on_serving = base_rev is not None and serving != app.latest_revision
    template = copy.deepcopy(base_rev.template if on_serving and base_rev else props.get("template") or {})
    template.pop("revisionSuffix", None)  # a suffix names one revision: ACA refuses it twice
    template.setdefault("scale", {}).update({"minReplicas": p.min_instances, "maxReplicas": p.max_instances})
    props["template"] = template
    pinned = traffic_of(app.body) != LATEST and bool(traffic_of(app.body))
    if pinned:
        props.setdefault("configuration", {}).setdefault("ingress", {})["traffic"] = copy.deepcopy(LATEST)
    changes = aspec.diff(app.body, new)
    if not changes:
        raise InvalidInput(
            f"Refused: `{service}` already runs with min {p.min_instances} / max {p.max_instances} replicas: the "
            "scale would change nothing.",
            "See `/gemma status` for the replica range in force.",
        )
    where = f"--name {service} --resource-group {scope.resource_group}"
    plan = Plan(
        kind="scale",
        service=service,
        summary=f"Scale `{service}` to min {p.min_instances} / max {p.max_instances} replicas"
        + (f" (on the serving revision `{serving}`'s configuration)" if on_serving else ""),
        params=p.model_dump(exclude_none=True),
        spec=new,
        base_fingerprint=aspec.fingerprint(app.body),
        changes=changes,
        gcloud=az_update(service, app.body, new, scope.resource_group),
        cli="az",
        target=scope.kind,
        wait_budget_s=2400,
    )
    if on_serving:
        plan.notes.append(
            f"The app's template is `{app.latest_revision}`'s, but `{serving}` serves: the scale is built on "
            f"`{serving}`'s configuration, so it changes only the replica range."
        )
    plan.notes.append(
        "The replica range lives in the revision template: ACA makes a new revision with it, and traffic moves to it "
        "once it is ready (" + scope.aca.cite(scope.aca.traffic.source) + ")."
    )
    if pinned:
        plan.notes.append("Traffic was pinned to one revision: it goes back to the latest ready revision.")
    profile = scope.aca.profiles.get((app.body.get("tags") or {}).get(aspec.TAG_TYPE, ""))
    if profile is not None:
        each = aca_price(profile.type, app.location).per_replica_usd_per_hour
        idle = format_usd(each * p.min_instances if each is not None else None, "h")
        plan.notes.append(
            f"Each running replica: {format_usd(each, 'h')} ({profile.type}); min replicas {p.min_instances}: "
            + (
                f"{idle} around the clock, idle or not."
                if p.min_instances
                else "$0 while idle, and the next request waits for a cold start."
            )
        )
    leaving = [r for n, r in revisions.items() if n == serving]
    plan.notes += _left_running(leaving, where)
    held_after = _kept(revisions, ())  # every active revision stays so, at its min replicas
    refusal, note = await _quota_refusal(
        scope, app, profile, revisions, p.max_instances + held_after, f"max {p.max_instances} new + {held_after} kept"
    )
    plan.refusal = refusal
    if note:
        plan.notes.append(note)
    return plan


def _pick_rollback(app: AppInfo, revisions: dict[str, AppRevision], wanted: str | None, service: str) -> AppRevision:
    shares = {r: w for r, w in weights(app).items() if w > 0}
    if wanted:
        r = revisions.get(wanted)
        if r is None:
            raise NotFound(f"Revision `{wanted}` of `{service}` not found.", "See `/gemma revisions` for the names.")
        if shares.get(wanted) == 100:
            raise InvalidInput(
                f"Refused: `{wanted}` already serves 100% of traffic: the rollback would change nothing.",
                "See `/gemma revisions`.",
            )
        ok, why = serves(r)
        if not ok:
            raise InvalidInput(
                f"Revision `{wanted}` cannot take traffic: {why}.", "Pick another from `/gemma revisions`."
            )
        return r
    if not shares:
        raise InvalidInput("No revision is serving traffic, so there is nothing to roll back from.")
    serving = max(shares, key=lambda n: shares[n])
    current = revisions.get(serving)
    older = [
        r
        for r in sorted(revisions.values(), key=lambda r: r.created.timestamp() if r.created else 0.0, reverse=True)
        if r.name != serving
        and serves(r)[0]
        and (current is None or r.created is None or current.created is None or r.created < current.created)
    ]
    if not older:
        raise InvalidInput(
            f"No earlier revision of `{service}` can take traffic (active, provisioned and running) to roll back to "
            f"from `{serving}`.",
            "See `/gemma revisions`; an inactive one needs `az containerapp revision activate` first.",
        )
    return older[0]


async def _plan_pin(
    scope: AcaScope,
    kind: Literal["rollback", "promote"],
    service: str,
    app: AppInfo,
    target: AppRevision,
    params: dict[str, Any],
) -> Plan:
    """100% of traffic to `target`, labels gone: a rollback or a promote (no new revision)."""
    revisions = await _revisions(scope, service)
    new = aspec.sendable(app.body)
    new.setdefault("properties", {}).setdefault("configuration", {}).setdefault("ingress", {})["traffic"] = [
        {"revisionName": target.name, "weight": 100}
    ]
    changes = aspec.diff(app.body, new)
    if not changes:
        raise InvalidInput(
            f"Refused: traffic is already pinned to `{target.name}`: the {kind} would change nothing.",
            "See `/gemma revisions`.",
        )
    verb = "Roll `{s}` back" if kind == "rollback" else "Promote `{t}` on `{s}`"
    plan = Plan(
        kind=kind,
        service=service,
        summary=f"{verb.format(s=service, t=target.name)}: 100% of traffic to `{target.name}`",
        params=params,
        spec=new,
        target_revision=target.name,
        base_fingerprint=aspec.fingerprint(app.body),
        changes=changes,
        gcloud=az_update(service, app.body, new, scope.resource_group),
        cli="az",
        target=scope.kind,
        wait_budget_s=600,
    )
    plan.notes.append(
        "Traffic only: no new revision. It is pinned to that revision (labels removed); a later deploy by the bot "
        "moves it back to the latest ready revision."
    )
    if target.replicas == 0:
        plan.notes.append(
            f"`{target.name}` runs no replica now (scaled to zero): the first request after the switch waits for a "
            "cold start."
        )
    leaving = [revisions[n] for n, w in weights(app).items() if w > 0 and n != target.name and n in revisions]
    plan.notes += _left_running(leaving, f"--name {service} --resource-group {scope.resource_group}")
    return plan


async def plan_rollback(scope: AcaScope, service: str, params: dict[str, Any]) -> Plan:
    p: RollbackParams = validate_params(RollbackParams, params, "rollback")
    app = await _app(scope, service)
    revisions = await _revisions(scope, service)
    # During a canary a plain rollback means back to the revision labelled stable, not the one before.
    target = _pick_rollback(app, revisions, p.revision or labelled(app, STABLE_TAG) or None, service)
    return await _plan_pin(scope, "rollback", service, app, target, p.model_dump(exclude_none=True))


async def plan_promote(scope: AcaScope, service: str, params: dict[str, Any]) -> Plan:
    p: PromoteParams = validate_params(PromoteParams, params, "promote")
    app = await _app(scope, service)
    share = weights(app).get(p.revision, 0)
    if share == 0:
        raise InvalidInput(
            f"Refused: `{p.revision}` takes no part in `{service}`'s traffic, so there is nothing to promote.",
            "See `/gemma revisions`.",
        )
    if share == 100:
        raise InvalidInput(f"Refused: `{p.revision}` already serves 100% of traffic: the promote would change nothing.")
    rev = await scope.api.get_revision(service, p.revision)
    if rev is None:
        raise NotFound(f"Revision `{p.revision}` of `{service}` not found.")
    ok, why = serves(rev)
    if not ok:
        raise InvalidInput(f"Refused: revision `{p.revision}` cannot take all traffic: {why}.")
    return await _plan_pin(scope, "promote", service, app, rev, p.model_dump(exclude_none=True))


def canary_suffix(plan_id: str) -> str:
    return f"canary-{plan_id[:6]}"


async def apply_canary(scope: AcaScope, plan: Plan, percent: int) -> CanaryInfo:
    """Turn a deploy plan of an existing app into a canary of `percent`%: a named new revision on the
    latest-revision weight (label `canary`), the serving revision pinned at 100-N% (label `stable`); the cost and
    the GPU quota for both at once (a refusal when the environment cannot hold them)."""
    if plan.create or plan.spec is None:
        raise InvalidInput(
            f"Refused: `{plan.service}` does not exist yet, so a canary has nothing to compare with.",
            "Deploy it without --canary first.",
        )
    app = await _app(scope, plan.service)
    baseline = serving_revision_of(plan.service, [(r, w) for r, w in weights(app).items() if w > 0])
    suffix = canary_suffix(plan.id)
    revision = scope.aca.traffic.revision_name.format(app=plan.service, suffix=suffix)
    spec = copy.deepcopy(plan.spec)
    props = spec["properties"]
    props["template"]["revisionSuffix"] = suffix
    props["configuration"]["ingress"]["traffic"] = [
        {"revisionName": baseline, "weight": 100 - percent, "label": STABLE_TAG},
        {"latestRevision": True, "weight": percent, "label": CANARY_TAG},
    ]
    plan.spec = spec
    plan.changes = aspec.diff(app.body, spec)
    plan.gcloud = az_update(plan.service, app.body, spec, scope.resource_group)
    plan.summary = (
        f"Canary: {plan.summary}, {percent}% of traffic to `{revision}`, {100 - percent}% stays on `{baseline}`"
    )
    plan.params["canary"] = percent
    template = props["template"]
    min_r = _min_replicas(template)
    profile = scope.aca.profiles.get((spec.get("tags") or {}).get(aspec.TAG_TYPE, ""))
    each = aca_price(profile.type, app.location).per_replica_usd_per_hour if profile else None
    replicas = max(1, min_r)
    plan.notes.insert(
        0,
        f"Canary cost: the new revision's own replicas ({replicas} at least, to take its {percent}%) beside "
        f"`{baseline}`, {format_usd(each * replicas if each is not None else None, 'h')} while the canary runs, on top "
        f"of what `{baseline}` costs.",
    )
    if plan.cold_start_s:
        plan.notes.insert(
            1,
            f"The canary takes its share only once ready (ACA's latest-revision weight waits for it): a cold start "
            f"of ~{format_duration(plan.cold_start_s, 'approx')}; until then `{baseline}` keeps 100%.",
        )
    app_fqdn = app.fqdn or f"{plan.service}.<domain>"
    hosts = [scope.aca.traffic.label_fqdn(plan.service, tag, app_fqdn) for tag in (STABLE_TAG, CANARY_TAG)]
    plan.notes.append(
        f"Both revisions get a label and their own host (`{hosts[0]}`, `{hosts[1]}`): the comparison reads each "
        "one's vLLM /metrics there and Azure Monitor per revision, then proposes Promote or Roll back."
    )
    revisions = await _revisions(scope, plan.service)
    serving_max = _max_replicas(revisions[baseline].template) if baseline in revisions else 1
    kept = _kept(revisions, (baseline,))
    why = f"`{baseline}`'s max {serving_max} + the canary's {replicas}" + (
        f" + {kept} kept by other active revisions" if kept else ""
    )
    refusal, note = await _quota_refusal(scope, app, profile, revisions, serving_max + replicas + kept, why)
    if refusal:
        plan.refusal = "Canary " + refusal[0].lower() + refusal[1:] + " Or deploy without --canary."
    if note:
        plan.notes.append(note)
    return CanaryInfo(percent=percent, baseline=baseline, revision=revision, min_instances=min_r, hourly_usd=each)

"""Canary deploys on Cloud Run: the new revision takes a slice of traffic first, beside the revision serving now.
(The target-independent part, CanaryInfo and the tags, is skills/targets/canary.py.)

A deploy or redeploy plan with `canary: N` names its new revision (RevisionTemplate.revision, which Cloud Run
requires to start with the service's name and a dash) and splits the service's traffic between two revision
targets, each with a traffic tag, so each also answers at its own URL (TrafficTargetStatus.uri,
`https://TAG---SERVICE-HASH.a.run.app`): 100-N% stays on the serving revision (tag `stable`), N% goes to the new one
(tag `canary`) once it is ready. The traffic rules are Cloud Run's (Knative serving's route validation, which Cloud
Run's API follows): percents 0..100 summing to 100, tags DNS-1035 labels and unique, a REVISION target names its
revision. The gcloud equivalent is `gcloud run deploy --no-traffic --tag canary --revision-suffix ...`, then
`gcloud run services update-traffic --to-revisions NEW=N,OLD=100-N`.

What a canary costs is said in the plan: a second GPU instance (at the configured minimum, at least one so it can
take its slice) billed while the canary runs, its cold start before it serves, and whether the region's GPU quota
holds both revisions at once (read with the same QuotaReader preflight uses). A canary the quota cannot hold is
refused with the reason.

Promote (100% to the canary) and roll back (100% to the stable revision, 0% to the canary) are ordinary
traffic-only plans: `plan_promote` here, and the existing rollback plan.

Sources: google.cloud.run.v2 TrafficTarget (type, revision, percent, tag: "a string to be part of the URI to
exclusively reference this target") and RevisionTemplate.revision ("the unique name for the revision"; Cloud Run
requires the service's name as its prefix), https://cloud.google.com/python/docs/reference/run/latest;
knative/serving pkg/apis/serving/v1/route_validation.go for the traffic rules; `gcloud run services update-traffic`
(https://cloud.google.com/sdk/gcloud/reference/run/services/update-traffic: --to-revisions, --set-tags); the tag URL
form from Cloud Run's revision-tag docs and guides (https://cloud.google.com/run/docs/rollouts-rollbacks-traffic-migration).
"""

from __future__ import annotations

import copy
from typing import Any

from skills.capacity.cost import parse_cpu
from skills.capacity.estimates import hourly_usd
from skills.capacity.fit import load_catalog
from skills.capacity.gpu_quota import read_gpu_quota, unit_note
from skills.durations import format_duration
from skills.errors import InvalidInput
from skills.ports import PreflightUnavailable, QuotaReader, Runtime, ServiceInfo
from skills.serving.sizes import gib
from skills.targets.canary import (
    CANARY_TAG,
    DNS1035,
    MAX_LABEL,
    STABLE_TAG,
    CanaryInfo,
    PromoteParams,
    serving_revision,
)
from skills.targets.cloud_run.diff import diff_specs, fingerprint
from skills.targets.cloud_run.gcloud import annotations_note, deploy_command, traffic_command, update_commands
from skills.targets.cloud_run.plan_common import current_spec, validate_params
from skills.targets.cloud_run.render import strip_output_only
from skills.targets.env import DeployEnv
from skills.targets.plan import Plan

REVISION_TARGET = "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION"


def canary_revision_name(service: str, plan_id: str) -> str:
    name = f"{service}-canary-{plan_id[:6]}"
    if len(name) > MAX_LABEL or not DNS1035.match(name):
        raise InvalidInput(
            f"Refused: the canary's revision name `{name}` would not be a valid Cloud Run revision name "
            f"(at most {MAX_LABEL} lower-case letters, digits and dashes).",
            "Use a shorter service name, or deploy without --canary.",
        )
    return name


def split_traffic(baseline: str, canary: str, percent: int) -> list[dict[str, Any]]:
    return [
        {"type": REVISION_TARGET, "revision": baseline, "percent": 100 - percent, "tag": STABLE_TAG},
        {"type": REVISION_TARGET, "revision": canary, "percent": percent, "tag": CANARY_TAG},
    ]


def _canary_gcloud(service: str, current: dict[str, Any], spec: dict[str, Any], suffix: str, env: DeployEnv) -> str:
    """The canary's revision deployed without traffic under its tag, then the split and the stable tag, each
    derived from the plan's spec (not edited into another command's text)."""
    first = deploy_command(service, spec, env.region, env.project, update=True)
    first += f" \\\n  --no-traffic --tag={CANARY_TAG} --revision-suffix={suffix}"
    split = traffic_command(service, current.get("traffic") or [], spec["traffic"], env.region, env.project)
    return "\n".join(x for x in (first, split, annotations_note(current, spec)) if x)


async def apply_canary(
    plan: Plan, percent: int, runtime: Runtime, env: DeployEnv, quotas: QuotaReader | None
) -> CanaryInfo:
    """Turn a deploy/redeploy plan into a canary of `percent`%: name the revision, split the traffic with tags,
    state the cost, and refuse (plan.refusal) when the region's GPU quota cannot hold both revisions."""
    if plan.create or plan.spec is None:
        raise InvalidInput(
            f"Refused: `{plan.service}` does not exist yet, so a canary has nothing to compare with.",
            "Deploy it without --canary first.",
        )
    info = await runtime.get_service(plan.service)
    baseline = serving_revision(info)
    revision = canary_revision_name(plan.service, plan.id)
    spec = copy.deepcopy(plan.spec)
    spec.setdefault("template", {})["revision"] = revision
    spec["traffic"] = split_traffic(baseline, revision, percent)
    current = await current_spec(runtime, plan.service)
    plan.spec = spec
    plan.changes = diff_specs(strip_output_only(current), spec)
    plan.base_fingerprint = fingerprint(current)
    suffix = revision.removeprefix(plan.service + "-")
    plan.gcloud = _canary_gcloud(plan.service, strip_output_only(current), spec, suffix, env)
    plan.summary = (
        f"Canary: {plan.summary}, {percent}% of traffic to `{revision}`, {100 - percent}% stays on `{baseline}`"
    )
    plan.params["canary"] = percent

    tmpl = spec["template"]
    scaling = tmpl.get("scaling") or {}
    min_i = int(scaling.get("minInstanceCount") or 0)
    gpu = (tmpl.get("nodeSelector") or {}).get("accelerator", "")
    usd = _hourly(tmpl, gpu, env.region)
    instances = max(1, min_i)
    cost = f"~${usd * instances:.2f}/h" if usd is not None else "an unpriced GPU instance"
    plan.notes.insert(
        0,
        f"Canary cost: a second GPU instance ({instances} x {gpu or 'GPU'} at min instances {min_i}, at least one to "
        f"take its {percent}%) beside `{baseline}`, {cost} while the canary runs (estimate: the price table, "
        f"skills/data/prices.yaml), on top of what `{baseline}` costs.",
    )
    if plan.cold_start_s:
        plan.notes.insert(
            1,
            f"The canary serves only once ready: a cold start of ~{format_duration(plan.cold_start_s, 'approx')} "
            f"(the planner's estimate); until then `{baseline}` keeps 100%.",
        )
    plan.notes.append(
        f"Both revisions get a traffic tag (`{STABLE_TAG}`, `{CANARY_TAG}`) and their own URL: the comparison reads "
        "each one's vLLM /metrics there and Cloud Monitoring per revision, then proposes Promote or Roll back."
    )
    await _check_quota(plan, quotas, gpu, env, info.max_instances or 1, instances)
    return CanaryInfo(percent=percent, baseline=baseline, revision=revision, min_instances=min_i, hourly_usd=usd)


def _hourly(tmpl: dict[str, Any], gpu: str, region: str) -> float | None:
    containers = tmpl.get("containers") or [{}]
    limits = (containers[0].get("resources") or {}).get("limits") or {}
    try:
        g = load_catalog().gpu(gpu)
        return hourly_usd(load_catalog(), g, 1, parse_cpu(str(limits.get("cpu", "0"))), gib(limits["memory"]), region)
    except Exception:  # noqa: BLE001 - a price is a note, never a blocker
        return None


async def _check_quota(
    plan: Plan, quotas: QuotaReader | None, gpu: str, env: DeployEnv, serving_max: int, canary_instances: int
) -> None:
    """Both revisions run at once: the serving one up to its max instances, the canary at least its minimum
    (one GPU each; Cloud Run attaches one GPU per instance). Quota that cannot hold that refuses the plan."""
    needed = serving_max + canary_instances
    if quotas is None:
        plan.notes.append(
            f":warning: GPU quota not checked (no Cloud Quotas reader): the canary needs {needed} GPU(s)."
        )
        return
    try:
        q = await read_gpu_quota(quotas, gpu, env.region)
    except PreflightUnavailable as exc:
        plan.notes.append(f":warning: GPU quota could not be checked ({exc}): the canary needs {needed} GPU(s).")
        return
    if q is None or q.value is None:
        plan.notes.append(f":warning: no GPU quota value for {gpu} in {env.region}: the canary needs {needed} GPU(s).")
        return
    if q.value == -1 or q.value >= needed:
        held = (
            "unlimited" if q.value == -1 else f"{q.value} GPU(s)" + unit_note(gpu, q.raw if q.raw is not None else -1)
        )
        plan.notes.append(
            f"GPU quota `{q.quota_id}` in {env.region}: {held}; the canary needs {needed} (the serving revision's max "
            f"{serving_max} + the canary's {canary_instances}). GPUs of other services in the region count too."
        )
        return
    plan.refusal = (
        f"Canary refused: it needs {needed} {gpu} GPU(s) at once in {env.region} (the serving revision's max "
        f"instances {serving_max} + the canary's {canary_instances}), and quota `{q.quota_id}` is {q.value} GPU(s)"
        f"{unit_note(gpu, q.raw if q.raw is not None else -1)}. "
        f"To go ahead: {q.request_fix(env.project, need_gpus=needed)} Or deploy without --canary."
    )


def stable_revision(info: ServiceInfo) -> str:
    """During a canary (traffic split with the `stable` tag), the revision a plain rollback goes back to ('' when
    no canary runs)."""
    split = [t for t in info.traffic if t.percent > 0]
    if len(split) > 1:
        return next((t.revision for t in split if t.tag == STABLE_TAG and t.revision), "")
    return ""


async def unname_revision(plan: Plan, runtime: Runtime) -> None:
    """A write that makes a new revision after a canary must not carry the canary's revision name along (the
    service's template keeps it): Cloud Run refuses a second revision under a taken name. Drop it, so Cloud Run
    names the new revision, and show that in the diff."""
    tmpl = (plan.spec or {}).get("template") or {}
    if not tmpl.get("revision") or plan.create:
        return
    tmpl.pop("revision")
    current = await current_spec(runtime, plan.service)
    plan.changes = diff_specs(strip_output_only(current), plan.spec)


async def plan_promote(runtime: Runtime, env: DeployEnv, params: dict[str, Any]) -> Plan:
    """100% of traffic to the canary revision; the tags go (the comparison is over)."""
    p: PromoteParams = validate_params(PromoteParams, params, "promote")
    service = p.service or env.service
    current = await current_spec(runtime, service)
    info = await runtime.get_service(service)
    target = next((t for t in info.traffic if t.revision == p.revision), None)
    if target is None:
        raise InvalidInput(
            f"Refused: `{p.revision}` takes no part in `{service}`'s traffic, so there is nothing to promote.",
            "See `/gemma revisions`.",
        )
    if target.percent == 100:
        raise InvalidInput(f"Refused: `{p.revision}` already serves 100% of traffic: the promote would change nothing.")
    rev = await runtime.get_revision(service, p.revision)
    if rev.ready is not True:
        raise InvalidInput(f"Refused: revision `{p.revision}` is not ready ({rev.reason or 'unknown state'}).")
    new = strip_output_only(current)
    new["traffic"] = [{"type": REVISION_TARGET, "revision": p.revision, "percent": 100}]
    plan = Plan(
        kind="promote",
        service=service,
        summary=f"Promote `{p.revision}` on `{service}`: 100% of traffic to it",
        params=p.model_dump(exclude_none=True),
        spec=new,
        target_revision=p.revision,
        base_fingerprint=fingerprint(current),
        changes=diff_specs(strip_output_only(current), new),
        gcloud=update_commands(service, strip_output_only(current), new, env.region, env.project),
        wait_budget_s=600,
    )
    plan.notes.append(
        "Traffic is pinned to that revision; the canary's tags are removed. A later deploy by the bot moves it back "
        "to latest-ready."
    )
    return plan

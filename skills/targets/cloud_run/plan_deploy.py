"""The plan for a new deploy from a profile: the rendered service, the capacity check, the gcloud equivalent."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from skills.actions.params import DeployParams
from skills.capacity.catalog import ModelProfile
from skills.capacity.cost import container_limits, parse_cpu
from skills.capacity.estimates import hourly_usd
from skills.capacity.fit import load_catalog
from skills.capacity.image_compat import default_image, require_compatible
from skills.errors import CloudUnavailable, InvalidInput, explain_error
from skills.ports import Runtime
from skills.serving.profiles import DeployProfile, get_profile
from skills.targets.cloud_run import metrics_sidecar
from skills.targets.cloud_run.diff import diff_specs, fingerprint
from skills.targets.cloud_run.gcloud import deploy_command, update_commands
from skills.targets.cloud_run.merge import merge_onto
from skills.targets.cloud_run.plan_common import (
    WAIT_MARGIN_S,
    Base,
    apply_fit,
    check_gpu,
    fit_for,
    one_gpu,
    probe_note,
    serving_base,
    validate_params,
)
from skills.targets.cloud_run.render import (
    DeployConfig,
    check_gpu_minimums,
    main_container,
    probe_for,
    render_service,
    strip_output_only,
)
from skills.targets.env import DeployEnv
from skills.targets.plan import Plan

# Change-list lines that say where traffic goes or what the revision is called, not what it runs.
_NOT_CONFIGURATION = {"traffic", "traffic.tags", "template.revision"}


def hub_pull_note(model: ModelProfile, secret: str) -> str:
    """How a Hub pull authenticates: with HF_TOKEN only for a checkpoint the Hub gates (catalog hub_gated)."""
    if model.hub_gated:
        return (
            f"No MODEL_BUCKET: `{model.hf_repo}` is gated on the Hub, so it is pulled with HF_TOKEN from secret "
            f"`{secret}` (its account must have accepted the licence)."
        )
    return (
        f"No MODEL_BUCKET: `{model.hf_repo}` is pulled from the Hub without an HF token (Gemma 4 is Apache-2.0, not "
        f"gated). A gated or private checkpoint needs one: `hf_token_from_secret=True` injects HF_TOKEN from secret "
        f"`{secret}`."
    )


async def plan_deploy(runtime: Runtime, env: DeployEnv, params: dict[str, Any], *, offline: bool = False) -> Plan:
    """`offline`: render without reading the running service (no credentials): nothing to diff against, and
    the plan says so. Only `/gemma config` asks for this; a plan meant for Confirm always compares."""
    p: DeployParams = validate_params(DeployParams, params, "deploy")
    profile: DeployProfile = get_profile(p.profile)
    o = profile.model_dump(exclude={"name", "description", "model", "target"}, exclude_none=True)
    o.update(p.set_fields())
    o.pop("profile", None)
    service = o.pop("service", None) or env.service
    o["gpu"] = check_gpu(o["gpu"])
    one_gpu(o)
    image_region = {"vllm_image": _pick_image(env, profile, o["gpu"])[0], "region": env.region}
    # Where the weights come from decides how much memory loading them takes (fit's one resource decision).
    report = fit_for(profile.model, {**o, **image_region, "weights_from_hub": not env.model_bucket}, o.get("memory"))
    # The planner's effective request already carries its required changes (fits_with_changes): render that.
    eff = report.request
    gpu = load_catalog().gpu(eff.gpu)
    memory_gib = report.recommended_memory_gib
    memory = f"{memory_gib}Gi"
    cpu = o.get("cpu") or f"{report.recommended_cpu:g}"
    check_gpu_minimums(gpu, cpu, memory)
    image, origin = _pick_image(env, profile, gpu.name)
    compat = require_compatible(image, report.model.family, gpu.name, origin)
    probe = probe_for(
        report.cold_start_s,
        o.get("startup_failure_threshold"),
        o.get("startup_period_s"),
        report.startup_budget_s,
    )
    try:
        cfg = DeployConfig(
            service=service,
            profile=profile.name,
            model=report.model.name,
            hf_repo=report.model.hf_repo,
            model_args=list(report.model.vllm_args),
            gpu=eff.gpu,
            gpu_count=eff.gpu_count,
            max_model_len=eff.max_model_len or report.model.default_max_model_len,
            gpu_memory_utilization=eff.gpu_memory_utilization,
            kv_cache_dtype=eff.kv_cache_dtype,
            dtype=eff.dtype,
            enforce_eager=eff.enforce_eager,
            cpu_offload_gb=eff.cpu_offload_gb,
            max_num_seqs=eff.max_num_seqs or report.recommended_max_num_seqs,
            max_num_batched_tokens=eff.max_num_batched_tokens or 4096,
            min_instances=o.get("min_instances", 0),
            max_instances=o.get("max_instances", 1),
            cpu=cpu,
            memory=memory,
            probe=probe,
            image=image,
            model_bucket=env.model_bucket,
            hf_token_secret=env.hf_token_secret if report.model.hub_gated else "",  # optional unless gated
            launch_stage=gpu.launch_stage,
            service_account=env.service_account,
            metrics_sidecar=env.metrics_sidecar,
        )
    except ValidationError as exc:
        raise InvalidInput(f"Cannot render the service: {explain_error(exc.errors()[0], flag_style=False)}.") from None
    spec = render_service(cfg)
    unread = ""
    try:
        current = await runtime.get_service_spec(service)
    except CloudUnavailable as exc:
        if not offline:
            raise
        current, unread = None, exc.message
    base: Base | None = None
    if current is not None:
        spec = merge_onto(current, spec)  # keep what the bot does not manage (service account, labels, ...)
        # "Changes to the running service" are against what serves: after a failed deploy or a rolled-back
        # canary the template is another revision's, and a diff against it would hide changes to what runs.
        base = await serving_base(runtime, service, current)
    changes = diff_specs(strip_output_only(base.spec) if base else None, spec)
    # Nothing to deploy when the service, or the revision that serves, already runs this configuration (a
    # deploy onto a failed template would only make a copy of what serves and move traffic to it).
    serves_it = base is not None and not [c for c in changes if c.path not in _NOT_CONFIGURATION]
    if current is not None and (serves_it or not diff_specs(strip_output_only(current), spec)):
        where = (
            f"already serves this from revision `{base.serving}`"
            if base is not None and base.spec is not current
            else "is already running this"
        )
        raise InvalidInput(
            f"Refused: `{service}` {where} (`{profile.name}`, {cfg.model} on {cfg.gpu}, "
            f"image `{image}`): the deploy would change nothing.",
            "To restart it, redeploy with a change; to check its health, `/gemma status`.",
        )
    plan = Plan(
        kind="deploy",
        service=service,
        summary=f"Deploy `{profile.name}` ({cfg.model} on {cfg.gpu_count} x {cfg.gpu}) to `{service}`"
        + (" (new service)" if current is None else ""),
        params=p.model_dump(exclude_none=True),
        create=current is None,
        spec=spec,
        base_fingerprint=fingerprint(current),
        changes=changes,
        # what the write does to the service as it is (its template), whatever the change list is shown against
        gcloud=update_commands(service, strip_output_only(current), spec, env.region, env.project)
        if current is not None
        else deploy_command(service, spec, env.region, env.project),
        wait_budget_s=probe.budget_s + WAIT_MARGIN_S,
    )
    # Priced as deployed: the CPU and memory this plan renders, not the planner's recommendation, with the
    # pricing `/gemma cost` uses for the running service.
    # Cloud Run bills an instance's containers together, so the Prometheus sidecar's CPU and memory count.
    cat = load_catalog()
    sidecar = metrics_sidecar.find(spec["template"]["containers"]) if env.metrics_sidecar else None
    side_cpu, side_gib = container_limits(sidecar) if sidecar else (0.0, 0.0)
    vllm_cpu, vllm_gib = container_limits(main_container(spec))  # the sidecar's share may have come out of vLLM's
    if (vllm_cpu, vllm_gib) != (parse_cpu(cpu), float(memory_gib)):
        cpu, memory = f"{vllm_cpu:g}", f"{vllm_gib:g}Gi"
        plan.notes.append(
            f"vLLM gets {cpu} vCPU and {memory} beside the Prometheus sidecar, to keep the instance within Cloud "
            f"Run's {metrics_sidecar.INSTANCE_MAX_VCPU:g} vCPU and {metrics_sidecar.INSTANCE_MAX_GIB:g} GiB."
        )
    as_deployed = hourly_usd(cat, gpu, eff.gpu_count, vllm_cpu + side_cpu, vllm_gib + side_gib, env.region)
    report = report.model_copy(update={"cost_per_hour_usd": as_deployed})
    apply_fit(plan, report)
    side_text = f" + Prometheus sidecar {side_cpu:g} vCPU, {side_gib:g} GiB" if sidecar else ""
    plan.fit_lines[-1] = plan.fit_lines[-1].replace("/h;", f"/h as deployed ({cpu} vCPU, {memory}{side_text});", 1)
    if base is not None and base.spec is not current:
        plan.notes.append(
            f"Changes are shown against the serving revision `{base.serving}`'s configuration; the service's "
            f"template is revision `{base.latest}`'s ({base.latest_state})."
        )
    if unread:
        plan.summary = f"Render `{profile.name}` ({cfg.model} on {cfg.gpu_count} x {cfg.gpu}) for `{service}`"
        plan.notes.append(f"Not compared with the running service: {unread} The diff shows a new service.")
    plan.notes.append(
        f"Startup probe budget {probe.budget_s} s (initial {probe.initial_delay_s} s + "
        f"{probe.failure_threshold} x "
        f"{probe.period_s} s); memory {memory}, {cpu} vCPU; concurrency = --max-num-seqs {cfg.max_num_seqs}."
    )
    probe_note(plan, report.cold_start_s, probe.budget_s)
    if sidecar is not None:
        running = metrics_sidecar.find((current or {}).get("template", {}).get("containers") or [])
        if running is None:
            plan.notes.append("VLLM_METRICS_SIDECAR: adds the " + metrics_sidecar.describe())
        else:
            plan.notes.append(
                f"VLLM_METRICS_SIDECAR: the service already runs the Prometheus sidecar `{running.get('name')}` "
                f"(`{running.get('image')}`); it is kept as it is."
            )
    plan.notes.append(f"Image `{image}` ({origin}): " + " ".join(["vLLM and CUDA build checked.", *compat.notes]))
    if gpu.launch_stage != "GA":
        plan.notes.append(f"{gpu.display} is in Preview on Cloud Run: the service is deployed at launch stage BETA.")
    if not env.model_bucket:
        plan.notes.append(hub_pull_note(report.model, env.hf_token_secret))
    if not env.service_account and current is None:
        plan.notes.append(
            "No VLLM_SERVICE_ACCOUNT: the service runs as the project's default compute service account; give it "
            "read access to the bucket and the HF token secret, or set VLLM_SERVICE_ACCOUNT."
        )
    return plan


def _pick_image(env: DeployEnv, profile: DeployProfile, gpu: str) -> tuple[str, str]:
    """The image and where it came from: VLLM_IMAGE, the profile's pin, or the GPU's default."""
    if env.image:
        return env.image, "VLLM_IMAGE"
    if profile.image:
        return profile.image, f"profile `{profile.name}`"
    return default_image(gpu), f"the default for {gpu}"

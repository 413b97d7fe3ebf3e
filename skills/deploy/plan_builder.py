"""Build the plan for each write action: deploy, redeploy, scale, rollback, destroy.

A plan says what will change (a field diff against the running service), what the capacity planner thinks
(verdict, figures, required changes), and the equivalent gcloud command. Nothing is written here.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from skills.actions.params import DeployParams, DestroyParams, RedeployParams, RollbackParams, ScaleParams
from skills.capacity.fit import FitReport, FitRequest, load_catalog, plan_fit
from skills.capacity.image_compat import default_image, require_compatible
from skills.deploy.diff import diff_specs, fingerprint
from skills.deploy.env import DeployEnv
from skills.deploy.gcloud import deploy_command, destroy_command, rollback_command, scale_command
from skills.deploy.merge import merge_onto
from skills.deploy.plans import Plan
from skills.deploy.profiles import DeployProfile, get_profile
from skills.deploy.render_service import (
    ANNOTATION_MODEL,
    MAX_THRESHOLD_WINDOW_S,
    OFFLINE_ENV,
    PROBE_MARGIN,
    DeployConfig,
    add_model_volume,
    check_gpu_minimums,
    fix_fuse_mounts,
    gcs_mounts,
    gib,
    main_container,
    memory_for_hub_weights,
    probe_for,
    render_service,
    replace_container,
    secret_env_of,
    set_env,
    set_model,
    set_secret_env,
    strip_output_only,
    with_tool_calling,
)
from skills.deploy.vllm_flags import VllmFlags, kv_flag, planner_dtype, planner_kv
from skills.errors import CloudUnavailable, InvalidInput, NotFound
from skills.ports import RevisionInfo, Runtime

ActionKind = Literal["deploy", "redeploy", "scale", "rollback", "destroy"]
# After the probe budget runs out Cloud Run reports the failure; wait a little longer than that.
WAIT_MARGIN_S = 300


def _validate(model: type[BaseModel], params: dict[str, Any], kind: str) -> Any:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "params"
            problems.append(f"{where}: {err['msg']}")
        raise InvalidInput(f"Invalid {kind} parameters: " + "; ".join(problems) + ".") from None


def _text(x: Any) -> str:
    if isinstance(x, str):
        return x
    for attr in ("summary", "description", "text", "reason"):
        val = getattr(x, attr, None)
        if isinstance(val, str) and val:
            return val
    return str(x)


def fit_lines(r: FitReport) -> list[str]:
    speed = f"~{r.est_tokens_per_s:.0f} tok/s single stream" if r.est_tokens_per_s else "no speed estimate"
    return [
        f"weights {r.weights_gib:.1f} GiB + overhead {r.overhead_gib:.1f} GiB on {r.request.gpu_count} x {r.gpu.name}",
        f"KV cache {r.kv_cache_tokens:,} tokens = {r.max_concurrency:g} full sequences at max-model-len "
        f"{r.request.max_model_len or 0:,}",
        f"host RAM to load {r.host_memory_gib:.1f} GiB; cold start ~{r.cold_start_s / 60:.0f} min",
        f"~${r.cost_per_hour_usd:.2f}/h; {speed}",
    ]


def _fit(model: str, o: dict[str, Any], memory: str | None) -> FitReport:
    return plan_fit(
        FitRequest(
            model=model,
            gpu=o["gpu"],
            gpu_count=o.get("gpu_count", 1),
            max_model_len=o.get("max_model_len"),
            gpu_memory_utilization=o.get("gpu_memory_utilization", 0.90),
            kv_cache_dtype=o.get("kv_cache_dtype", "auto"),
            cpu_offload_gb=o.get("cpu_offload_gb", 0) or 0,
            enforce_eager=bool(o.get("enforce_eager", False)),
            host_memory_gib=gib(memory) if memory else None,
            max_num_seqs=o.get("max_num_seqs"),
        )
    )


def _check_gpu(name: str) -> str:
    gpu = load_catalog().gpu(name)
    if not gpu.available_on_cloud_run:
        on_run = [g.name for g in load_catalog().gpus.values() if g.available_on_cloud_run]
        raise InvalidInput(f"{gpu.display} is not offered on Cloud Run.", f"Use one of: {', '.join(on_run)}.")
    return gpu.name


def _one_gpu(o: dict[str, Any]) -> None:
    if o.get("gpu_count", 1) > 1:
        raise InvalidInput(
            f"Cloud Run attaches one GPU per instance, so {o['gpu_count']} GPUs cannot be deployed there.",
            "Use gpu_count=1 with a model that fits one GPU (or the RTX PRO 6000's 96 GB).",
        )


def _apply_fit(plan: Plan, report: FitReport) -> None:
    plan.verdict = report.verdict
    plan.fit_lines = fit_lines(report)
    plan.fit_changes = [_text(c) for c in report.changes]
    plan.notes += [_text(n) for n in report.notes]
    # A Cloud Run deploy is offered Cloud Run configurations only (another platform's GPU is no alternative here).
    catalog = load_catalog()
    on_run = [
        a
        for a, r in zip(report.alternatives, report.alternative_requests, strict=False)
        if catalog.gpu(r.gpu).available_on_cloud_run
    ]
    if report.verdict == "does_not_fit" and on_run:
        plan.notes.append("Configurations that fit: " + "; ".join(_text(a) for a in on_run[:4]))
    plan.notes += [f":warning: {_text(w)}" for w in report.warnings]
    plan.cold_start_s = report.cold_start_s


def _probe_note(plan: Plan, cold_start_s: float | None, budget_s: int) -> None:
    if cold_start_s and cold_start_s * PROBE_MARGIN > budget_s:
        plan.notes.append(
            f"The startup probe allows {budget_s} s but the cold start is estimated at ~{cold_start_s:.0f} s "
            f"(Cloud Run caps the probe at 240 s + {MAX_THRESHOLD_WINDOW_S} s): the revision may be killed "
            "while "
            "loading. Prefer a smaller/QAT model or a faster weight source."
        )


async def plan_deploy(runtime: Runtime, env: DeployEnv, params: dict[str, Any], *, offline: bool = False) -> Plan:
    """`offline`: render without reading the running service (no credentials): nothing to diff against, and
    the plan says so. Only `/gemma config` asks for this; a plan meant for Confirm always compares."""
    p: DeployParams = _validate(DeployParams, params, "deploy")
    profile: DeployProfile = get_profile(p.profile)
    o = profile.model_dump(exclude={"name", "description", "model"}, exclude_none=True)
    o.update(p.set_fields())
    o.pop("profile", None)
    service = o.pop("service", None) or env.service
    o["gpu"] = _check_gpu(o["gpu"])
    _one_gpu(o)
    report = _fit(profile.model, o, o.get("memory"))
    # The planner's effective request already carries its required changes (fits_with_changes): render that.
    eff = report.request
    gpu = load_catalog().gpu(eff.gpu)
    base_gib = eff.host_memory_gib or report.recommended_memory_gib
    margin = load_catalog().planner.host_memory_margin
    hub_note = ""
    if env.model_bucket:
        memory_gib = math.ceil(base_gib)
    elif o.get("memory"):  # the user's size stands; say if the Hub files will not fit in it
        memory_gib = math.ceil(base_gib)
        files_gib = report.model.approx_disk_gb * 1e9 / 2**30
        if memory_gib < report.host_memory_gib + files_gib:
            hub_note = (
                f":warning: No MODEL_BUCKET: the ~{files_gib:.1f} GiB of weights pulled from the Hub sit in Cloud "
                f"Run's in-memory filesystem; {memory_gib} GiB leaves too little to load them (estimate). Raise "
                "--memory or set MODEL_BUCKET."
            )
    else:
        memory_gib, hub_note = memory_for_hub_weights(
            gpu, report.host_memory_gib, report.model.approx_disk_gb, margin, base_gib
        )
    memory = f"{memory_gib}Gi"
    floor = max(report.recommended_cpu, gpu.cloud_run.min_cpu if gpu.cloud_run else 0, _cpu_floor(memory))
    cpu = o.get("cpu") or str(floor)
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
            hf_token_secret=env.hf_token_secret,
            launch_stage=gpu.launch_stage,
            service_account=env.service_account,
        )
    except ValidationError as exc:
        raise InvalidInput(f"Cannot render the service: {exc.errors()[0]['msg']}.") from None
    spec = render_service(cfg)
    unread = ""
    try:
        current = await runtime.get_service_spec(service)
    except CloudUnavailable as exc:
        if not offline:
            raise
        current, unread = None, exc.message
    if current is not None:
        spec = merge_onto(current, spec)  # keep what the bot does not manage (service account, labels, ...)
    changes = diff_specs(strip_output_only(current) if current else None, spec)
    if current is not None and not changes:
        raise InvalidInput(
            f"Refused: `{service}` is already running this (`{profile.name}`, {cfg.model} on {cfg.gpu}, "
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
        gcloud=deploy_command(service, spec, env.region, env.project, update=current is not None),
        wait_budget_s=probe.budget_s + WAIT_MARGIN_S,
    )
    _apply_fit(plan, report)
    if unread:
        plan.summary = f"Render `{profile.name}` ({cfg.model} on {cfg.gpu_count} x {cfg.gpu}) for `{service}`"
        plan.notes.append(f"Not compared with the running service: {unread} The diff shows a new service.")
    plan.notes.append(
        f"Startup probe budget {probe.budget_s} s (initial {probe.initial_delay_s} s + "
        f"{probe.failure_threshold} x "
        f"{probe.period_s} s); memory {memory}, {cpu} vCPU; concurrency = --max-num-seqs {cfg.max_num_seqs}."
    )
    _probe_note(plan, report.cold_start_s, probe.budget_s)
    plan.notes.append(f"Image `{image}` ({origin}): " + " ".join(["vLLM and CUDA build checked.", *compat.notes]))
    if gpu.launch_stage != "GA":
        plan.notes.append(f"{gpu.display} is in Preview on Cloud Run: the service is deployed at launch stage BETA.")
    if not env.model_bucket:
        plan.notes.append(
            f"No MODEL_BUCKET: weights are pulled from the Hub with HF_TOKEN from secret `{env.hf_token_secret}`."
        )
    if hub_note:
        plan.notes.append(hub_note)
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


def _model_of(spec: dict[str, Any], flags: VllmFlags | None) -> str | None:
    """The catalog model a running service serves: our annotation, else its --model path/Hub id."""
    named = (spec.get("annotations") or {}).get(ANNOTATION_MODEL)
    catalog = load_catalog()
    if named and named in catalog.models:
        return str(named)
    path = flags.model_path if flags else None
    if not path:
        return None
    tail = path.rstrip("/").rsplit("/", 1)[-1].lower()
    for m in catalog.models.values():
        if m.hf_repo.lower() == path.lower() or m.hf_repo.rsplit("/", 1)[-1].lower() == tail:
            return m.name
    return None


def container_flags(container: dict[str, Any]) -> VllmFlags:
    """The vLLM flags a container runs with (InvalidInput naming the flag if one cannot be read)."""
    return VllmFlags.parse([str(a) for a in container.get("args") or []])


# Override fields that are vLLM flags of the same name (skills/deploy/vllm_flags.py VllmFlags).
_FLAG_FIELDS = ("max_model_len", "gpu_memory_utilization", "max_num_seqs", "cpu_offload_gb", "enforce_eager")


async def _current(runtime: Runtime, service: str) -> dict[str, Any]:
    spec = await runtime.get_service_spec(service)
    if spec is None:
        raise NotFound(f"Service `{service}` does not exist.", "Deploy one first: `/gemma deploy PROFILE`.")
    return spec


def _patch(spec: dict[str, Any], o: dict[str, Any]) -> dict[str, Any]:
    """Apply override fields to a copy of a running service's spec; returns the main container (patched)."""
    container = copy.deepcopy(main_container(spec))
    changes: dict[str, Any] = {f: o[f] for f in _FLAG_FIELDS if f in o}
    if "kv_cache_dtype" in o:
        changes["kv_cache_dtype"] = kv_flag(o["kv_cache_dtype"])
    if "dtype" in o:
        changes["dtype"] = o["dtype"]
    flags = VllmFlags.parse([str(a) for a in container.get("args") or []], replacing=frozenset(changes))
    flags = flags.with_(**changes)
    if "enable_tool_calling" in o:
        flags = with_tool_calling(flags, bool(o["enable_tool_calling"]))
    container["args"] = flags.to_args()
    tmpl = spec.setdefault("template", {})
    if "max_num_seqs" in o:
        tmpl["maxInstanceRequestConcurrency"] = o["max_num_seqs"]  # keep Cloud Run and vLLM in agreement
    if "gpu" in o:
        tmpl.setdefault("nodeSelector", {})["accelerator"] = o["gpu"]
    limits = container.setdefault("resources", {}).setdefault("limits", {})
    if "gpu_count" in o:
        limits["nvidia.com/gpu"] = str(o["gpu_count"])
    if "memory" in o:
        limits["memory"] = o["memory"]
        limits["cpu"] = o.get("cpu") or str(max(int(float(limits.get("cpu") or 0)), _cpu_floor(o["memory"])))
    elif "cpu" in o:
        limits["cpu"] = o["cpu"]
    scaling = tmpl.setdefault("scaling", {})
    if "min_instances" in o:
        scaling["minInstanceCount"] = o["min_instances"]
    if "max_instances" in o:
        scaling["maxInstanceCount"] = o["max_instances"]
    if "startup_failure_threshold" in o or "startup_period_s" in o:
        probe = dict(container.get("startupProbe") or {"httpGet": {"path": "/health", "port": 8080}})
        probe["periodSeconds"] = o.get("startup_period_s") or probe.get("periodSeconds") or 60
        probe["failureThreshold"] = o.get("startup_failure_threshold") or probe.get("failureThreshold") or 3
        probe["timeoutSeconds"] = min(int(probe.get("timeoutSeconds") or 1), probe["periodSeconds"])
        if probe["failureThreshold"] * probe["periodSeconds"] > MAX_THRESHOLD_WINDOW_S:
            raise InvalidInput(
                f"Startup probe {probe['failureThreshold']} x {probe['periodSeconds']} s exceeds Cloud Run's "
                f"{MAX_THRESHOLD_WINDOW_S} s for GPU services.",
                f"Use at most {MAX_THRESHOLD_WINDOW_S // probe['periodSeconds']} failures at that period.",
            )
        container["startupProbe"] = probe
    replace_container(spec, container)
    return container


def _effective(spec: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    """The planner's view of a service spec: GPU, memory and the vLLM flags it runs with."""
    flags = container_flags(container)
    limits = container.get("resources", {}).get("limits", {})
    out: dict[str, Any] = {
        "gpu": spec.get("template", {}).get("nodeSelector", {}).get("accelerator") or "nvidia-l4",
        "gpu_count": int(limits.get("nvidia.com/gpu") or 1),
        "enforce_eager": flags.enforce_eager,
        "dtype": planner_dtype(flags),
        "kv_cache_dtype": planner_kv(flags),
        "cpu_offload_gb": flags.cpu_offload_gb,
    }
    for field in ("max_model_len", "gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens"):
        if getattr(flags, field) is not None:
            out[field] = getattr(flags, field)
    return out


def _apply_fixes(spec: dict[str, Any], o: dict[str, Any], env: DeployEnv, notes: list[str]) -> dict[str, Any]:
    """The spec-level fixes (FUSE mount options, HF token, model and its source) on the main container."""
    container = copy.deepcopy(main_container(spec))
    if o.get("fix_fuse_mount_options"):
        fix_fuse_mounts(spec, container)
    if "model" in o or "model_source" in o:
        container["args"] = _switch_model(spec, container, container_flags(container), o, env, notes).to_args()
    if o.get("hf_token_from_secret"):
        _token_from_secret(container, env, notes)
    replace_container(spec, container)
    notes[:] = list(dict.fromkeys(notes))
    return container


def _token_from_secret(container: dict[str, Any], env: DeployEnv, notes: list[str]) -> None:
    literal = any(e.get("name") == "HF_TOKEN" and "value" in e for e in container.get("env") or [])
    if secret_env_of(container, "HF_TOKEN") is None:
        set_secret_env(container, "HF_TOKEN", env.hf_token_secret)
        if literal:
            notes.append("A literal HF_TOKEN env value is replaced by the Secret Manager reference (never a literal).")
    notes.append(
        f"HF_TOKEN comes from secret `{env.hf_token_secret}`: its account must have accepted the Gemma licence, "
        "and the service account needs roles/secretmanager.secretAccessor on it."
    )


def _switch_model(
    spec: dict[str, Any],
    container: dict[str, Any],
    flags: VllmFlags,
    o: dict[str, Any],
    env: DeployEnv,
    notes: list[str],
) -> VllmFlags:
    """--model from the catalog (its Hub id, or its folder on the bucket mount), with matching env."""
    current_path = flags.model_path or ""
    old = _model_of(spec, flags)
    name = o.get("model") or old
    if name is None:
        raise InvalidInput(
            "Cannot tell which catalog model this service runs, so its path cannot be changed.",
            "Pass `model=` with a catalog name (see `/gemma models`).",
        )
    catalog = load_catalog()
    m = catalog.model(name)
    source = o.get("model_source") or ("bucket" if current_path.startswith("/") else "hub")
    if source == "bucket":
        mounts = gcs_mounts(spec, container)
        under = [p for _, p in mounts if p and current_path.startswith(p.rstrip("/") + "/")]
        if under or mounts:
            root = (under or [p for _, p in mounts])[0]
        elif env.model_bucket:
            root = add_model_volume(spec, container, env.model_bucket)
            notes.append(f"Mounts bucket `{env.model_bucket}` read-only at {root} (uid=1001;gid=1001).")
        else:
            raise InvalidInput(
                "No model bucket is configured, so the weights cannot come from GCS.",
                "Set MODEL_BUCKET to the bucket holding the weights, or pull from the Hub (`model_source=hub`).",
            )
        folder = m.hf_repo.rsplit("/", 1)[-1]
        tail = current_path.rstrip("/").rsplit("/", 1)[-1]
        if tail.lower() == folder.lower():
            folder = tail  # keep the bucket's letter case: GCS paths are case-sensitive
        path = f"{root.rstrip('/')}/{folder}"
        set_env(container, "HF_HUB_OFFLINE", "1")
        notes.append(f"Expects the weights under `{path}` in the bucket (as `hf download` lays them out).")
    else:
        path = m.hf_repo
        for var in OFFLINE_ENV:  # offline mode blocks the download
            set_env(container, var, None)
        _token_from_secret(container, env, notes)
    old_args = catalog.models[old].vllm_args if old in catalog.models else []
    spec.setdefault("annotations", {})[ANNOTATION_MODEL] = m.name
    return set_model(flags, path, old_args, m.vllm_args)


def _probe_budget(container: dict[str, Any]) -> int:
    p = container.get("startupProbe") or {}
    return int(p.get("initialDelaySeconds", 0)) + int(p.get("failureThreshold", 3)) * int(p.get("periodSeconds", 10))


async def plan_redeploy(runtime: Runtime, env: DeployEnv, params: dict[str, Any]) -> Plan:
    p: RedeployParams = _validate(RedeployParams, params, "redeploy")
    service = p.service or env.service
    current = await _current(runtime, service)
    o = p.set_fields()
    o.pop("service", None)
    if not o:
        raise InvalidInput(
            "A redeploy needs at least one change.", "e.g. `max_model_len=8192` or `enforce_eager=true`."
        )
    if "gpu" in o:
        o["gpu"] = _check_gpu(o["gpu"])
    _one_gpu(o)
    new = strip_output_only(current)
    notes: list[str] = []
    _patch(new, o)
    container = _apply_fixes(new, o, env, notes)
    # A redeploy moves traffic to the new revision once it is ready (not before), even after a rollback pin.
    new["traffic"] = [{"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST", "percent": 100}]
    report: FitReport | None = None
    model = _model_of(new, container_flags(container))
    if model is None:
        notes.append("Could not tell which catalog model this service runs, so the capacity check was skipped.")
    else:
        limits = container.get("resources", {}).get("limits", {})
        report = _fit(model, _effective(new, container), limits.get("memory"))
        if report.verdict == "fits_with_changes":
            # Apply what the planner requires, as a deploy would, so the plan is one that works.
            eff = report.request
            fix: dict[str, Any] = {"max_model_len": eff.max_model_len, "enforce_eager": eff.enforce_eager}
            if eff.kv_cache_dtype == "fp8":
                fix["kv_cache_dtype"] = "fp8"
            if eff.dtype == "half":
                fix["dtype"] = "half"  # the GPU has no bf16
            if eff.host_memory_gib and eff.host_memory_gib > gib(limits.get("memory") or "0Gi"):
                fix["memory"] = f"{math.ceil(eff.host_memory_gib)}Gi"
            container = _patch(new, fix)
    _check_running_image(new, container, model, o)
    changed = ", ".join(f"{k}={v}" for k, v in o.items())
    budget = _probe_budget(container)
    changes = diff_specs(strip_output_only(current), new)
    if not changes:
        raise InvalidInput(
            f"This redeploy would change nothing: `{service}` already runs with {changed}.",
            "Check `/gemma config` against the logs; the cause may be outside the service (bucket contents, IAM, "
            "the token's access).",
        )
    plan = Plan(
        kind="redeploy",
        service=service,
        summary=f"Redeploy `{service}` with {changed}",
        params=p.model_dump(exclude_none=True),
        spec=new,
        base_fingerprint=fingerprint(current),
        changes=changes,
        gcloud=deploy_command(service, new, env.region, env.project, update=True),
        wait_budget_s=budget + WAIT_MARGIN_S,
        notes=notes,
    )
    if report is not None:
        _apply_fit(plan, report)
        _probe_note(plan, report.cold_start_s, budget)
    return plan


def _check_running_image(spec: dict[str, Any], container: dict[str, Any], model: str | None, o: dict[str, Any]) -> None:
    """A redeploy onto another GPU or model keeps the running image: refuse it when that image cannot serve the
    new model or run on the new GPU's driver, and Cloud Run's CPU/memory minimums for the GPU."""
    gpu = load_catalog().gpu(spec.get("template", {}).get("nodeSelector", {}).get("accelerator") or "nvidia-l4")
    limits = container.get("resources", {}).get("limits", {})
    if {"gpu", "cpu", "memory"} & o.keys() and limits.get("cpu") and limits.get("memory"):
        check_gpu_minimums(gpu, str(limits["cpu"]), str(limits["memory"]))
    if ("gpu" in o or "model" in o) and model is not None:
        image = str(container.get("image", ""))
        require_compatible(image, load_catalog().model(model).family, gpu.name, "the running service's image")
    if gpu.launch_stage != "GA":
        spec["launchStage"] = gpu.launch_stage


def _cpu_floor(memory: str) -> int:
    table = load_catalog().planner.cloud_run.cpu_for_memory
    g = gib(memory)
    fits = [c for c, max_mem in sorted(table.items()) if max_mem >= g]
    return fits[0] if fits else max(table)


async def plan_scale(runtime: Runtime, env: DeployEnv, params: dict[str, Any]) -> Plan:
    p: ScaleParams = _validate(ScaleParams, params, "scale")
    service = p.service or env.service
    current = await _current(runtime, service)
    new = strip_output_only(current)
    new.setdefault("template", {}).setdefault("scaling", {}).update(
        {"minInstanceCount": p.min_instances, "maxInstanceCount": p.max_instances}
    )
    plan = Plan(
        kind="scale",
        service=service,
        summary=f"Scale `{service}` to min {p.min_instances} / max {p.max_instances} instances",
        params=p.model_dump(exclude_none=True),
        spec=new,
        base_fingerprint=fingerprint(current),
        changes=diff_specs(strip_output_only(current), new),
        gcloud=scale_command(service, p.min_instances, p.max_instances, env.region, env.project),
        wait_budget_s=2400,
    )
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
    p: RollbackParams = _validate(RollbackParams, params, "rollback")
    service = p.service or env.service
    current = await _current(runtime, service)
    revisions = await runtime.list_revisions(service, limit=20)
    target = pick_rollback_target(revisions, p.revision)
    new = strip_output_only(current)
    new["traffic"] = [{"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION", "revision": target.name, "percent": 100}]
    plan = Plan(
        kind="rollback",
        service=service,
        summary=f"Roll `{service}` back: 100% of traffic to `{target.name}`",
        params=p.model_dump(exclude_none=True),
        spec=new,
        target_revision=target.name,
        base_fingerprint=fingerprint(current),
        changes=diff_specs(strip_output_only(current), new),
        gcloud=rollback_command(service, target.name, env.region, env.project),
        wait_budget_s=600,
    )
    plan.notes.append("Traffic is pinned to that revision: later deploys by the bot move it back to latest-ready.")
    return plan


async def plan_destroy(runtime: Runtime, env: DeployEnv, params: dict[str, Any]) -> Plan:
    p: DestroyParams = _validate(DestroyParams, params, "destroy")
    service = p.service or env.service
    current = await _current(runtime, service)
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


_BUILDERS = {
    "deploy": plan_deploy,
    "redeploy": plan_redeploy,
    "scale": plan_scale,
    "rollback": plan_rollback,
    "destroy": plan_destroy,
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
) -> Plan:
    """`offline` (deploy only): see plan_deploy."""
    builder = _BUILDERS.get(kind)
    if builder is None:
        raise InvalidInput(f"Unknown action `{kind}`.", "Known: " + ", ".join(sorted(_BUILDERS)) + ".")
    if not isinstance(params, dict):
        raise InvalidInput(f"Parameters for {kind} must be an object.")
    plan = await (
        plan_deploy(runtime, env, params, offline=True)
        if offline and kind == "deploy"
        else builder(runtime, env, params)
    )
    plan.created_by, plan.channel_id = user_id, channel_id
    return plan

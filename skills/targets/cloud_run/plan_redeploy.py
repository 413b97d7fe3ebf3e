"""The plan for a redeploy: a patch of the running service (flags, resources, model, fixes) with its diff."""

from __future__ import annotations

import copy
import math
from typing import Any

from skills.actions.params import RedeployParams
from skills.capacity.fit import FitReport, load_catalog
from skills.capacity.image_compat import require_compatible
from skills.errors import InvalidInput
from skills.ports import Runtime
from skills.serving.sizes import gib
from skills.serving.vllm_flags import VllmFlags, kv_flag, planner_dtype, planner_kv
from skills.targets.cloud_run.diff import diff_specs, fingerprint
from skills.targets.cloud_run.gcloud import update_commands
from skills.targets.cloud_run.plan_common import (
    WAIT_MARGIN_S,
    apply_fit,
    check_gpu,
    container_flags,
    cpu_floor,
    current_spec,
    fit_for,
    one_gpu,
    probe_note,
    serving_base,
    validate_params,
)
from skills.targets.cloud_run.render import (
    ANNOTATION_MODEL,
    MAX_THRESHOLD_WINDOW_S,
    OFFLINE_ENV,
    add_model_volume,
    check_gpu_minimums,
    fix_fuse_mounts,
    gcs_mounts,
    main_container,
    replace_container,
    secret_env_of,
    set_env,
    set_model,
    set_secret_env,
    strip_output_only,
)
from skills.targets.env import DeployEnv
from skills.targets.plan import Plan
from skills.targets.serving_flags import with_tool_calling

# Override fields that are vLLM flags of the same name (skills/serving/vllm_flags.py VllmFlags).
_FLAG_FIELDS = ("max_model_len", "gpu_memory_utilization", "max_num_seqs", "cpu_offload_gb", "enforce_eager")


def model_of(spec: dict[str, Any], flags: VllmFlags | None) -> str | None:
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
    if "image" in o:
        container["image"] = o["image"]  # a catalog image (RedeployParams); checked in _check_running_image
    limits = container.setdefault("resources", {}).setdefault("limits", {})
    if "gpu_count" in o:
        limits["nvidia.com/gpu"] = str(o["gpu_count"])
    if "memory" in o:
        limits["memory"] = o["memory"]
        limits["cpu"] = o.get("cpu") or str(max(int(float(limits.get("cpu") or 0)), cpu_floor(o["memory"])))
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


def effective_settings(spec: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
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
    old = model_of(spec, flags)
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


def probe_budget(container: dict[str, Any]) -> int:
    p = container.get("startupProbe") or {}
    return int(p.get("initialDelaySeconds", 0)) + int(p.get("failureThreshold", 3)) * int(p.get("periodSeconds", 10))


def _check_running_image(spec: dict[str, Any], container: dict[str, Any], model: str | None, o: dict[str, Any]) -> None:
    """A redeploy onto another GPU or model keeps the running image, and one that changes the image takes a catalog
    image: refuse either when the image cannot serve the model or run on the GPU's driver; and Cloud Run's
    CPU/memory minimums for the GPU."""
    gpu = load_catalog().gpu(spec.get("template", {}).get("nodeSelector", {}).get("accelerator") or "nvidia-l4")
    limits = container.get("resources", {}).get("limits", {})
    if {"gpu", "cpu", "memory"} & o.keys() and limits.get("cpu") and limits.get("memory"):
        check_gpu_minimums(gpu, str(limits["cpu"]), str(limits["memory"]))
    image = str(container.get("image", ""))
    if "image" in o and model is None:
        raise InvalidInput(
            "Cannot tell which catalog model this service runs, so the new image cannot be checked against it.",
            "Pass `model=` with a catalog name together with `image=`.",
        )
    if ("gpu" in o or "model" in o or "image" in o) and model is not None:
        origin = "the requested image" if "image" in o else "the running service's image"
        require_compatible(image, load_catalog().model(model).family, gpu.name, origin)
    if gpu.launch_stage != "GA":
        spec["launchStage"] = gpu.launch_stage


async def plan_redeploy(runtime: Runtime, env: DeployEnv, params: dict[str, Any]) -> Plan:
    p: RedeployParams = validate_params(RedeployParams, params, "redeploy")
    service = p.service or env.service
    current = await current_spec(runtime, service)
    o = p.set_fields()
    o.pop("service", None)
    on_serving = bool(o.pop("on_serving", False))
    if not o:
        raise InvalidInput(
            "A redeploy needs at least one change.", "e.g. `max_model_len=8192` or `enforce_eager=true`."
        )
    if "gpu" in o:
        o["gpu"] = check_gpu(o["gpu"])
    one_gpu(o)
    # A fix is for the configuration that failed, so by default a redeploy patches the service's template; when
    # that is not what serves, the plan says so and offers the same change on the serving configuration.
    base = await serving_base(runtime, service, current)
    other = base.spec is not current
    new = strip_output_only(base.spec if on_serving else current)
    notes: list[str] = []
    if on_serving and base.note:
        notes.append(base.note)
    elif other:
        notes.append(
            f":warning: Builds on the service's template, which is revision `{base.latest}`'s ({base.latest_state}), "
            f"not on the configuration of `{base.serving}`, which serves."
        )
    _patch(new, o)
    container = _apply_fixes(new, o, env, notes)
    # A redeploy moves traffic to the new revision once it is ready (not before), even after a rollback pin.
    new["traffic"] = [{"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST", "percent": 100}]
    report: FitReport | None = None
    added: dict[str, Any] = {}
    model = model_of(new, container_flags(container))
    if model is None:
        notes.append("Could not tell which catalog model this service runs, so the capacity check was skipped.")
    else:
        limits = container.get("resources", {}).get("limits", {})
        # Offline mode means the weights are read from the bucket's mount; otherwise they are pulled from the Hub
        # into Cloud Run's in-memory filesystem, which counts against the memory limit (fit sizes for it).
        offline = any(e.get("name") in OFFLINE_ENV and e.get("value") == "1" for e in container.get("env") or [])
        settings = {
            **effective_settings(new, container),
            "vllm_image": container.get("image") or None,
            "weights_from_hub": not offline,
        }
        report = fit_for(model, settings, limits.get("memory"))
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
            before = effective_settings(new, container) | {"memory": limits.get("memory")}
            container = _patch(new, fix)
            after = effective_settings(new, container) | {"memory": limits.get("memory")}
            added = {k: v for k, v in after.items() if before.get(k) != v and (k not in o or o[k] != v)}
    _check_running_image(new, container, model, o)
    changed = ", ".join(f"{k}={v}" for k, v in o.items())
    budget = probe_budget(container)
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
        added=added,
        spec=new,
        base_fingerprint=fingerprint(current),
        changes=changes,
        gcloud=update_commands(service, strip_output_only(current), new, env.region, env.project),
        wait_budget_s=budget + WAIT_MARGIN_S,
        notes=notes,
    )
    if report is not None:
        apply_fit(plan, report)
        probe_note(plan, report.cold_start_s, budget)
    if added:
        # What is confirmed is what the button asked for: a change the planner has to extend is not run as if it
        # were the one asked; the extended one is offered under a label naming every change.
        more = ", ".join(f"{k}={v}" for k, v in added.items())
        plan.refusal = (
            f"As asked ({changed}) this does not fit; the capacity planner would also set {more}. "
            "Plan that instead (its button names every change), or pick another fix."
        )
        plan.offers.append(({**p.model_dump(exclude_none=True), **added}, ""))
    if other and not on_serving:
        plan.offers.append(({**p.model_dump(exclude_none=True), "on_serving": True}, "On the serving revision"))
    return plan

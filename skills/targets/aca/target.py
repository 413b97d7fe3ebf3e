"""Azure Container Apps serverless GPUs as a serving target: one container app per service, in one managed
environment (workload profiles) of one resource group, through Azure Resource Manager (Microsoft.App).

What it has (TargetCapabilities): revisions (every template change makes an immutable revision; in Multiple
revision mode the old one keeps serving until traffic moves), traffic split by revision weights and labels (scale,
rollback, promote and canary: skills/targets/aca/traffic.py) and scale to zero (min replicas 0). A deploy plan
runs the capacity planner on the GPU of the ACA workload profile, with the profile's vCPU and memory
(skills/capacity/aca_catalog.py), and checks what only Azure can answer before Confirm: the environment has the
GPU workload profile, the region offers it, the subscription's GPU quota there. While it runs, the watch follows
the new revision (Provisioning, then its replica starting, then vLLM loading until the startup probe passes on
/health). Deleting the app is a destroy, confirmed by typing its name.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from skills.actions.params import DeployParams, DestroyParams, RedeployParams
from skills.capacity.aca_catalog import AcaCatalog, WorkloadProfile, load_aca_catalog
from skills.capacity.aca_prices import aca_price
from skills.capacity.catalog import load_catalog
from skills.capacity.cost import CostReport, aca_cost
from skills.capacity.fit_types import FitRequest, ServingSummary
from skills.capacity.image_compat import load_image_data
from skills.capacity.prices import format_usd
from skills.durations import format_duration
from skills.errors import InvalidInput, NotFound
from skills.ports import (
    Condition,
    Logs,
    Metrics,
    ModelServer,
    OperationProgress,
    QuotaReader,
    RevisionInfo,
    ServiceInfo,
    TrafficTarget,
)
from skills.serving.changes import FieldChange
from skills.serving.profiles import get_profile
from skills.serving.vllm_flags import VllmFlags
from skills.targets.aca import spec as aspec
from skills.targets.aca.api import AppInfo, AppRevision, ContainerAppsApi
from skills.targets.aca.az import az_create, az_update
from skills.targets.aca.checks import aca_preflight
from skills.targets.aca.probe import limits_text, startup_probe
from skills.targets.aca.traffic import AcaScope, apply_canary, plan_promote, plan_rollback, plan_scale
from skills.targets.canary import canary_percent
from skills.targets.env import DeployEnv
from skills.targets.plan import Plan
from skills.targets.plan_inputs import ActionKind, as_text, fit_for, fit_lines, validate_params
from skills.targets.port import ExportedSpec, ProgressStages, Stage, TargetCapabilities
from skills.targets.preflight_check import PreflightTarget

KIND = "azure-container-apps"
# ACA does not document its hosts' NVIDIA driver (aca.yaml `driver`): the CUDA 12.9 build of the pinned release,
# which any 12.x driver runs through CUDA minor-version compatibility, rather than the CUDA 13.0 build that needs a
# 580 driver (skills/data/vllm_images.yaml).
DEFAULT_IMAGE = next(
    name
    for name, img in load_image_data().images.items()
    if img.cuda.startswith("12.") and img.vllm == max(i.vllm for i in load_image_data().images.values())
)
DISPLAY = "Azure Container Apps"
_OP_POLL_S = 0.05  # how often wait_operation looks at the poller (no request: the poller polls ARM itself)
WAIT_MARGIN_S = 120  # past the startup probe's budget: ACA restarts the replica, the watch says so
_NOT_HERE: dict[str, str] = {
    # Settings of other targets a deploy may carry (skills/actions/params.py Overrides), refused rather than ignored.
    "accelerator_type": "--accelerator-type is a Cloud TPU slice",
    "zone": "--zone is a Cloud TPU zone; the app runs in its environment's region",
    "provisioning": "--provisioning is a Cloud TPU setting",
    "reservation": "--reservation is a Cloud TPU setting",
    "cpu": "--cpu: an ACA GPU replica gets its workload profile's vCPU",
    "memory": "--memory: an ACA GPU replica gets its workload profile's memory",
    "concurrency": "--concurrency is Cloud Run's; on ACA vLLM's --max-num-seqs bounds the batch",
}


# Redeploy fixes that are Cloud Run's (a GCS FUSE mount, Secret Manager, a bucket): refused on ACA, not ignored.
_NOT_ACA_FIXES: dict[str, str] = {
    "fix_fuse_mount_options": "fix_fuse_mount_options is a Cloud Run GCS FUSE mount's",
    "hf_token_from_secret": "hf_token_from_secret reads Secret Manager (Cloud Run)",
    "model_source": "model_source chooses a Cloud Run bucket mount or the Hub",
    "model": "model: an ACA app serves its profile's model; deploy another profile to change it",
}


@dataclass
class AcaOptions:
    """The deployment settings the ACA target needs (bot/settings.py: AZURE_*, ACA_*)."""

    subscription: str = ""
    resource_group: str = ""
    environment: str = ""
    location: str = ""  # the environment's region (ARM location name); read from the environment when empty
    service: str = "vllm-gemma4-aca"  # the app name an ACA deploy gets unless it names one
    api_key_secret_url: str = ""  # Key Vault secret URL holding vLLM's --api-key
    identity: str = ""  # user-assigned managed identity resource ID that reads it

    @property
    def environment_id(self) -> str:
        return (
            f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group}/providers/Microsoft.App/"
            f"managedEnvironments/{self.environment}"
        )


class AcaTarget:
    kind = KIND
    display = DISPLAY
    # Revisions: immutable, listed, rolled back to by weight; traffic split by weights and labels (traffic.py).
    capabilities = TargetCapabilities(revisions=True, traffic_split=True, scale_to_zero=True)

    def __init__(
        self,
        api: ContainerAppsApi,
        model_server: ModelServer,
        options: AcaOptions,
        *,
        logs: Logs | None = None,
        metrics: Metrics | None = None,
        endpoint_of: Callable[[str], str] | None = None,
        catalog: AcaCatalog | None = None,
    ) -> None:
        self.api = api
        self.model_server = model_server
        self.options = options
        self.logs = logs
        self.metrics = metrics
        self.aca = catalog or load_aca_catalog()
        # How the bot reaches an app: its ingress FQDN over HTTPS (the sandbox maps it to a local address).
        self.endpoint_of = endpoint_of or (lambda fqdn: f"https://{fqdn}")
        self._puts: dict[str, str] = {}  # a write's operation handle -> its app (watched until a replica runs)

    # --- reading --------------------------------------------------------------------------------------------

    def _check_name(self, name: str) -> None:
        why = self.aca.app_name.check(name)
        if why is not None:
            raise InvalidInput(
                f"Not a valid container app name: {why}.", f"({self.aca.cite(self.aca.app_name.source)})"
            )

    async def _app(self, name: str) -> AppInfo | None:
        if self.aca.app_name.check(name) is not None:
            return None  # no app can have that name: nothing to ask
        return await self.api.get_app(name)

    def _profile_of(self, app: AppInfo) -> WorkloadProfile | None:
        planned = (app.body.get("tags") or {}).get(aspec.TAG_TYPE, "")
        return self.aca.profiles.get(planned)

    async def get_service(self, name: str) -> ServiceInfo:
        app = await self._app(name)
        if app is None:
            raise NotFound(f"Service `{name}` does not exist (no container app of that name in this environment).")
        # Judged by the revision traffic follows: the latest (ready once its replica is) unless traffic is pinned
        # to another revision (a rollback, a promote), whose own state and replica range are what serves.
        pinned = _pinned(app)
        judged_name = pinned or app.latest_revision
        judged = await self.api.get_revision(name, judged_name) if judged_name else None
        ready, cond = _readiness(app, judged)
        body = app.body
        container = aspec.container_of(body)
        lo, hi = aspec.scale_of({"properties": {"template": judged.template}} if pinned and judged else body)
        resources = container.get("resources") or {}
        profile = self._profile_of(app)
        gpu = load_catalog().gpus.get(profile.gpu) if profile else None
        return ServiceInfo(
            name=name,
            uri=self.endpoint_of(app.fqdn) if app.fqdn else "",
            ready=ready,
            terminal_condition=cond,
            conditions=[cond],
            latest_created_revision=app.latest_revision,
            latest_ready_revision=app.latest_ready_revision,
            min_instances=lo,
            max_instances=hi,
            gpu_type=profile.gpu if profile else "",
            gpu_count=profile.gpu_count if profile else 0,
            accelerator=(
                f"workload profile `{app.workload_profile}` ({profile.type}): {profile.gpu_count} x "
                f"{gpu.display if gpu else profile.gpu}, {profile.vcpu:g} vCPU, {profile.memory_gib:g} GiB per replica"
                if profile
                else f"workload profile `{app.workload_profile}`"
            ),
            cpu=f"{float(resources.get('cpu', 0) or 0):g}" if resources.get("cpu") else "",
            memory=str(resources.get("memory", "")),
            image=str(container.get("image", "")),
            args=[str(a) for a in container.get("args") or []],
            traffic=self._traffic(app),
            requires_auth=False,  # vLLM's --api-key, from Key Vault
            spec=body,
            scaling_unit="replica",
        )

    def _traffic(self, app: AppInfo) -> list[TrafficTarget]:
        """Ingress's weights as status shows them: the latest-revision weight is the latest ready revision's
        (traffic.weights); a label gives its revision a host of its own (the canary comparison reads it)."""
        ingress = ((app.body.get("properties") or {}).get("configuration") or {}).get("ingress") or {}
        latest = app.latest_ready_revision or ""
        out = []
        for t in ingress.get("traffic") or []:
            is_latest = bool(t.get("latestRevision"))
            label = str(t.get("label", "") or "")
            host = self.aca.traffic.label_fqdn(app.name, label, app.fqdn) if label and app.fqdn else ""
            out.append(
                TrafficTarget(
                    revision=latest if is_latest else str(t.get("revisionName", "")),
                    latest=is_latest,
                    percent=int(t.get("weight", 0) or 0),
                    tag=label,
                    uri=self.endpoint_of(host) if host else "",
                )
            )
        return out

    async def get_service_spec(self, name: str) -> dict[str, Any] | None:
        app = await self._app(name)
        return app.body if app is not None else None

    async def list_revisions(self, service: str, limit: int = 10) -> list[RevisionInfo]:
        if await self._app(service) is None:
            raise NotFound(f"Service `{service}` does not exist.")
        revs = await self.api.list_revisions(service)
        revs.sort(key=lambda r: r.created.timestamp() if r.created else 0.0, reverse=True)
        return [_revision_info(r) for r in revs[:limit]]

    async def get_revision(self, service: str, revision: str) -> RevisionInfo:
        rev = await self.api.get_revision(service, revision)
        if rev is None:
            raise NotFound(f"Revision `{revision}` of `{service}` does not exist.")
        return _revision_info(rev)

    # --- writes ---------------------------------------------------------------------------------------------

    async def apply_service(self, name: str, spec: dict[str, Any], *, create: bool) -> str:
        self._check_name(name)
        current = None if create else await self.api.get_app(name)
        handle = await self.api.begin_put_app(name, aspec.sendable(spec))
        template = (spec.get("properties") or {}).get("template")
        if current is None or (current.body.get("properties") or {}).get("template") != template:
            self._puts[handle] = name  # a new revision: watched until a replica runs (traffic-only writes are not)
        return handle

    async def delete_service(self, name: str) -> str:
        if await self._app(name) is None:
            raise NotFound(f"Service `{name}` does not exist.")
        return await self.api.begin_delete_app(name)

    async def wait_operation(self, operation: str, timeout_s: float) -> OperationProgress:
        # Up to timeout_s for ARM's operation to end (the SDK's poller runs in its own task meanwhile): the watch
        # polls this in a loop and relies on it to wait, as Cloud Run's does.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        state = await self.api.operation(operation)
        while not state.done and loop.time() < deadline:
            await asyncio.sleep(min(_OP_POLL_S, max(deadline - loop.time(), 0.0)))
            state = await self.api.operation(operation)
        if not state.done:
            return OperationProgress(done=False, phase=f"ARM operation {state.status}")
        if state.status != "Succeeded":
            return OperationProgress(done=True, phase=state.status, error=state.error)
        app_name = self._puts.get(operation)
        waiting = await self._revision_waiting(app_name) if app_name is not None else ""
        if waiting:
            return OperationProgress(done=False, phase=waiting)
        self._puts.pop(operation, None)
        return OperationProgress(done=True, phase=state.status)

    async def _revision_waiting(self, name: str) -> str:
        """What the new revision still waits for before its start can be watched ('' when nothing). A revision
        with min replicas 0 runs no replica until a request comes (ACA's HTTP scale rule), so nothing would show
        whether vLLM starts: the watch sends one request through ingress (it scales back to zero after the
        cooldown)."""
        app = await self.api.get_app(name)
        if app is None or not app.latest_revision:
            return ""
        rev = await self.api.get_revision(name, app.latest_revision)
        if rev is None or rev.provisioning_state == "Failed":
            return ""
        if rev.provisioning_state == "Provisioning":
            return "ARM operation Succeeded; revision provisioning"
        lo, _ = aspec.scale_of(app.body)
        if lo > 0 or rev.replicas > 0 or not (rev.fqdn or app.fqdn):
            return ""
        # Through the revision's own host, which reaches it whatever the weights say (a canary's latest-revision
        # weight waits for it to be ready): answered or not, the request starts a replica.
        await self.model_server.health(self.endpoint_of(rev.fqdn or app.fqdn))
        return (
            "revision created; min replicas 0 and no traffic, so no replica runs: one request to the app starts one, "
            "to see vLLM start"
        )

    async def aclose(self) -> None:
        for part in (self.api, self.logs, self.metrics):  # adapters with connections close them
            close = getattr(part, "aclose", None)
            if close is not None:
                await close()

    # --- plans ----------------------------------------------------------------------------------------------

    async def plan(
        self,
        kind: ActionKind,
        params: dict[str, Any],
        env: DeployEnv,
        *,
        offline: bool = False,
        quotas: QuotaReader | None = None,
    ) -> Plan:
        scope = AcaScope(self.api, self.aca, self.options.resource_group, KIND, DISPLAY)
        if kind == "deploy":
            # `canary` is no setting of the app: the deploy is planned without it, then split (traffic.py).
            canary = params.get("canary") if not offline else None
            plan = await self._plan_deploy({k: v for k, v in params.items() if k != "canary"}, env, offline)
            if canary is not None:
                plan.canary = (await apply_canary(scope, plan, canary_percent(canary))).model_dump()
            return plan
        if kind == "destroy":
            return await self._plan_destroy(params)
        if kind == "redeploy":
            return await self._plan_redeploy(params, env)
        service = params.get("service") or self.options.service
        if kind == "scale":
            return await plan_scale(scope, service, params)
        if kind == "rollback":
            return await plan_rollback(scope, service, params)
        if kind == "promote":
            return await plan_promote(scope, service, params)
        raise InvalidInput(
            f"This bot does not plan a {kind} of an {DISPLAY} app.",
            "Deploy the profile again with the changed settings (`/gemma deploy PROFILE --flag value`).",
        )

    def _profile_for(self, gpu_name: str, wanted: str | None) -> WorkloadProfile:
        """The ACA workload profile a deploy runs on: the one the profile names, else the serverless profile that
        carries its GPU."""
        if wanted:
            return self.aca.profile(wanted)
        found = self.aca.default_profile_for(gpu_name)
        if found is None:
            gpus = sorted({p.gpu for p in self.aca.profiles.values()})
            raise InvalidInput(
                f"No {DISPLAY} GPU workload profile carries `{gpu_name}`.",
                "GPUs on ACA: " + ", ".join(f"`{g}`" for g in gpus) + " (skills/data/aca.yaml).",
            )
        return found

    def _check_args(self, p: DeployParams) -> None:
        values = p.model_dump()
        bad = [why for name, why in _NOT_HERE.items() if values.get(name) is not None]
        if p.gpu_count not in (None, 1):
            bad.append("--gpu-count: the GPU count comes with the workload profile")
        if bad:
            raise InvalidInput(
                f"Not settings of an {DISPLAY} deploy: " + "; ".join(bad) + ".",
                "An ACA deploy takes `--gpu`, `--max-model-len`, `--gpu-memory-utilization`, `--kv-cache-dtype`, "
                "`--max-num-seqs`, `--min-instances`/`--max-instances` (replicas), the startup probe and `--service`.",
            )
        self._check_name(p.service or self.options.service)
        if not (self.options.api_key_secret_url and self.options.identity):
            raise InvalidInput(
                "vLLM on ACA needs an API key from Key Vault: ACA_API_KEY_SECRET_URL (the secret's URL) and "
                "ACA_IDENTITY (a user-assigned identity with Key Vault Secrets User on that vault) are not set.",
                "Set both (README, Azure Container Apps); the app's ingress is external, so vLLM must check a key.",
            )

    async def _plan_deploy(self, params: dict[str, Any], env: DeployEnv, offline: bool) -> Plan:
        p: DeployParams = validate_params(DeployParams, params, "deploy")
        profile = get_profile(p.profile)
        self._check_args(p)
        service = p.service or self.options.service
        gpu_name = load_catalog().gpu(p.gpu or profile.gpu).name
        wp = self._profile_for(gpu_name, None if p.gpu else profile.aca_profile)
        environment = None if offline else await self.api.get_environment()
        location = self.options.location or (environment.location if environment else "")
        o = profile.model_dump(exclude={"name", "description", "model", "target", "aca_profile"}, exclude_none=True)
        o.update(p.set_fields())
        for k in ("profile", "service"):
            o.pop(k, None)
        o.update(gpu=wp.gpu, cpu=f"{wp.vcpu:g}", region=location)
        report = fit_for(profile.model, {**o, "weights_from_hub": True}, f"{wp.memory_gib:g}Gi")
        eff = report.request
        image = env.image or profile.image or DEFAULT_IMAGE
        probe = startup_probe(report.cold_start_s, self.aca, p.startup_failure_threshold, p.startup_period_s)
        in_env = [
            w for w in (environment.workload_profiles if environment else []) if w.workload_profile_type == wp.type
        ]
        cfg = aspec.AcaDeployConfig(
            service=service,
            profile=profile.name,
            model=report.model.name,
            hf_repo=report.model.hf_repo,
            model_args=list(report.model.vllm_args),
            gpu=eff.gpu,
            gpu_count=wp.gpu_count,
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
            image=image,
            hf_token_secret="",
            location=location or "LOCATION",
            environment_id=self.options.environment_id,
            workload_profile_name=in_env[0].name if in_env else wp.type,
            workload_profile_type=wp.type,
            cpu=wp.vcpu,
            memory_gib=wp.memory_gib,
            probe=probe,
            api_key_secret_url=self.options.api_key_secret_url,
            identity=self.options.identity,
        )
        spec = aspec.render_app(cfg)
        current = None if offline else await self._app(service)
        if current is not None:
            spec = _merge_onto(current.body, spec)
            if not aspec.diff(current.body, spec):
                raise InvalidInput(
                    f"Refused: `{service}` is already running this (`{profile.name}`, {cfg.model} on {wp.type}, "
                    f"image `{image}`): the deploy would change nothing.",
                    "To restart it, redeploy with a change; to check its health, `/gemma status`.",
                )
        what = f"{cfg.model} on {wp.gpu_count} x {wp.gpu}, workload profile {wp.type}"
        plan = Plan(
            kind="deploy",
            service=service,
            summary=f"Deploy `{profile.name}` ({what}) to {DISPLAY} app `{service}`"
            + (" (new app)" if current is None else ""),
            params=p.model_dump(exclude_none=True),
            create=current is None,
            spec=spec,
            base_fingerprint=aspec.fingerprint(current.body if current else None),
            changes=aspec.diff(current.body if current else None, spec),
            gcloud=(
                az_create(service, spec, self.options.resource_group, self.options.environment)
                if current is None
                else az_update(service, current.body, spec, self.options.resource_group)
            ),
            cli="az",
            target=KIND,
            wait_budget_s=float(probe.budget_s + WAIT_MARGIN_S),
        )
        # Priced from the one ACA price function (fit and /gemma cost use it too): the profile in its region.
        plan.verdict = report.verdict
        plan.fit_lines = fit_lines(report)
        plan.fit_changes = [as_text(c) for c in report.changes]
        plan.notes += [as_text(n) for n in report.notes]
        plan.notes += [f":warning: {as_text(w)}" for w in report.warnings]
        plan.cold_start_s = report.cold_start_s
        plan.notes.append(
            f"Workload profile {wp.type}: {wp.vcpu:g} vCPU, {wp.memory_gib:g} GiB, {wp.gpu_count} x {wp.gpu} per "
            f"replica ({self.aca.cite(wp.sources['vcpu'])})."
        )
        plan.notes.append(
            f"Startup probe on /health: {probe.failure_threshold} x {probe.period_s} s after {probe.initial_delay_s} s "
            f"= {format_duration(probe.budget_s, 'approx')} (ACA allows at most {limits_text(self.aca)}); cold "
            f"start estimated ~{format_duration(report.cold_start_s, 'approx')}."
        )
        if report.cold_start_s > probe.budget_s:
            plan.notes.append(
                f":warning: The estimated cold start (~{report.cold_start_s:.0f} s) is longer than the most ACA's "
                f"startup probe can wait ({probe.budget_s} s): the replica would be restarted while loading."
            )
        if cfg.min_instances == 0:
            plan.notes.append(
                "Min replicas 0: the app scales to zero when idle, and the next request waits for a cold start ("
                + "; ".join(self.aca.cold_start.notes[:1])
                + ")."
            )
        plan.notes.append(
            f"`{report.model.hf_repo}` is pulled from the Hub without an HF token (Gemma 4 is Apache-2.0, not gated)."
        )
        plan.notes.append(
            f"vLLM's --api-key comes from Key Vault (`{self.options.api_key_secret_url}`) through identity "
            f"`{self.options.identity.rsplit('/', 1)[-1]}`; ingress is external on port {aspec.VLLM_PORT}."
        )
        if current is None:
            plan.notes.append(f"The app is created in environment `{self.options.environment}` ({location}).")
        elif (pinned := _pinned(current)) and pinned != current.latest_revision:
            # After a rollback the app's template is not what serves: say which one the change list is against.
            plan.notes.insert(
                0,
                f"Traffic is pinned to the serving revision `{pinned}`; the change list is against the app's template, "
                f"`{current.latest_revision}`'s, which ARM compares with. The new revision then takes 100% once ready.",
            )
        if environment is not None:
            plan.preflight = await aca_preflight(self.api, self.aca, environment, wp, cfg.max_instances)
        return plan

    async def _plan_redeploy(self, params: dict[str, Any], env: DeployEnv) -> Plan:
        """A redeploy of an ACA app: its deploy profile (the app's tag) with the settings that serve now carried
        over (the vLLM flags and replica range of the revision traffic follows) and the requested changes on top,
        planned as a deploy is (fit on the profile's GPU, Azure's preflight, the az equivalent)."""
        r: RedeployParams = validate_params(RedeployParams, params, "redeploy")
        asked = r.model_dump(exclude_none=True)
        foreign = sorted(k for k in asked if k in _NOT_ACA_FIXES)
        if foreign:
            raise InvalidInput(
                f"Not fixes of an {DISPLAY} app: " + "; ".join(_NOT_ACA_FIXES[k] for k in foreign) + ".",
                "On ACA vLLM pulls the weights from the Hub (Gemma 4 is not gated) and no bucket is mounted.",
            )
        service = r.service or self.options.service
        app = await self._app(service)
        if app is None:
            raise NotFound(f"Service `{service}` does not exist (no container app of that name).")
        tags = app.body.get("tags") or {}
        profile = tags.get(aspec.TAG_PROFILE)
        if not profile:
            raise InvalidInput(
                f"`{service}` was not deployed by this bot (no `{aspec.TAG_PROFILE}` tag), so there is no profile to "
                "redeploy it from.",
                "Deploy a profile to it: `/gemma deploy PROFILE --service " + service + "`.",
            )
        pinned = _pinned(app)
        serving = await self.api.get_revision(service, pinned) if pinned else None
        template = serving.template if serving else (app.body.get("properties") or {}).get("template") or {}
        flags = VllmFlags.parse_or_none(
            [str(a) for a in aspec.container_of({"properties": {"template": template}}).get("args") or []]
        )
        lo, hi = aspec.scale_of({"properties": {"template": template}})
        carried: dict[str, Any] = {"min_instances": lo, "max_instances": hi}
        if flags is not None:
            carried.update(
                max_model_len=flags.max_model_len,
                gpu_memory_utilization=flags.gpu_memory_utilization,
                max_num_seqs=flags.max_num_seqs,
                cpu_offload_gb=flags.cpu_offload_gb or None,
                enforce_eager=flags.enforce_eager or None,
                kv_cache_dtype="fp8" if flags.kv_cache_dtype.startswith("fp8") else None,
            )
        # The planner decides --dtype by the GPU (half on the T4, which has no bfloat16): a dtype fix is its to make.
        changes = {k: v for k, v in asked.items() if k not in ("service", "on_serving", "dtype", "enable_tool_calling")}
        merged = {k: v for k, v in {**carried, **changes}.items() if v is not None}
        running = str(aspec.container_of({"properties": {"template": template}}).get("image") or "")
        image = r.image or running or env.image  # the image that serves, unless a new one is asked for
        plan = await self._plan_deploy(
            {
                "profile": profile,
                "service": service,
                **{k: v for k, v in merged.items() if k not in ("image", "model")},
            },
            env.model_copy(update={"image": image}) if image else env,
            False,
        )
        plan.kind = "redeploy"
        plan.params = asked
        plan.summary = f"Redeploy `{service}` ({profile}, the running settings" + (
            " with " + ", ".join(f"{k}={v}" for k, v in changes.items()) + ")" if changes else ")"
        )
        if pinned:
            plan.notes.insert(0, f"Built on `{pinned}`, the revision traffic is pinned to (its flags and replicas).")
        if "dtype" in asked:
            plan.notes.append(f"--dtype: the planner sets it for the profile's GPU ({asked['dtype']} asked).")
        return plan

    async def _plan_destroy(self, params: dict[str, Any]) -> Plan:
        d: DestroyParams = validate_params(DestroyParams, params, "destroy")
        service = d.service or self.options.service
        app = await self._app(service)
        if app is None:
            raise NotFound(f"Service `{service}` does not exist (no container app of that name).")
        revisions = await self.api.list_revisions(service)
        replicas = sum(r.replicas for r in revisions)
        profile = self._profile_of(app)
        price = ""
        if profile is not None:
            usd = aca_price(profile.type, app.location).per_replica_usd_per_hour
            price = f", {format_usd(usd, 'h')} per running replica"
        return Plan(
            kind="destroy",
            service=service,
            summary=f"Delete {DISPLAY} app `{service}` ({len(revisions)} revision(s), {replicas} replica(s) running, "
            f"workload profile `{app.workload_profile}`{price})",
            params=d.model_dump(exclude_none=True),
            notes=[
                "Deleting the app removes every revision and its ingress URL; the environment, its workload profiles "
                "and the Key Vault secret stay."
            ],
            gcloud=f"az containerapp delete --name {service} --resource-group {self.options.resource_group} --yes",
            cli="az",
            target=KIND,
            base_fingerprint=aspec.fingerprint(app.body),
            wait_budget_s=600.0,
        )

    # --- its spec document ----------------------------------------------------------------------------------

    def diff(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[FieldChange]:
        return aspec.diff(old, new)

    def fingerprint(self, spec: dict[str, Any] | None) -> str:
        return aspec.fingerprint(spec)

    def preflight_target(self, spec: dict[str, Any], env: DeployEnv) -> PreflightTarget:
        tags = spec.get("tags") or {}
        model = tags.get(aspec.TAG_MODEL)
        m = load_catalog().model(model) if model else None
        profile = self.aca.profiles.get(tags.get(aspec.TAG_TYPE, ""))
        return PreflightTarget(
            image=str(aspec.container_of(spec).get("image", "")),
            model=model,
            family=m.family if m else None,
            hf_repo=m.hf_repo if m else None,
            gpu=profile.gpu if profile else "",
            region=str(spec.get("location", "")),
            project=None,
            hf_token_secret="",
            platform=KIND,
            # The region, the profile and the GPU quota are Azure's: the plan's own checks (checks.py).
            shared_checks=("image",),
        )

    def serving_of(self, spec: dict[str, Any]) -> ServingSummary | None:
        container = aspec.container_of(spec)
        flags = VllmFlags.parse_or_none([str(a) for a in container.get("args") or []])
        model = (spec.get("tags") or {}).get(aspec.TAG_MODEL)
        profile = self.aca.profiles.get((spec.get("tags") or {}).get(aspec.TAG_TYPE, ""))
        if flags is None or not model or profile is None:
            return None
        req = FitRequest(
            model=model,
            gpu=profile.gpu,
            gpu_count=profile.gpu_count,
            max_model_len=flags.max_model_len,
            gpu_memory_utilization=flags.gpu_memory_utilization or 0.9,
            kv_cache_dtype="fp8" if (flags.kv_cache_dtype or "").startswith("fp8") else "auto",
            enforce_eager=bool(flags.enforce_eager),
            max_num_seqs=flags.max_num_seqs,
            dtype="half" if flags.dtype == "half" else "auto",
            max_num_batched_tokens=flags.max_num_batched_tokens,
            host_memory_gib=profile.memory_gib,
            cpu=profile.vcpu,
        )
        probe: dict[str, Any] = next((x for x in container.get("probes") or [] if x.get("type") == "Startup"), {})
        budget = int(probe.get("initialDelaySeconds", 0)) + int(probe.get("periodSeconds", 10)) * int(
            probe.get("failureThreshold", 3)
        )
        return ServingSummary(image=str(container.get("image", "")), fit=req, startup_budget_s=budget)

    async def hourly_cost(self, info: ServiceInfo, region: str | None) -> CostReport:
        app = await self._app(info.name)
        if app is None:
            raise NotFound(f"Service `{info.name}` does not exist.")
        profile = self._profile_of(app)
        if profile is None:
            raise InvalidInput(
                f"`{info.name}` runs on workload profile `{app.workload_profile}`, which this bot has no figures for."
            )
        # Other active revisions run their min replicas whatever serves (Multiple mode): billed too.
        judged = _pinned(app) or app.latest_revision
        kept = {
            r.name: n
            for r in await self.api.list_revisions(info.name)
            if r.active and r.name != judged and r.provisioning_state != "Failed"
            for n in [aspec.scale_of({"properties": {"template": r.template}})[0]]
            if n > 0
        }
        # priced in the app's own region (where its environment is), not the bot's Cloud Run region
        return aca_cost(info, profile.type, app.location, kept)

    def export(self, service: str, spec: dict[str, Any], env: DeployEnv) -> ExportedSpec:
        return ExportedSpec(
            text=yaml.safe_dump(aspec.sendable(spec), sort_keys=False, width=1000),
            filename=f"{service}.containerapp.yaml",
            title=f"{service} ({DISPLAY} container app, ARM JSON as YAML)",
            cli="az",
            command=az_create(service, spec, self.options.resource_group, self.options.environment),
        )

    def sendable(self, spec: dict[str, Any]) -> dict[str, Any]:
        return aspec.sendable(spec)

    def progress_stages(self, plan: Plan) -> ProgressStages:
        """A revision's stages in ACA's words: provisioned, its replica starting, vLLM loading, healthy."""
        if plan.kind == "destroy":
            return ProgressStages(stages=(Stage(label="submitted"), Stage(label="deleting"), Stage(label="deleted")))
        if plan.kind in ("rollback", "promote"):  # traffic only: no revision is made
            return ProgressStages(
                stages=(
                    Stage(label="submitted", phases=("ARM operation",)),
                    Stage(label="moving traffic"),
                    Stage(label="ready"),
                )
            )
        stages = (
            Stage(label="submitted", phases=("ARM operation",)),
            Stage(label="revision created"),
            Stage(label="replica starting", phases=("instance starting",)),
            Stage(label="weights loading"),
            Stage(label="ready"),
        )
        note = ""
        if plan.cold_start_s:
            note = (
                f"Expected cold start ~{format_duration(plan.cold_start_s, 'approx')}; traffic moves to the new "
                "revision only once its startup probe passes."
            )
        return ProgressStages(stages=stages, note=note)


def _merge_onto(current: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The new document over the app as it is: what the bot does not manage (other tags, secrets, registries,
    Dapr, custom domains) is kept."""
    out = aspec.sendable(current)
    out["tags"] = {**(out.get("tags") or {}), **new["tags"]}
    out["identity"] = new["identity"]
    props = out.setdefault("properties", {})
    nprops = new["properties"]
    props["environmentId"] = nprops["environmentId"]
    props["workloadProfileName"] = nprops["workloadProfileName"]
    conf = props.setdefault("configuration", {})
    nconf = nprops["configuration"]
    conf["activeRevisionsMode"] = nconf["activeRevisionsMode"]
    conf["ingress"] = {**(conf.get("ingress") or {}), **nconf["ingress"]}
    secrets = [s for s in conf.get("secrets") or [] if s.get("name") != aspec.API_KEY_SECRET]
    conf["secrets"] = [*secrets, *nconf["secrets"]]
    props["template"] = copy.deepcopy(nprops["template"])
    return out


def _revision_ready(r: AppRevision) -> tuple[bool | None, str, str]:
    """A revision's readiness as the deploy watch reads it, from ACA's own states: serving once provisioned,
    running and healthy (its probes pass on vLLM's /health); failed when provisioning failed or it runs Failed."""
    if r.provisioning_state == "Failed" or r.running_state == "Failed":
        return False, f"revision {r.provisioning_state}/{r.running_state}", r.provisioning_error
    if r.provisioning_state == "Provisioned" and r.running_state == "Running" and r.health_state == "Healthy":
        return True, "Running", ""
    if r.health_state == "Unhealthy" and r.running_state == "Degraded":
        return False, "Degraded", r.provisioning_error or "its replicas fail their health probes"
    return None, r.provisioning_state, r.running_state


def _pinned(app: AppInfo) -> str:
    """The revision traffic is pinned to when no share follows the latest revision ('' when one does): the one
    with the largest weight."""
    traffic = ((app.body.get("properties") or {}).get("configuration") or {}).get("ingress", {}).get("traffic") or []
    if not traffic or any(t.get("latestRevision") and int(t.get("weight", 0) or 0) > 0 for t in traffic):
        return ""
    named = max(traffic, key=lambda t: int(t.get("weight", 0) or 0))
    return str(named.get("revisionName", ""))


def _scaled_to_zero(app: AppInfo, r: AppRevision) -> bool:
    """A ready revision that takes traffic with no replica running: ACA provisioned it and scaled it to zero (min
    replicas 0, no traffic for the cooldown), which is how an idle scale-to-zero app rests, not a rollout."""
    return (
        r.name in (app.latest_ready_revision, _pinned(app))
        and r.provisioning_state == "Provisioned"
        and r.running_state == "Running"
        and r.replicas == 0
    )


def _revision_info(r: AppRevision) -> RevisionInfo:
    ready, reason, message = _revision_ready(r)
    c = aspec.container_of({"properties": {"template": r.template}})
    return RevisionInfo(
        name=r.name,
        ready=ready,
        reason=reason,
        message=message,
        create_time=r.created,
        image=str(c.get("image", "")),
        traffic_percent=r.traffic_weight,
        template=r.template,
    )


def _readiness(app: AppInfo, latest: AppRevision | None) -> tuple[bool | None, Condition]:
    """The app's readiness as status shows it: its latest revision's, in ACA's words."""
    if app.provisioning_state == "Failed":
        return False, Condition(type="Ready", state="CONDITION_FAILED", reason="Failed", message="the app failed")
    if latest is None:
        return None, Condition(type="Ready", state="CONDITION_PENDING", reason=app.provisioning_state)
    ready, reason, message = _revision_ready(latest)
    if ready is None and _scaled_to_zero(app, latest):
        return True, Condition(
            type="Ready",
            state="CONDITION_SUCCEEDED",
            reason="ScaledToZero",
            message=f"revision `{latest.name}` runs no replica (min replicas 0): the next request starts one",
        )
    if ready is True:
        return True, Condition(type="Ready", state="CONDITION_SUCCEEDED", reason="Running")
    if ready is False:
        return False, Condition(
            type="Ready",
            state="CONDITION_FAILED",
            reason=reason,
            message=f"revision `{latest.name}`: {message or latest.running_state}",
        )
    return None, Condition(
        type="Ready",
        state="CONDITION_PENDING",
        reason=latest.provisioning_state,
        message=f"revision `{latest.name}` is {latest.provisioning_state}, {latest.running_state}, "
        f"{latest.replicas} replica(s)",
    )

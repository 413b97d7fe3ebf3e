"""Cloud TPU v6e as a serving target: one queued resource (and its one node) per service, through tpu_v2.

What it has and lacks (TargetCapabilities): no revisions (a deploy creates the one queued resource; changing it
is destroy + deploy), no traffic split, no scale to zero (a slice bills while ACTIVE, serving or not). A deploy
plan runs the TPU fit first (skills/capacity/tpu_fit.py: unsupported on TPU, needs more chips) and the zone
search (zones.py) for zones that offer the slice and have quota; the write creates the queued resource in the
first of them, and while it runs its states are the deploy's progress (CREATING, ACCEPTED,
WAITING_FOR_RESOURCES, PROVISIONING, ACTIVE, then vLLM compiling until /health answers). A zone that fails for
capacity hands over to the next zone the search found. Deleting it is a destroy: the plan is confirmed by typing
the service's name (skills/deploy/confirm.py).
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from skills.actions.params import DeployParams, DestroyParams
from skills.capacity.catalog import load_catalog
from skills.capacity.cost import CostReport, slice_cost
from skills.capacity.fit_types import ServingSummary
from skills.capacity.prices import format_usd
from skills.capacity.tpu_catalog import Provisioning, TpuCatalog, load_tpu_catalog
from skills.capacity.tpu_fit import TpuFitRequest, check_tpu_fit, refuse_gpu_only
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
)
from skills.serving.changes import FieldChange
from skills.serving.profiles import get_profile
from skills.targets.env import DeployEnv
from skills.targets.plan import Plan
from skills.targets.plan_inputs import ActionKind, validate_params
from skills.targets.port import ExportedSpec, ProgressStages, TargetCapabilities
from skills.targets.preflight_check import PreflightTarget
from skills.targets.tpu.api import CreateRequest, QueuedInfo, QuotaExhausted, TpuApi
from skills.targets.tpu.names import check_node_id, valid_node_id
from skills.targets.tpu.spec import DEFAULT_IMAGE, VLLM_PORT, gcloud_create, metadata_of, spec_from_metadata
from skills.targets.tpu.states import SUSPENDED, WAITING, deploy_stages, what_deleting_ends
from skills.targets.tpu.zones import HOLDING, ZoneOption, no_zone_text, search_zones

KIND = "cloud-tpu"
_NO_CAPACITY = re.compile(r"no more capacity", re.IGNORECASE)
# Cloud Run settings a deploy may carry (skills/actions/params.py Overrides) that a slice has no use for: refused at
# plan time beside the GPU-only ones (skills/capacity/tpu_fit.py GPU_ONLY), rather than silently ignored.
_CLOUD_RUN_ONLY: dict[str, tuple[str, str]] = {
    "cpu": ("--cpu", "a TPU VM's CPUs come with its type"),
    "startup_failure_threshold": ("--startup-failure-threshold", "Cloud Run's startup probe; a slice has none"),
    "startup_period_s": ("--startup-period-s", "Cloud Run's startup probe; a slice has none"),
    "min_instances": ("--min-instances", "a slice is one node, always on"),
    "max_instances": ("--max-instances", "a slice is one node, always on"),
}
# A provisioning model with no zone: the other one that draws on its own quota (spot: preemptible; on-demand and
# reserved: on-demand), asked before it is suggested (zones.py no_zone_text).
_OTHER_PROVISIONING: dict[str, tuple[Provisioning, ...]] = {
    "on-demand": ("spot",),
    "reserved": ("spot",),
    "spot": ("on-demand",),
}
_TPU_FLAGS = (
    "A Cloud TPU deploy takes `--accelerator-type`, `--zone`, `--provisioning`, `--max-model-len`, "
    "`--gpu-memory-utilization` (the HBM share), `--max-num-seqs` and `--service`."
)


# What a queued resource waiting for its node is doing, as status says it (states.py cites the states).
_QUEUED_WHY = {
    "CREATING": "the queued resource is being admitted to the queue",
    "ACCEPTED": "the queued resource waits in the queue",
    "WAITING_FOR_RESOURCES": "the queued resource waits in the queue for capacity",
    "PROVISIONING": "the node is being provisioned",
}


@dataclass
class TpuOptions:
    """The deployment settings the TPU target needs (bot/settings.py: TPU_*)."""

    project: str = ""
    network: str = ""  # the VPC shared with the bot's egress
    api_key_secret: str = "vllm-api-key"
    hf_token_secret: str = "hf-token"
    queue_wait_s: int = 900  # per zone: the queueing policy's valid_until_duration
    service: str = "vllm-gemma4-tpu"  # the service name a TPU deploy gets unless it names one
    zones: list[str] = field(default_factory=list)  # candidate zones ([] = every v6e zone in tpu.yaml)


@dataclass
class _Op:
    service: str
    verb: str  # "create" | "delete"
    zone: str
    spec: dict[str, Any] | None = None
    remaining: list[str] = field(default_factory=list)  # zones to try next when one has no capacity
    tried: list[str] = field(default_factory=list)


class TpuTarget:
    kind = KIND
    display = "Cloud TPU"
    capabilities = TargetCapabilities()  # no revisions, no traffic split, no scale to zero

    def __init__(
        self,
        api: TpuApi,
        model_server: ModelServer,
        options: TpuOptions,
        *,
        quotas: QuotaReader | None = None,
        logs: Logs | None = None,
        metrics: Metrics | None = None,
        endpoint_of: Callable[[str], str] | None = None,
        catalog: TpuCatalog | None = None,
    ) -> None:
        self.api = api
        self.model_server = model_server
        self.options = options
        self.quotas = quotas
        self.logs = logs
        self.metrics = metrics
        self.tpu = catalog or load_tpu_catalog()
        # How the bot reaches a node: its internal IP over the VPC (the sandbox maps it to a local address).
        self.endpoint_of = endpoint_of or (lambda ip: f"http://{ip}:{VLLM_PORT}")
        self._zone_of: dict[str, str] = {}  # service -> the zone its queued resource is in
        self._ops: dict[str, _Op] = {}

    # --- finding the queued resource -------------------------------------------------------------------------

    def _zones(self) -> list[str]:
        return self.options.zones or list(self.tpu.zones)

    async def _find(self, service: str) -> QueuedInfo | None:
        if not valid_node_id(service):  # no queued resource can have that name: nothing to ask (names.py)
            return None
        known = self._zone_of.get(service)
        if known:
            info = await self.api.get(known, service)
            if info is not None:
                return info
            self._zone_of.pop(service, None)  # gone from where it was: look everywhere once more
        zones = self._zones()
        for zone, info in zip(zones, await asyncio.gather(*(self.api.get(z, service) for z in zones)), strict=True):
            if info is not None:
                self._zone_of[service] = zone
                return info
        return None

    async def zone_search(self, accelerator_type: str, provisioning: str, also: str | None = None) -> list[ZoneOption]:
        """The candidate zones (and `also`, a zone asked for by name) with what each offers, usable first."""
        zones = self._zones()
        zones = zones if also is None or also in zones else [*zones, also]
        return await search_zones(self.api, self.quotas, self.tpu, accelerator_type, provisioning, zones)  # type: ignore[arg-type]

    async def other_provisioning(self, accelerator_type: str, provisioning: str) -> dict[str, list[ZoneOption]]:
        """For a slice no zone takes under `provisioning`: the zone search under the other model that draws on its
        own quota, so that it is suggested only where it holds."""
        return {
            tier: await self.zone_search(accelerator_type, tier) for tier in _OTHER_PROVISIONING.get(provisioning, ())
        }

    def _check_args(self, p: DeployParams) -> None:
        """Every argument of a TPU deploy that cannot work, refused before anything is asked of the cloud: the
        node id, settings for a GPU or Cloud Run, and a zone outside skills/data/tpu.yaml."""
        check_node_id(p.service or self.options.service)
        values = p.model_dump()
        cloud_run = [
            flag_why
            for name, flag_why in _CLOUD_RUN_ONLY.items()
            if values.get(name) is not None and not (name.endswith("_instances") and values[name] == 1)
        ]
        refuse_gpu_only(values, f"on a Cloud TPU slice (profile `{p.profile}`)", _TPU_FLAGS, also=cloud_run)
        provisioning = p.provisioning or get_profile(p.profile).provisioning
        if provisioning == "reserved" and not p.reservation:
            raise InvalidInput(
                "A reserved TPU slice is created in a named reservation: name it with `--reservation NAME` (and its "
                "zone with `--zone`).",
                "tpu_v2 QueuedResource.reservation_name (projects/P/locations/ZONE/reservations/NAME); `guaranteed` "
                "only sets a minimum duration (tpu.yaml `reservation`).",
            )
        if p.reservation and provisioning != "reserved":
            raise InvalidInput(
                "`--reservation` applies with `--provisioning reserved`.", "Add `--provisioning reserved`."
            )
        if p.zone is not None and p.zone not in self.tpu.zones:
            raise InvalidInput(
                f"`{p.zone}` is not a Cloud TPU v6e zone (skills/data/tpu.yaml `zones`, from "
                f"{self.tpu.cite(self.tpu.zones_source)}).",
                "Zones: " + ", ".join(f"`{z}`" for z in self.tpu.zones) + "; or leave out `--zone` and the zone "
                "search picks one with quota (`/gemma tpu zones` lists them).",
            )

    # --- status ----------------------------------------------------------------------------------------------

    async def get_service(self, name: str) -> ServiceInfo:
        info = await self._find(name)
        if info is None:
            raise NotFound(f"Service `{name}` does not exist (no Cloud TPU queued resource of that name).")
        spec = spec_from_metadata(info.metadata) or {}
        uri = self.endpoint_of(info.ip) if info.ip else ""
        ready: bool | None = None if info.state in WAITING else False
        cond = Condition(
            type="Ready", state="CONDITION_PENDING", reason=info.state, message=_QUEUED_WHY.get(info.state, "")
        )
        if info.state == "ACTIVE" and info.node_state == "READY":
            # READY is the node's state ("TPU node has been created"), not vLLM's: it serves once /health answers.
            health = await self.model_server.health(uri) if uri else None
            if health is not None and health.ok:
                ready, cond = True, Condition(type="Ready", state="CONDITION_SUCCEEDED")
            else:
                why = (health.error or "no answer") if health is not None else "no internal IP to reach"
                cond = Condition(
                    type="Ready",
                    state="CONDITION_PENDING",
                    reason="ACTIVE",
                    message=f"the node is READY but vLLM's /health does not answer ({why}): vLLM is loading and "
                    f"compiling (XLA), or it stopped (`/gemma logs {name}`, `/gemma diagnose {name}`)",
                )
        elif info.state == "ACTIVE":
            ready = False
            node = info.node_state or "not found"
            cond = Condition(
                type="Ready", state="CONDITION_FAILED", reason="ACTIVE", message=f"the queued resource's node is {node}"
            )
        if info.state == "FAILED":
            cond = Condition(type="Ready", state="CONDITION_FAILED", reason="FAILED", message=info.error)
        elif info.state in SUSPENDED:
            why = "preempted (spot)" if info.state_initiator == "SERVICE" else "suspended"
            cond = Condition(type="Ready", state="CONDITION_FAILED", reason=info.state, message=f"node {why}")
        return ServiceInfo(
            name=name,
            uri=uri,
            ready=ready,
            terminal_condition=cond,
            conditions=[cond],
            min_instances=1,
            max_instances=1,
            scaling_unit="",  # one node: nothing scales
            gpu_type=info.accelerator_type,
            gpu_count=self.tpu.accelerator(info.accelerator_type)[1].chips if info.accelerator_type else 0,
            accelerator=_slice_text(self.tpu, info.accelerator_type),
            image=str(spec.get("image", "")),
            args=list(spec.get("vllmArgs", [])),
            requires_auth=False,  # no IAM in front: vLLM's --api-key
            spec=spec,
        )

    async def get_service_spec(self, name: str) -> dict[str, Any] | None:
        info = await self._find(name)
        return spec_from_metadata(info.metadata) if info is not None else None

    async def list_revisions(self, service: str, limit: int = 10) -> list[RevisionInfo]:
        raise InvalidInput("A Cloud TPU deployment has no revisions.")

    async def get_revision(self, service: str, revision: str) -> RevisionInfo:
        raise InvalidInput("A Cloud TPU deployment has no revisions.")

    # --- writes ----------------------------------------------------------------------------------------------

    async def apply_service(self, name: str, spec: dict[str, Any], *, create: bool) -> str:
        if not create or await self._find(name) is not None:
            raise InvalidInput(
                f"`{name}` already has a queued resource: a slice cannot be changed in place.",
                f"`/gemma destroy {name}` (typed confirmation), then deploy again.",
            )
        zones = [spec["zone"], *[z for z in spec.get("zones", []) if z != spec["zone"]]]
        op = _Op(service=name, verb="create", zone=zones[0], spec=spec, remaining=zones[1:])
        await self._create_somewhere(op)
        op_id = f"tpu-op-{len(self._ops) + 1}"
        self._ops[op_id] = op
        return op_id

    async def _create_somewhere(self, op: _Op) -> None:
        """Create in op.zone; a zone refusing for quota hands over to the next one."""
        assert op.spec is not None
        while True:
            spec = {**op.spec, "zone": op.zone}
            req = CreateRequest(
                zone=op.zone,
                queued_resource_id=op.service,
                node_id=op.spec["nodeId"],
                accelerator_type=spec["acceleratorType"],
                runtime_version=spec["runtimeVersion"],
                tier=spec["provisioning"],
                reservation=spec.get("reservation", ""),
                metadata=metadata_of(spec),
                labels={"managed-by": "gemma-sre"},
                valid_until_s=int(spec["queueWaitS"]) if op.remaining else None,
                network=self.options.network,
            )
            try:
                await self.api.create(req)
            except QuotaExhausted:
                op.tried.append(f"{op.zone}: quota")
                if not op.remaining:
                    raise
                op.zone = op.remaining.pop(0)
                continue
            self._zone_of[op.service] = op.zone
            op.spec = spec
            return

    async def delete_service(self, name: str) -> str:
        info = await self._find(name)
        if info is None:
            raise NotFound(f"Service `{name}` does not exist.")
        await self.api.delete(info.zone, name, force=True)
        op_id = f"tpu-op-{len(self._ops) + 1}"
        self._ops[op_id] = _Op(service=name, verb="delete", zone=info.zone)
        return op_id

    async def wait_operation(self, operation: str, timeout_s: float) -> OperationProgress:
        op = self._ops.get(operation)
        if op is None:
            raise NotFound(f"Unknown Cloud TPU operation `{operation}`.")
        info = await self.api.get(op.zone, op.service)
        if op.verb == "delete":
            return OperationProgress(done=info is None, phase="DELETING" if info is not None else "deleted")
        if info is None:
            return OperationProgress(done=True, phase="gone", error=f"the queued resource left {op.zone}")
        where = f" in {op.zone}"
        if info.state in WAITING:
            return OperationProgress(done=False, phase=info.state + where)
        if info.state == "FAILED":
            if _NO_CAPACITY.search(info.error) and op.remaining:
                failed = op.zone
                await self.api.delete(failed, op.service, force=True)
                op.tried.append(f"{failed}: no capacity")
                op.zone = op.remaining.pop(0)
                await self._create_somewhere(op)
                return OperationProgress(done=False, phase=f"no capacity in {failed}; queued in {op.zone}")
            return OperationProgress(
                done=True, phase="FAILED" + where, error=info.error or "the queued resource failed"
            )
        if info.state in SUSPENDED:
            return OperationProgress(done=True, phase=info.state + where, error="the spot node was preempted")
        if info.state == "ACTIVE":
            url = self.endpoint_of(info.ip) if info.ip else ""
            health = await self.model_server.health(url) if url else None
            if health is not None and health.ok:
                return OperationProgress(done=True, phase=f"ACTIVE{where}: vLLM ready")
            return OperationProgress(done=False, phase=f"ACTIVE{where}: vLLM loading and compiling (XLA)")
        return OperationProgress(done=False, phase=info.state + where)

    async def aclose(self) -> None:
        close = getattr(self.api, "aclose", None)
        if close is not None:
            await close()

    # --- plans -----------------------------------------------------------------------------------------------

    async def plan(
        self,
        kind: ActionKind,
        params: dict[str, Any],
        env: DeployEnv,
        *,
        offline: bool = False,
        quotas: QuotaReader | None = None,
    ) -> Plan:
        if params.get("canary") is not None:
            raise InvalidInput("A Cloud TPU slice cannot split traffic: there is no canary on it.")
        if kind == "deploy":
            return await self._plan_deploy(params, env, offline)
        if kind == "destroy":
            return await self._plan_destroy(params, env)
        what = {"scale": "resized in place", "rollback": "rolled back", "redeploy": "changed in place"}.get(kind, kind)
        raise InvalidInput(
            f"A Cloud TPU slice cannot be {what}.",
            "Destroy it (`/gemma destroy`, typed confirmation) and deploy the profile again with the new settings.",
        )

    async def _plan_deploy(self, params: dict[str, Any], env: DeployEnv, offline: bool) -> Plan:
        p: DeployParams = validate_params(DeployParams, params, "deploy")
        profile = get_profile(p.profile)
        self._check_args(p)
        service = p.service or self.options.service
        accel = p.accelerator_type or profile.tpu or "v6e-4"
        provisioning = p.provisioning or profile.provisioning
        request = TpuFitRequest(
            model=profile.model,
            accelerator_type=accel,
            max_model_len=p.max_model_len or profile.max_model_len,
            gpu_memory_utilization=p.gpu_memory_utilization or profile.gpu_memory_utilization,
            provisioning=provisioning,
        )
        fit = check_tpu_fit(request)
        existing = None if offline else await self._find(service)
        options = await self.zone_search(accel, provisioning, also=p.zone) if not offline else []
        usable = [o.zone for o in options if o.usable]
        # No zone can take it: the plan names none as the place (priced in the cheapest zone searched, which the
        # search sorts first, and saying so).
        nowhere = not offline and not usable and p.zone is None
        zone = p.zone or (usable[0] if usable else (options[0].zone if options else self._zones()[0]))
        zones = [zone, *[z for z in usable if z != zone]]
        # Priced where it will be created: the zone's region (the slice's rate differs by region), as /gemma cost
        # prices it once it runs.
        fit = check_tpu_fit(request.model_copy(update={"region": self.tpu.region_of(zone)}))
        m = load_catalog().model(profile.model)
        args = [*fit.vllm_args, "--max-num-seqs", str(p.max_num_seqs or profile.max_num_seqs)]
        spec = {
            "project": self.options.project or env.project or "",
            "zone": zone,
            "zones": zones,
            "acceleratorType": fit.accelerator_type,
            "runtimeVersion": self.tpu.chip.runtime_version,
            "provisioning": provisioning,
            **({"reservation": p.reservation} if p.reservation else {}),
            "nodeId": service,
            "image": env.image or profile.image or DEFAULT_IMAGE,
            "model": m.name,
            "hfRepo": m.hf_repo,
            "vllmArgs": args,
            "apiKeySecret": self.options.api_key_secret,
            "hfTokenSecret": self.options.hf_token_secret if m.hub_gated else "",  # optional unless gated, as on GPU
            "queueWaitS": self.options.queue_wait_s,
        }
        refusal = why = ""  # why: the plan's header, in a few words
        no_room = ""  # a zone or quota refusal: the capacity check does not pass, and says why in one line
        offers: list[tuple[dict[str, Any], str]] = []
        named = next((o for o in options if o.zone == p.zone), None)  # the zone asked for, as the search found it
        if existing is not None:
            why = f"`{service}` already exists ({existing.state} in {existing.zone})"
            refusal = (
                f"`{service}` already has a queued resource ({existing.state} in {existing.zone}); destroy it first."
            )
        elif named is not None and named.offered is False:
            why = no_room = f"the Cloud TPU API does not list {fit.accelerator_type} in {named.zone}"
            others = [z for z in usable if z != named.zone]
            refusal = f"The Cloud TPU API does not list {fit.accelerator_type} in {named.zone}. " + (
                f"Leave out `--zone`: the zone search found it with quota in {', '.join(others)}."
                if others
                else f"No other zone of the {len(options)} searched offers it with quota either."
            )
        elif named is not None and not named.usable:
            why = no_room = f"{named.zone} has {named.why_not() or 'no quota'} of the {fit.chips} it needs"
            others = [z for z in usable if z != named.zone]
            refusal = f"{named.zone} has no TPU quota for this slice: {named.line()}. Request quota there" + (
                f", or leave out `--zone`: the zone search found quota in {', '.join(others)}."
                if others
                else f"; no other zone of the {len(options)} searched has quota for it either."
            )
            if not others:  # the other provisioning model, offered only where its own quota holds
                for tier, found in (await self.other_provisioning(accel, provisioning)).items():
                    held = [o.zone for o in found if o.usable]
                    if held:
                        refusal += (
                            f" `--provisioning {tier}` has quota in {', '.join(held)}: its plan is one click below."
                        )
                        anywhere = {k: v for k, v in p.model_dump(exclude_none=True).items() if k != "zone"}
                        offers.append(({**anywhere, "provisioning": tier}, ""))
        elif fit.verdict != "fits":
            why = f"{fit.verdict.replace('_', ' ')}"
            refusal = "; ".join([*fit.unsupported, *fit.problems]) or fit.verdict
            bigger = fit.smallest_that_fits
            if bigger and not offline:  # the slice that fits, offered only where the zone search finds quota for it
                held = [o.zone for o in await self.zone_search(bigger, provisioning) if o.usable]
                if held:
                    refusal += (
                        f". {bigger} fits, with {provisioning} quota in {', '.join(held)}: its plan is one click "
                    )
                    refusal += "below."
                    anywhere = {k: v for k, v in p.model_dump(exclude_none=True).items() if k != "zone"}
                    offers.append(({**anywhere, "accelerator_type": bigger}, ""))
                else:
                    refusal += f". {bigger} would fit, but no zone searched has {provisioning} quota for it."
        elif nowhere:
            why = f"none of the {len(options)} zones searched has quota for it"
            no_room = f"none of the {len(options)} zones searched has {fit.chips} {provisioning} chips"
            alternatives = await self.other_provisioning(accel, provisioning)
            refusal = no_zone_text(options, fit.accelerator_type, provisioning, alternatives, self.tpu.quota.service)
            offers = [
                ({**p.model_dump(exclude_none=True), "provisioning": tier}, "")
                for tier, found in alternatives.items()
                if any(o.usable for o in found)
            ]
        cost = format_usd(fit.hourly_usd, "h")
        if fit.monthly_idle_usd is not None:
            cost += ", " + format_usd(fit.monthly_idle_usd, "month", approx=True, places=0)
        if nowhere:
            cost += f" (in {zone}, the cheapest zone searched)"
        lines = [
            f"{fit.model} on {fit.accelerator_type} ({fit.chips} chips, {provisioning}): "
            + fit.verdict.replace("_", " ")
            + (" in HBM" if no_room and fit.verdict == "fits" else ""),
            f"KV cache {fit.kv_free_gib:g} GiB = {fit.kv_cache_tokens:,} tokens; {fit.max_concurrency:g} x "
            f"{fit.max_model_len:,}-token sequences",
            f"Cost while ACTIVE, serving or idle (no scale to zero): {cost}",
        ]
        if no_room:  # a zone and its quota are capacity too: without them the capacity check does not pass
            lines.insert(1, f"Zone: {no_room}")
        tested = [
            f"TPU support of {line}."
            for line, (_, s) in zip(fit.support_lines, fit.support, strict=True)
            if s.status == "tested_upstream"
        ]  # the warned states are in fit.notes
        notes = [*fit.unsupported, *fit.problems, *tested, *fit.notes]
        notes += ["Zone search: " + o.line() for o in options]
        notes.append(
            f"The bot reaches the node at its internal IP over its VPC egress, with vLLM's --api-key "
            f"(secret `{self.options.api_key_secret}`); no Cloud Run IAM is in front of it."
        )
        what = f"Cloud TPU queued resource `{service}`: {fit.accelerator_type} {provisioning}" + (
            f" in reservation `{p.reservation}`" if p.reservation else ""
        )
        # Refused for want of a zone: the header says so and names no zone; the fields and gcloud leave it open.
        shown = {k: v for k, v in spec.items() if k not in ("zone", "zones")} if nowhere else spec
        return Plan(
            kind="deploy",
            service=service,
            summary=f"Create {what} in {zone}"
            if not refusal
            else f"Cannot create {what}" + ("" if nowhere else f" in {zone}") + f": {why}",
            params=p.model_dump(exclude_none=True),
            verdict="does_not_fit" if fit.verdict != "fits" or no_room else "fits",
            fit_lines=lines,
            notes=notes,
            gcloud=gcloud_create(service, {**spec, "zone": "ZONE"} if nowhere else spec),
            create=True,
            changes=self.diff(None, shown),  # a new queued resource: every field of it is new
            offers=offers,
            target=KIND,
            spec=spec,
            base_fingerprint=self.fingerprint(None),
            cold_start_s=float(fit.compile_s),
            wait_budget_s=float(self.options.queue_wait_s * max(1, len(zones)) + fit.readiness_deadline_s),
            refusal=refusal,
        )

    async def _plan_destroy(self, params: dict[str, Any], env: DeployEnv) -> Plan:
        d: DestroyParams = validate_params(DestroyParams, params, "destroy")
        service = d.service or self.options.service
        info = await self._find(service)
        if info is None:
            raise NotFound(f"Service `{service}` does not exist (no Cloud TPU queued resource of that name).")
        spec = spec_from_metadata(info.metadata)
        usd = self.tpu.slice_hour_usd(info.accelerator_type, info.tier, self.tpu.region_of(info.zone))[0]
        # Priced only while it has its node (ACTIVE): a queued or suspended one has none to bill by the hour.
        cost = f", {format_usd(usd, 'h')}" if info.accelerator_type and info.state == "ACTIVE" else ""
        node = " and its node" if info.node_state and info.state not in SUSPENDED else ""
        return Plan(
            kind="destroy",
            service=service,
            summary=f"Delete Cloud TPU queued resource `{service}` ({info.state}, {info.accelerator_type} "
            f"{info.tier} in {info.zone}{cost}){node}",
            params=d.model_dump(exclude_none=True),
            notes=[what_deleting_ends(info.state, info.state_initiator), *_held_note(info)],
            gcloud=f"gcloud compute tpus queued-resources delete {service} --zone {info.zone} --force",
            target=KIND,
            base_fingerprint=self.fingerprint(spec),
            wait_budget_s=600.0,
        )

    # --- its spec document -----------------------------------------------------------------------------------

    def diff(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[FieldChange]:
        """Top-level fields of two TPU spec documents that differ (they hold secret names, never values)."""
        a, b = old or {}, new or {}
        return [
            FieldChange(path=k, old=json.dumps(a[k]) if k in a else None, new=json.dumps(b[k]) if k in b else None)
            for k in sorted(set(a) | set(b))
            if a.get(k) != b.get(k)
        ]

    def fingerprint(self, spec: dict[str, Any] | None) -> str:
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16] if spec else ""

    def preflight_target(self, spec: dict[str, Any], env: DeployEnv) -> PreflightTarget:
        return PreflightTarget(
            image=spec.get("image", DEFAULT_IMAGE),
            model=spec.get("model"),
            family=load_catalog().model(spec["model"]).family if spec.get("model") else None,
            hf_repo=spec.get("hfRepo"),
            gpu=spec.get("acceleratorType", ""),
            region=self.tpu.region_of(spec.get("zone", "")),
            project=env.project,
            hf_token_secret=spec.get("hfTokenSecret", "hf-token"),
            platform=KIND,
        )

    def serving_of(self, spec: dict[str, Any]) -> ServingSummary | None:
        # The GPU planner's FitRequest names a GPU; a TPU slice is not one: the TPU fit reads the spec instead.
        return None

    async def hourly_cost(self, info: ServiceInfo, region: str | None) -> CostReport:
        node = await self._find(info.name)
        if node is None:
            raise NotFound(f"Service `{info.name}` does not exist (no Cloud TPU queued resource of that name).")
        # priced in the zone's region (where the slice is), not the bot's Cloud Run region
        return slice_cost(info, node.accelerator_type, node.tier, node.zone, self.tpu)

    def export(self, service: str, spec: dict[str, Any], env: DeployEnv) -> ExportedSpec:
        return ExportedSpec(
            text=yaml.safe_dump(spec, sort_keys=False, width=1000),
            filename=f"{service}.tpu.yaml",
            title=f"{service} (Cloud TPU queued resource)",
            cli="gcloud",
            command=gcloud_create(service, spec),
        )

    def sendable(self, spec: dict[str, Any]) -> dict[str, Any]:
        return copy.deepcopy(spec)

    def progress_stages(self, plan: Plan) -> ProgressStages:
        """The queued resource's states as stages (states.py, from the tpu_v2 reference), not a revision's."""
        return deploy_stages(plan, self.options.queue_wait_s)


def _slice_text(tpu: TpuCatalog, accelerator_type: str) -> str:
    """A TPU slice as status shows it: its type, chips and HBM (catalog figures), not "N x GPU"."""
    if not accelerator_type:
        return ""
    try:
        name, kind = tpu.accelerator(accelerator_type)
    except InvalidInput:
        return f"TPU {accelerator_type}"
    return f"TPU {name} slice: {kind.chips} chip(s), {kind.chips * tpu.chip.hbm_gb:g} GB HBM in all"


def _held_note(info: QueuedInfo) -> list[str]:
    """A FAILED or SUSPENDED queued resource keeps its quota until deleted (tpu.yaml `held_quota`): say how much."""
    if info.state not in HOLDING or not info.accelerator_type:
        return []
    chips = int(info.accelerator_type.rsplit("-", 1)[1])
    tier = "spot" if info.tier == "spot" else "on-demand"
    return [
        f"It holds {chips} chips of {tier} quota until deleted (the zone search counts them as held): deleting it "
        "frees them for a new deploy."
    ]

"""A second serving target for the tests: the port (skills/targets/port.py) with none of the optional capabilities.

Shaped like a Cloud TPU queued resource (the next target): no revisions (a deploy replaces the one deployment),
no traffic split, no scale to zero (nodes stay up), a write that waits QUEUED then PROVISIONING before it is
done, and its own endpoint. It is as strict as the port: asking it for revisions or for a plan it cannot make
is a test failure, not a quiet answer.
"""

from __future__ import annotations

import copy
import hashlib
import json
from itertools import count
from typing import Any

from skills.actions.params import DestroyParams, ScaleParams
from skills.capacity.cost import CostReport, hourly_cost
from skills.capacity.fit_types import FitRequest, ServingSummary
from skills.errors import InvalidInput, NotFound
from skills.ports import OperationProgress, QuotaReader, RevisionInfo, ServiceInfo
from skills.serving.changes import FieldChange
from skills.targets.env import DeployEnv
from skills.targets.plan import Plan
from skills.targets.plan_inputs import ActionKind, validate_params
from skills.targets.port import ExportedSpec, ProgressStages, Stage, TargetCapabilities
from skills.targets.preflight_check import PreflightTarget

KIND = "fake-queued"
# The phases each write goes through before it is done (a queued resource's states).
PHASES = ("QUEUED", "QUEUED", "PROVISIONING")


class NoRevisionsTarget:
    kind = KIND
    display = "Fake Queued VMs"
    capabilities = TargetCapabilities()  # no revisions, no traffic split, no scale to zero
    logs = None
    metrics = None

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint  # its own endpoint (the tests point it at the model-server stand-in)
        self.specs: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []  # every port call, in order
        self._ops: dict[str, list[str]] = {}
        self._pending: dict[str, tuple[str, dict[str, Any] | None]] = {}
        self._ids = count(1)

    def seed(self, name: str, *, min_nodes: int = 1, max_nodes: int = 1) -> None:
        self.specs[name] = {"accelerator": "v6e-8", "nodes": {"min": min_nodes, "max": max_nodes}}

    # --- status and writes ----------------------------------------------------------------------------------

    async def get_service(self, name: str) -> ServiceInfo:
        self.calls.append(f"get_service {name}")
        spec = self.specs.get(name)
        if spec is None:
            raise NotFound(f"Service `{name}` does not exist.")
        provisioning = any(svc == name for svc, _ in self._pending.values())
        return ServiceInfo(
            name=name,
            uri=self.endpoint,
            ready=None if provisioning else True,
            min_instances=spec["nodes"]["min"],
            max_instances=spec["nodes"]["max"],
            gpu_type=spec["accelerator"],
            gpu_count=1,
        )

    async def get_service_spec(self, name: str) -> dict[str, Any] | None:
        self.calls.append(f"get_service_spec {name}")
        spec = self.specs.get(name)
        return copy.deepcopy(spec) if spec is not None else None

    async def apply_service(self, name: str, spec: dict[str, Any], *, create: bool) -> str:
        self.calls.append(f"apply_service {name}")
        if set(spec) != {"accelerator", "nodes"}:
            raise InvalidInput(f"Unknown fields in the spec: {sorted(set(spec) - {'accelerator', 'nodes'})}")
        return self._operation(name, copy.deepcopy(spec))

    async def delete_service(self, name: str) -> str:
        self.calls.append(f"delete_service {name}")
        if name not in self.specs:
            raise NotFound(f"Service `{name}` does not exist.")
        return self._operation(name, None)

    async def wait_operation(self, operation: str, timeout_s: float) -> OperationProgress:
        self.calls.append(f"wait_operation {operation}")
        phases = self._ops[operation]
        if phases:
            return OperationProgress(done=False, phase=phases.pop(0))
        name, spec = self._pending.pop(operation, ("", None))
        if name and spec is None:
            self.specs.pop(name, None)
        elif name and spec is not None:
            self.specs[name] = spec
        return OperationProgress(done=True, phase="ACTIVE")

    def _operation(self, name: str, spec: dict[str, Any] | None) -> str:
        op = f"operations/op-{next(self._ids)}"
        self._ops[op] = list(PHASES)
        self._pending[op] = (name, spec)
        return op

    async def list_revisions(self, service: str, limit: int = 10) -> list[RevisionInfo]:
        raise AssertionError("asked a target without revisions for its revisions")

    async def get_revision(self, service: str, revision: str) -> RevisionInfo:
        raise AssertionError("asked a target without revisions for a revision")

    # --- its spec document ------------------------------------------------------------------------------------

    async def plan(
        self,
        kind: ActionKind,
        params: dict[str, Any],
        env: DeployEnv,
        *,
        offline: bool = False,
        quotas: QuotaReader | None = None,
    ) -> Plan:
        self.calls.append(f"plan {kind}")
        if kind == "scale":
            p: ScaleParams = validate_params(ScaleParams, params, "scale")
            service = p.service or env.service
            current = await self._current(service)
            new = copy.deepcopy(current)
            new["nodes"] = {"min": p.min_instances, "max": p.max_instances}
            return Plan(
                kind="scale",
                service=service,
                summary=f"Resize `{service}` to {p.min_instances}-{p.max_instances} nodes",
                params=p.model_dump(exclude_none=True),
                spec=new,
                base_fingerprint=self.fingerprint(current),
                changes=_changes(current, new),
                gcloud=f"fakectl resize {service} --min {p.min_instances} --max {p.max_instances}",
                cli="fakectl",
                wait_budget_s=600,
            )
        if kind == "destroy":
            d: DestroyParams = validate_params(DestroyParams, params, "destroy")
            service = d.service or env.service
            current = await self._current(service)
            return Plan(
                kind="destroy",
                service=service,
                summary=f"Delete `{service}`",
                params=d.model_dump(exclude_none=True),
                base_fingerprint=self.fingerprint(current),
                gcloud=f"fakectl delete {service}",
                cli="fakectl",
                wait_budget_s=600,
            )
        raise AssertionError(f"the fake target makes no {kind} plan")

    async def _current(self, service: str) -> dict[str, Any]:
        spec = await self.get_service_spec(service)
        if spec is None:
            raise NotFound(f"Service `{service}` does not exist.")
        return spec

    def diff(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[FieldChange]:
        return _changes(old or {"nodes": {}}, new or {"nodes": {}})

    def fingerprint(self, spec: dict[str, Any] | None) -> str:
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16] if spec else ""

    def preflight_target(self, spec: dict[str, Any], env: DeployEnv) -> PreflightTarget:
        return PreflightTarget(image="", gpu=spec["accelerator"], region=env.region, project=env.project)

    def serving_of(self, spec: dict[str, Any]) -> ServingSummary | None:
        return ServingSummary(image="", fit=FitRequest(model="gemma-4-12b-qat", gpu="nvidia-l4"))

    async def hourly_cost(self, info: ServiceInfo, region: str | None) -> CostReport:
        return hourly_cost(info, region)  # priced as a Cloud Run instance of the same resources

    def export(self, service: str, spec: dict[str, Any], env: DeployEnv) -> ExportedSpec:
        return ExportedSpec(
            text=json.dumps(spec), filename=f"{service}.json", title=service, cli="fakectl", command="fakectl apply"
        )

    def sendable(self, spec: dict[str, Any]) -> dict[str, Any]:
        return copy.deepcopy(spec)

    def progress_stages(self, plan: Plan) -> ProgressStages:
        labels = (
            ("submitted", "QUEUED", "PROVISIONING", "ready") if plan.kind != "destroy" else ("submitted", "deleted")
        )
        return ProgressStages(stages=tuple(Stage(label=x) for x in labels))


def _changes(old: dict[str, Any], new: dict[str, Any]) -> list[FieldChange]:
    return [
        FieldChange(path=f"nodes.{k}", old=str(old["nodes"].get(k)), new=str(new["nodes"].get(k)))
        for k in ("min", "max")
        if old["nodes"].get(k) != new["nodes"].get(k)
    ]

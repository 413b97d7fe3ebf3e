"""Cloud Run as a serving target: the port (skills/targets/port.py) over the Cloud Run Admin API v2 runtime.

Its spec document is the v2 Service JSON (render.py builds it, diff.py compares it, merge.py lays it over the
running one); what only Cloud Run has (startup probes and their caps, the runtime service account, VPC access,
the BETA launch stage of a Preview GPU, the gcloud equivalents) stays in this package.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import yaml

from skills.capacity.cost import CostReport, hourly_cost
from skills.capacity.fit_types import ServingSummary
from skills.durations import format_duration
from skills.errors import InvalidInput
from skills.ports import Logs, Metrics, OperationProgress, QuotaReader, RevisionInfo, Runtime, ServiceInfo
from skills.serving.changes import FieldChange
from skills.targets.canary import canary_percent
from skills.targets.cloud_run.canary import apply_canary, plan_promote, unname_revision
from skills.targets.cloud_run.diff import diff_specs, fingerprint
from skills.targets.cloud_run.gcloud import deploy_command
from skills.targets.cloud_run.plan_deploy import plan_deploy
from skills.targets.cloud_run.plan_operate import plan_destroy, plan_rollback, plan_scale
from skills.targets.cloud_run.plan_redeploy import plan_redeploy
from skills.targets.cloud_run.preflight_target import target_of
from skills.targets.cloud_run.render import strip_output_only
from skills.targets.cloud_run.serving import serving_of
from skills.targets.env import DeployEnv
from skills.targets.plan import Plan
from skills.targets.plan_inputs import ActionKind
from skills.targets.port import ExportedSpec, ProgressStages, Stage, TargetCapabilities
from skills.targets.preflight_check import PreflightTarget

KIND = "cloud-run"
# Cloud Run keeps every revision (rollback pins traffic to one), splits traffic with tags, and scales to zero.
CAPABILITIES = TargetCapabilities(revisions=True, traffic_split=True, scale_to_zero=True)

_Builder = Callable[[Runtime, DeployEnv, dict[str, Any]], Awaitable[Plan]]
_BUILDERS: dict[str, _Builder] = {
    "deploy": plan_deploy,
    "redeploy": plan_redeploy,
    "scale": plan_scale,
    "rollback": plan_rollback,
    "destroy": plan_destroy,
    "promote": plan_promote,
}


class CloudRunTarget:
    kind = KIND
    display = "Cloud Run"
    capabilities = CAPABILITIES

    def __init__(self, runtime: Runtime, *, logs: Logs | None = None, metrics: Metrics | None = None) -> None:
        self.runtime = runtime  # the Admin API v2 adapter (bot/adapters/cloud_run.py)
        self.logs = logs
        self.metrics = metrics

    # --- status, writes, revisions: the runtime's, as they are -----------------------------------------------

    async def get_service(self, name: str) -> ServiceInfo:
        return await self.runtime.get_service(name)

    async def list_revisions(self, service: str, limit: int = 10) -> list[RevisionInfo]:
        return await self.runtime.list_revisions(service, limit=limit)

    async def get_revision(self, service: str, revision: str) -> RevisionInfo:
        return await self.runtime.get_revision(service, revision)

    async def get_service_spec(self, name: str) -> dict[str, Any] | None:
        return await self.runtime.get_service_spec(name)

    async def apply_service(self, name: str, spec: dict[str, Any], *, create: bool) -> str:
        return await self.runtime.apply_service(name, spec, create=create)

    async def wait_operation(self, operation: str, timeout_s: float) -> OperationProgress:
        return await self.runtime.wait_operation(operation, timeout_s)

    async def delete_service(self, name: str) -> str:
        return await self.runtime.delete_service(name)

    async def aclose(self) -> None:
        close = getattr(self.runtime, "aclose", None)
        if close is not None:
            await close()

    # --- its spec document: v2 Service JSON ---------------------------------------------------------------

    async def plan(
        self,
        kind: ActionKind,
        params: dict[str, Any],
        env: DeployEnv,
        *,
        offline: bool = False,
        quotas: QuotaReader | None = None,
    ) -> Plan:
        tpu_only = sorted(
            k for k in ("accelerator_type", "zone", "provisioning", "reservation") if params.get(k) is not None
        )
        if tpu_only:
            raise InvalidInput(f"{', '.join(tpu_only)} apply to a Cloud TPU deployment, not to Cloud Run.")
        builder = _BUILDERS.get(kind)
        if builder is None:
            raise InvalidInput(f"Unknown action `{kind}`.", "Known: " + ", ".join(sorted(_BUILDERS)) + ".")
        # `canary` is no setting of the service: the plan is built without it, then split (canary.py).
        canary = params.get("canary") if kind in ("deploy", "redeploy") and not offline else None
        percent = 0
        if canary is not None:
            percent = canary_percent(canary)
            params = {k: v for k, v in params.items() if k != "canary"}
        if kind == "deploy" and offline:
            plan = await plan_deploy(self.runtime, env, params, offline=True)
        else:
            plan = await builder(self.runtime, env, params)
        if canary is not None:
            info = await apply_canary(plan, percent, self.runtime, env, quotas)
            plan.canary = info.model_dump()
        elif kind in ("deploy", "redeploy", "scale") and not offline:
            await unname_revision(plan, self.runtime)
        return plan

    def diff(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[FieldChange]:
        return diff_specs(old, new)

    def fingerprint(self, spec: dict[str, Any] | None) -> str:
        return fingerprint(spec)

    def preflight_target(self, spec: dict[str, Any], env: DeployEnv) -> PreflightTarget:
        return target_of(spec, env)

    def serving_of(self, spec: dict[str, Any]) -> ServingSummary | None:
        return serving_of(spec)

    async def hourly_cost(self, info: ServiceInfo, region: str | None) -> CostReport:
        return hourly_cost(info, region)

    def export(self, service: str, spec: dict[str, Any], env: DeployEnv) -> ExportedSpec:
        return ExportedSpec(
            text=yaml.safe_dump(spec, sort_keys=False, width=1000),
            filename=f"{service}.service.yaml",
            title=f"{service} (Cloud Run v2 Service)",
            cli="gcloud",
            command=deploy_command(service, spec, env.region, env.project),
        )

    def sendable(self, spec: dict[str, Any]) -> dict[str, Any]:
        return strip_output_only(spec)

    def progress_stages(self, plan: Plan) -> ProgressStages:
        """A revision's stages (the deploy watch's phases, skills/deploy/execute.py), traffic's, or a delete's."""
        labels: tuple[str, ...]
        if plan.kind in ("rollback", "promote"):
            labels = ("submitted", "moving traffic", "ready")
        elif plan.kind == "destroy":
            labels = ("submitted", "deleting", "deleted")
        else:
            labels = ("submitted", "revision created", "instance starting", "weights loading", "ready")
        note = ""
        if plan.kind in ("deploy", "redeploy") and plan.cold_start_s:
            note = (
                f"Expected cold start ~{format_duration(plan.cold_start_s, 'approx')}; traffic moves only when ready."
            )
        return ProgressStages(stages=tuple(Stage(label=x) for x in labels), note=note)

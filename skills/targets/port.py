"""The serving-target port: where the model runs (Cloud Run today; a Cloud TPU queued resource, a GKE or an Azure
Container Apps deployment behind the same operations tomorrow).

Every target has the operations below: deploy or replace (a plan, then `apply_service`), status (`get_service`:
ready, endpoint, the serving configuration), scale or resize (a plan), delete, and the logs and metrics of what it
serves. What only some targets have is a capability the target declares (TargetCapabilities); a command that
needs one asks `require` first and says plainly when the target lacks it, instead of failing in the cloud.

The serving configuration the planner and VllmFlags reason about (model, GPU, vLLM flags, instances) is the same
for every target; a target's own spec document (Cloud Run's v2 Service JSON, a TPU queued resource's request) is
opaque outside it: a plan carries it, the target builds, diffs, fingerprints and exports it.

Which target serves a service is decided in one place (skills/targets/registry.py, wired by bot/wiring.py);
handlers and the incident pipeline only ever see this port.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from skills.capacity.cost import CostReport
from skills.capacity.fit_types import ServingSummary
from skills.errors import InvalidInput
from skills.ports import Logs, Metrics, QuotaReader, Runtime, ServiceInfo
from skills.serving.changes import FieldChange
from skills.targets.env import DeployEnv
from skills.targets.plan import Plan
from skills.targets.plan_inputs import ActionKind
from skills.targets.preflight_check import PreflightTarget

Capability = Literal["revisions", "traffic_split", "scale_to_zero"]


class TargetCapabilities(BaseModel):
    """What a target may lack. `revisions`: immutable revisions, listed, and rollback to one; `traffic_split`:
    traffic shared between revisions and tagged URLs; `scale_to_zero`: min instances 0 (nothing runs when idle)."""

    model_config = ConfigDict(frozen=True)

    revisions: bool = False
    traffic_split: bool = False
    scale_to_zero: bool = False


# What a user is told when a command needs a capability the target lacks: "<target> has no ...".
_LACKS: dict[Capability, tuple[str, str]] = {
    "revisions": ("has no revisions", "there is nothing to list or roll back to; redeploy a known configuration"),
    "traffic_split": ("cannot split traffic", "every request goes to the one deployment; deploy to replace it"),
    "scale_to_zero": ("cannot scale to zero", "use min instances 1 or more, or `/gemma destroy` to stop paying"),
}


class TargetUnsupported(InvalidInput):
    """The command needs a capability the service's target lacks (nothing was asked of the cloud)."""


class ExportedSpec(BaseModel):
    """A spec document as a person reads it (`/gemma config`): the target's own format and its CLI equivalent."""

    text: str  # YAML
    filename: str
    title: str  # what the file is, e.g. "vllm-gemma4 (Cloud Run v2 Service)"
    cli: str  # the CLI that command is for, e.g. "gcloud"
    command: str  # the equivalent CLI command


class Stage(BaseModel):
    """One stage of a running write as its progress shows it: `label`, and the prefixes of the phases the target
    reports (`wait_operation`, the deploy watch) that belong to it (the label itself always does)."""

    model_config = ConfigDict(frozen=True)

    label: str
    phases: tuple[str, ...] = ()


class ProgressStages(BaseModel):
    """The stages a write goes through on a target, in order, and a line shown while it runs (what to expect)."""

    model_config = ConfigDict(frozen=True)

    stages: tuple[Stage, ...]
    note: str = ""

    def labels(self) -> list[str]:
        return [s.label for s in self.stages]

    def words(self, phase: str) -> str:
        """The phase as this target says it: a stage's label when the phase is one of its aliases word for word
        (the deploy watch's "instance starting" is ACA's "replica starting"), else the phase as reported."""
        for s in self.stages:
            if phase in s.phases:
                return s.label
        return phase

    def index(self, phase: str) -> int | None:
        """The stage `phase` belongs to (None: none, e.g. "failed")."""
        for i, s in enumerate(self.stages):
            if phase == s.label or any(phase.startswith(p) for p in s.phases):
                return i
        return None


class ServingTarget(Runtime, Protocol):
    """A place the model is served. The Runtime operations (status, apply, wait, delete, revisions) speak the
    target's own spec document; `list_revisions`/`get_revision` are called only when capabilities.revisions.

    `wait_operation` reports the target's own phases while a write runs (a queued resource's QUEUED,
    PROVISIONING...), which the deploy watch shows as progress; a target without revisions is ready when
    `get_service(...).ready` says so once the operation is done."""

    @property
    def kind(self) -> str:
        """The name profiles use for it (`target:` in skills/data/profiles.yaml), e.g. "cloud-run"."""
        ...

    @property
    def display(self) -> str:
        """As people name it, e.g. "Cloud Run"."""
        ...

    @property
    def capabilities(self) -> TargetCapabilities: ...

    @property
    def logs(self) -> Logs | None:
        """The serving logs (None: not readable here)."""
        ...

    @property
    def metrics(self) -> Metrics | None: ...

    async def plan(
        self,
        kind: ActionKind,
        params: dict[str, Any],
        env: DeployEnv,
        *,
        offline: bool = False,
        quotas: QuotaReader | None = None,
    ) -> Plan:
        """A write plan (deploy, redeploy, scale, rollback, destroy, promote) in this target's spec; `offline`
        (deploy): rendered without reading the running service; `quotas`: the project's, for a plan whose
        refusal depends on them (a canary needs room for two revisions)."""
        ...

    def diff(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[FieldChange]:
        """Changed fields between two spec documents (or two revisions' configurations), as shown to people
        (secret-looking values masked)."""
        ...

    def fingerprint(self, spec: dict[str, Any] | None) -> str:
        """A stable hash of a spec as read back (what a plan was computed against)."""
        ...

    def preflight_target(self, spec: dict[str, Any], env: DeployEnv) -> PreflightTarget:
        """What a spec needs to exist before it is applied (checkpoint, image, GPU, region)."""
        ...

    def serving_of(self, spec: dict[str, Any]) -> ServingSummary | None:
        """What a spec runs, as the planner reads it back (None: not a catalog model)."""
        ...

    def export(self, service: str, spec: dict[str, Any], env: DeployEnv) -> ExportedSpec: ...

    def progress_stages(self, plan: Plan) -> ProgressStages:
        """The stages `plan`'s write goes through on this target, in its own words (Cloud Run: a revision's;
        a TPU queued resource: its states), and what to expect while it runs."""
        ...

    async def hourly_cost(self, info: ServiceInfo, region: str | None) -> CostReport:
        """What one running instance of the service costs per hour, from the same price function its plans and
        fit use (Cloud Run: instance-based rates in `region`; a TPU slice: its chips at its tier's rate in its
        zone's region). `usd_per_hour` None: no sourced price."""
        ...

    def sendable(self, spec: dict[str, Any]) -> dict[str, Any]:
        """A spec read back, as a request may send it (output-only fields away)."""
        ...


def require(target: ServingTarget, capability: Capability, service: str) -> None:
    """Refuse a command the target cannot do, saying which target and what to do instead."""
    if getattr(target.capabilities, capability):
        return
    lacks, instead = _LACKS[capability]
    raise TargetUnsupported(
        f"`{service}` runs on {target.display}, which {lacks}.", instead[0].upper() + instead[1:] + "."
    )

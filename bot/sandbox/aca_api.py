"""An Azure Resource Manager stand-in for Microsoft.App (Azure Container Apps), reached by the real
azure-mgmt-appcontainers client (api-version 2026-07-01) over HTTPS on 127.0.0.1.

What it serves, exactly the endpoints bot/adapters/container_apps.py calls:
- managedEnvironments/{env} (GET, with its workloadProfiles), locations/{loc}/usages and
  locations/{loc}/availableManagedEnvironmentsWorkloadProfileTypes (GET);
- containerApps/{app}: GET, PUT and DELETE as ARM long-running operations: PUT answers 201 (create) or 200
  (update) with `Azure-AsyncOperation` and `Retry-After`, DELETE 202 with `Location` and `Retry-After` (the headers
  the SDK's _operations.py reads for each); the operation status document is {"id", "name", "status", "startTime",
  "endTime", "error"} with status InProgress, Succeeded or Failed (ARM's async operation contract), served at
  locations/{loc}/containerappOperationStatuses/{id}; the delete's Location URL (containerappOperationResults)
  answers 202 until done, then 204;
- containerApps/{app}/revisions (list) and revisions/{name} (GET).

Behaviour: a PUT whose template differs from the latest revision's makes a revision `<app>--<suffix>`
(template.revisionSuffix, else seven lower-case characters as ACA names them, e.g. containerappdemo3--3w8yoe8 in
microsoft/azure-container-apps#72); it provisions for PROVISION_S of the sandbox clock (Provisioning ->
Provisioned; app provisioningState InProgress -> Succeeded, latestReadyRevisionName follows), then runs as the
`runtime` hook says (bot/sandbox/aca_replicas.py: Processing while vLLM starts, Running + Healthy once /health
answers). activeRevisionsMode Single deactivates the previous revision once the new one is provisioned. Traffic
weights must sum to 100 and name revisions that exist (or latestRevision). A revision made to fail
(`fail_next_revision`) ends Failed, and so do the app and the operation, with ACA's ContainerAppOperationError.

Refusals, in ARM's error shape {"error": {"code", "message"}}, with wording from where it was found:
- no bearer token: 401 AuthenticationFailed "Authentication failed. The 'Authorization' header is missing." (ARM);
- api-version: 400 InvalidApiVersionParameter "The api-version 'X' is invalid. The supported versions are '...'."
  (as pasted in ansible-collections/azure#1739, Azure/azure-cli#28038, hashicorp/vault-plugin-secrets-azure#13);
  none: 400 MissingApiVersionParameter;
- a member no model of the REST spec defines (bot/sandbox/aca_schema.py): 400 ContainerAppInvalidSchema "Invalid
  request body for container app. Path: ... Does not conform to Container App schema, ..." (microsoft/
  azure-container-apps#436, Azure-Samples/apptemplate-wordpress-on-aca#13); JSON that does not parse: 400
  InvalidRequestContent "The request content was invalid and could not be deserialized: ..." (MicrosoftDocs/
  azure-docs#114696);
- environmentId other than the environment's: 400 InvalidManagedEnvironmentId "Invalid ManagedEnvironmentId value
  '...'." (microsoft/azure-container-apps#194); a container without image: 400 ContainerAppImageRequired
  "Container with name '...' must have an 'Image' property specified." (Azure-Samples/container-apps-connect-
  multiple-apps#6);
- a missing resource: 404 ResourceNotFound "The Resource 'Microsoft.App/containerApps/X' under resource group 'RG'
  was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix" (microsoft/TailwindTraders#25,
  Azure/azure-sdk-for-js#20042); another resource group: 404 ResourceGroupNotFound "Resource group 'X' could not
  be found." (MicrosoftDocs/azure-docs#121192);
- GPU quota: 400 QuotaExceeded with ARM's regional quota wording ("Operation could not be completed as it results
  in exceeding approved ... quota. Additional details - ... Current Limit: N, Current Usage: N, Additional
  Required: N", nforgeio/neonKUBE#1671, Azure/Mission-Critical-Connected#139), numbers from the seeded usage and
  what the apps' replicas hold.
Not found in any source, so the sandbox's own words (codes kept in ACA's ContainerApp* style): a
workloadProfileName the environment lacks (ContainerAppWorkloadProfileNotFound), traffic weights that do not
sum to 100 or name an unknown revision (ContainerAppInvalidTrafficWeight), a traffic label that is no DNS label or
is used twice (ContainerAppInvalidTrafficLabel), an app name ACA would refuse
(ContainerAppInvalidName, as recalled from ACA's answers), a location other than the environment's, a revision
suffix used twice, a PUT while a delete runs.

Time is the sandbox clock's (`now`); phase durations are sandbox estimates, not measurements of ACA.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route

from bot.sandbox.aca_schema import CONTAINER_APP, unknown_member
from bot.sandbox.tls import serve_tls

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
API_VERSION = "2026-07-01"  # the one azure-mgmt-appcontainers 5.1.0 sends (its _configuration.py)
PROVISION_S = 20.0  # simulated seconds a revision provisions (sandbox estimate)
CONFIG_S = 2.0  # a PUT that makes no revision (traffic, tags) settles this fast (sandbox estimate)
DELETE_S = 10.0
_EPOCH = datetime(2026, 12, 1, tzinfo=UTC)
_APP_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")
_RESOURCE_HELP = "For more details please go to https://aka.ms/ARMResourceNotFoundFix"
_SCHEMA_HELP = (
    "Does not conform to Container App schema, please visit for more information "
    "https://docs.microsoft.com/azure/container-apps/azure-resource-manager-api-spec?tabs=arm-template#container-app"
)

# (running state, health state, replicas) of a provisioned, active revision: the runtime hook's answer
Runtime = tuple[str, str, int]


def gpus_of(profile_type: str) -> int:
    """GPUs one replica (serverless) or node (dedicated) of a workload profile type holds: A100 profiles carry one
    per 24 vCPU (NC24/NC48/NC96-A100), the T4 profile one; other profiles none."""
    if "A100" in profile_type:
        m = re.search(r"NC(\d+)", profile_type)
        return max(1, int(m.group(1)) // 24) if m else 1
    return 1 if "T4" in profile_type else 0


def _cores_of(profile_type: str) -> int:
    m = re.search(r"(?:NC|D|E)(\d+)", profile_type)
    return int(m.group(1)) if m else 4  # the Consumption profile's replica ceiling (ACA quotas page)


class ArmError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass
class _Profile:
    name: str
    type: str
    minimum_count: int | None = None
    maximum_count: int | None = None
    usage: str | None = None  # the usage (name.value) its GPUs count against


@dataclass
class _Usage:
    name: str
    limit: float
    current: float  # held outside the sandbox's apps
    display: str = ""
    unit: str = "Count"


@dataclass
class Revision:
    name: str
    app: str
    template: dict[str, Any]
    created: float
    fail: str = ""  # provisioning fails with this (fail_next_revision)
    provisioned_at: float | None = None  # when Provisioned (None: not yet, or failed)
    failed: bool = False
    active: bool = True
    deactivated_at: float | None = None

    def state(self, now: float) -> str:
        if self.failed:
            return "Failed"
        return "Provisioned" if self.provisioned_at is not None and now >= self.provisioned_at else "Provisioning"


@dataclass
class App:
    name: str
    body: dict[str, Any]  # the PUT body as sent (read-only members dropped)
    created: float
    revisions: dict[str, Revision] = field(default_factory=dict)
    latest: str = ""
    latest_ready: str = ""
    deleting_since: float | None = None


@dataclass
class _Op:
    id: str
    kind: str  # "put" or "delete"
    app: str
    started: float
    revision: str = ""  # the revision a PUT made ("" when it made none)
    status: str = "InProgress"
    error: dict[str, str] | None = None
    ended: float | None = None


def _iso(seconds: float, epoch: datetime = _EPOCH) -> str:
    return (epoch + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def _norm_location(loc: str) -> str:
    return loc.replace(" ", "").lower()


class AcaStandIn:
    def __init__(
        self,
        subscription: str,
        resource_group: str,
        environment: str,
        location: str,
        *,
        now: Callable[[], float],
        default_domain: str,
        retry_after_s: int = 1,
        token: str | None = None,
        epoch: datetime = _EPOCH,
    ) -> None:
        self.subscription = subscription
        self.resource_group = resource_group
        self.environment = environment
        self.location = location
        self.default_domain = default_domain
        self._now = now
        self.epoch = epoch  # what simulated second 0 is, as a date (the sandbox: when it started)
        self.retry_after_s = retry_after_s  # whole seconds, as ARM sends (the SDK parses it as int); tests send 0
        self.token = token  # when set, the one bearer token accepted
        # A workload profiles environment always has the Consumption profile (ACA workload profiles overview).
        self.profiles: dict[str, _Profile] = {"Consumption": _Profile("Consumption", "Consumption")}
        self.usages: dict[str, _Usage] = {}
        self.types: dict[str, list[str]] = {}  # location -> workload profile types it offers
        self.apps: dict[str, App] = {}
        self.ops: dict[str, _Op] = {}
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request that passed auth
        self.runtime: Callable[[App, Revision, float], Runtime] | None = None  # set by AcaReplicas
        self.extra_routes: list[Route] = []  # other ARM providers on this host (aca_metrics_api.py's metrics)
        self._fail_next: list[str] = []
        self._ids = itertools.count(1)
        self.lock = threading.RLock()

    # --- seeding (sandbox scenarios, tests) ---------------------------------------------------------------------

    def add_profile(
        self,
        name: str,
        type: str,  # the profile's workloadProfileType
        *,
        usage: str | None = None,
        minimum_count: int | None = None,
        maximum_count: int | None = None,
    ) -> None:
        """A workload profile of the environment; `usage` names the quota (usages name.value) its GPUs count on."""
        with self.lock:
            self.profiles[name] = _Profile(name, type, minimum_count, maximum_count, usage)

    def set_usage(self, name: str, limit: float, current: float = 0, *, display: str = "") -> None:
        """A Container Apps quota of the subscription in the location; `current` is what is held outside the
        sandbox's apps (the apps' own replicas are added when usages are read)."""
        with self.lock:
            self.usages[name] = _Usage(name, limit, current, display or name)

    def available_types(self, location: str, types: list[str]) -> None:
        with self.lock:
            self.types[_norm_location(location)] = list(types)

    def fail_next_revision(self, message: str) -> None:
        """The next revision fails to provision with `message` (ACA's "Error details")."""
        with self.lock:
            self._fail_next.append(message)

    # --- names --------------------------------------------------------------------------------------------------

    @property
    def environment_id(self) -> str:
        return (
            f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group}"
            f"/providers/Microsoft.App/managedEnvironments/{self.environment}"
        )

    def app_id(self, name: str) -> str:
        return (
            f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group}"
            f"/providers/Microsoft.App/containerApps/{name}"
        )

    def fqdn(self, app: str) -> str:
        return f"{app}.{self.default_domain}"

    def _op_url(self, base: str, kind: str, op_id: str) -> str:
        return (
            f"{base}/subscriptions/{self.subscription}/providers/Microsoft.App/locations/"
            f"{_norm_location(self.location)}/{kind}/{op_id}?api-version={API_VERSION}"
        )

    # --- the state machine --------------------------------------------------------------------------------------

    def _advance(self) -> None:
        now = self._now()
        for app in list(self.apps.values()):
            if app.deleting_since is not None:
                if now >= app.deleting_since + DELETE_S:
                    del self.apps[app.name]
                continue
            for rev in app.revisions.values():
                if rev.provisioned_at is None and not rev.failed and now >= rev.created + PROVISION_S:
                    if rev.fail:
                        rev.failed = True
                        rev.active = False
                    else:
                        rev.provisioned_at = rev.created + PROVISION_S
                        self._promote(app, rev)
        for op in self.ops.values():
            if op.status == "InProgress":
                self._settle(op, now)

    def _promote(self, app: App, rev: Revision) -> None:
        """A revision provisioned: the app's latest ready; Single mode deactivates the ones before it."""
        if list(app.revisions).index(rev.name) >= list(app.revisions).index(app.latest_ready or rev.name):
            app.latest_ready = rev.name
        if self._mode(app) == "Single":
            for other in app.revisions.values():
                if other.name != rev.name and other.active:
                    other.active = False
                    other.deactivated_at = rev.provisioned_at

    def _settle(self, op: _Op, now: float) -> None:
        app = self.apps.get(op.app)
        if op.kind == "delete":
            if app is None:
                op.status, op.ended = "Succeeded", now
            return
        if app is None:
            return
        if not op.revision:
            if now >= op.started + CONFIG_S:
                op.status, op.ended = "Succeeded", op.started + CONFIG_S
            return
        rev = app.revisions[op.revision]
        if rev.failed:
            op.status, op.ended = "Failed", rev.created + PROVISION_S
            op.error = {
                "code": "ContainerAppOperationError",
                # microsoft/azure-container-apps#1758, Azure/reddog-containerapps#12
                "message": f"Failed to provision revision for container app '{app.name}'. Error details: {rev.fail}",
            }
        elif rev.provisioned_at is not None:
            op.status, op.ended = "Succeeded", rev.provisioned_at

    def _mode(self, app: App) -> str:
        conf = app.body.get("properties", {}).get("configuration") or {}
        return str(conf.get("activeRevisionsMode") or "Single")

    def _runtime(self, app: App, rev: Revision, now: float) -> Runtime:
        if rev.failed:
            return ("Failed", "Unhealthy", 0)
        if rev.state(now) != "Provisioned":
            return ("Processing", "None", 0)
        if not rev.active:
            return ("Stopped", "None", 0)
        if self.runtime is not None:
            return self.runtime(app, rev, now)
        scale = rev.template.get("scale") or {}
        return ("Running", "Healthy", int(scale.get("minReplicas", 0) or 0))

    def weights(self, app: App) -> dict[str, int]:
        """Revision -> traffic weight as the app's ingress routes it now (latestRevision: the latest ready)."""
        conf = app.body.get("properties", {}).get("configuration") or {}
        ingress = conf.get("ingress")
        if not ingress:
            return {}
        if self._mode(app) == "Single":
            return {app.latest_ready: 100} if app.latest_ready else {}
        out: dict[str, int] = {}
        for t in ingress.get("traffic") or [{"latestRevision": True, "weight": 100}]:
            name = app.latest_ready if t.get("latestRevision") else t.get("revisionName", "")
            if name:
                out[name] = out.get(name, 0) + int(t.get("weight", 0) or 0)
        return out

    def _gpus_held(self, usage: str, now: float) -> int:
        held = 0
        for app in self.apps.values():
            prof = self.profiles.get(app.body.get("properties", {}).get("workloadProfileName") or "Consumption")
            if prof is None or prof.usage != usage:
                continue
            for rev in app.revisions.values():
                held += self._runtime(app, rev, now)[2] * gpus_of(prof.type)
        return held

    # --- documents ----------------------------------------------------------------------------------------------

    def _app_doc(self, app: App) -> dict[str, Any]:
        now = self._now()
        doc = copy.deepcopy(app.body)
        props = doc.setdefault("properties", {})
        latest = app.revisions.get(app.latest)
        if app.deleting_since is not None:
            state = "Deleting"
        elif any(op.status == "InProgress" and op.app == app.name for op in self.ops.values()):
            state = "InProgress"
        elif latest is not None and latest.failed:
            state = "Failed"
        else:
            state = "Succeeded"
        ready = app.revisions.get(app.latest_ready)
        running = self._runtime(app, ready, now)[0] if ready else ""
        props.update(
            {
                "provisioningState": state,
                "runningStatus": "Running" if running == "Running" else "Progressing",
                "managedEnvironmentId": self.environment_id,
                "environmentId": self.environment_id,
                "workloadProfileName": props.get("workloadProfileName") or "Consumption",
                "latestRevisionName": app.latest,
                "latestReadyRevisionName": app.latest_ready,
                "latestRevisionFqdn": f"{app.latest}.{self.default_domain}" if app.latest else "",
                "outboundIpAddresses": ["20.0.0.1"],
            }
        )
        conf = props.setdefault("configuration", {})
        conf.setdefault("activeRevisionsMode", "Single")
        if conf.get("ingress") is not None:
            conf["ingress"]["fqdn"] = self.fqdn(app.name)
        doc.update(
            {
                "id": self.app_id(app.name),
                "name": app.name,
                "type": "Microsoft.App/containerApps",
                "systemData": {"createdAt": _iso(app.created, self.epoch), "createdByType": "User"},
            }
        )
        return doc

    def _revision_doc(self, app: App, rev: Revision) -> dict[str, Any]:
        now = self._now()
        running, health, replicas = self._runtime(app, rev, now)
        return {
            "id": f"{self.app_id(app.name)}/revisions/{rev.name}",
            "name": rev.name,
            "type": "Microsoft.App/containerApps/revisions",
            "properties": {
                "createdTime": _iso(rev.created, self.epoch),
                "lastActiveTime": _iso(rev.deactivated_at if rev.deactivated_at is not None else now, self.epoch),
                "fqdn": f"{rev.name}.{self.default_domain}",
                "template": copy.deepcopy(rev.template),
                "active": rev.active,
                "replicas": replicas,
                "trafficWeight": self.weights(app).get(rev.name, 0),
                "provisioningError": rev.fail if rev.failed else "",
                "healthState": health,
                "provisioningState": rev.state(now),
                "runningState": running,
            },
        }

    def _not_found(self, kind: str, name: str) -> ArmError:
        return ArmError(
            404,
            "ResourceNotFound",
            f"The Resource 'Microsoft.App/{kind}/{name}' under resource group '{self.resource_group}' was not "
            f"found. {_RESOURCE_HELP}",
        )

    def _app(self, name: str) -> App:
        app = self.apps.get(name)
        if app is None:
            raise self._not_found("containerApps", name)
        return app

    # --- request checks -----------------------------------------------------------------------------------------

    def _check(self, request: Request) -> None:
        auth = request.headers.get("authorization", "")
        if not auth:
            raise ArmError(401, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing.")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token or (self.token is not None and token != self.token):
            raise ArmError(401, "InvalidAuthenticationToken", "The access token is invalid.")
        versions = request.query_params.getlist("api-version")
        if not versions:
            raise ArmError(
                400,
                "MissingApiVersionParameter",
                "The api-version query parameter (?api-version=) is required for all requests.",
            )
        if versions[-1] != API_VERSION:
            raise ArmError(
                400,
                "InvalidApiVersionParameter",
                f"The api-version '{versions[-1]}' is invalid. The supported versions are '{API_VERSION}'.",
            )
        p = request.path_params
        if p.get("sub", self.subscription) != self.subscription:
            raise ArmError(404, "SubscriptionNotFound", f"The subscription '{p['sub']}' could not be found.")
        if p.get("rg", self.resource_group).lower() != self.resource_group.lower():
            raise ArmError(404, "ResourceGroupNotFound", f"Resource group '{p['rg']}' could not be found.")
        self.requests.append((request.method, request.url.path))

    def _validate_put(self, name: str, body: Any) -> dict[str, Any]:
        if not _APP_NAME.match(name) or "--" in name:
            raise ArmError(
                400,
                "ContainerAppInvalidName",
                f"Invalid ContainerApp name '{name}'. A name must consist of lower case alphanumeric characters or "
                "'-', start with an alphabetic character, and end with an alphanumeric character and cannot have "
                "'--'. The length must not be more than 32 characters.",
            )
        if not isinstance(body, dict):
            raise ArmError(400, "ContainerAppInvalidSchema", f"Invalid request body for container app. {_SCHEMA_HELP}")
        bad = unknown_member(body, CONTAINER_APP)
        if bad is not None:
            raise ArmError(
                400, "ContainerAppInvalidSchema", f"Invalid request body for container app. Path: {bad}. {_SCHEMA_HELP}"
            )
        if not body.get("location"):
            raise ArmError(400, "LocationRequired", "The location property is required for this definition.")
        if _norm_location(str(body["location"])) != _norm_location(self.location):
            raise ArmError(
                400,
                "InvalidManagedEnvironmentId",  # the environment is elsewhere: ARM names the environment id
                f"Invalid ManagedEnvironmentId value '{self.environment_id}' for location '{body['location']}'.",
            )
        props = body.get("properties") or {}
        env_id = props.get("environmentId") or props.get("managedEnvironmentId") or ""
        if str(env_id).lower() != self.environment_id.lower():
            raise ArmError(400, "InvalidManagedEnvironmentId", f"Invalid ManagedEnvironmentId value '{env_id}'.")
        wp = props.get("workloadProfileName") or "Consumption"
        if wp not in self.profiles:
            raise ArmError(
                400,
                "ContainerAppWorkloadProfileNotFound",
                f"Workload profile '{wp}' was not found in managed environment '{self.environment}'. "
                f"Available workload profiles: {', '.join(sorted(self.profiles))}.",
            )
        template = props.get("template") or {}
        containers = template.get("containers") or []
        if not containers:
            raise ArmError(400, "ContainerAppContainersRequired", "Container app must have at least one container.")
        for c in containers:
            if not c.get("image"):
                raise ArmError(
                    400,
                    "ContainerAppImageRequired",
                    f"Container with name '{c.get('name', '')}' must have an 'Image' property specified.",
                )
        return props

    def _validate_traffic(self, app: App | None, props: dict[str, Any]) -> None:
        conf = props.get("configuration") or {}
        traffic = (conf.get("ingress") or {}).get("traffic")
        if not traffic:
            return
        total = sum(int(t.get("weight", 0) or 0) for t in traffic)
        if total != 100:
            raise ArmError(
                400,
                "ContainerAppInvalidTrafficWeight",
                f"The sum of traffic weights must be 100; the traffic given sums to {total}.",
            )
        known = set(app.revisions) if app else set()
        labels = [str(t["label"]) for t in traffic if t.get("label")]
        for label in labels:
            # A label is part of a host name (<app>---<label>.<domain>): a DNS label, and one revision per label.
            if not _LABEL.match(label) or labels.count(label) > 1:
                raise ArmError(
                    400,
                    "ContainerAppInvalidTrafficLabel",
                    f"Traffic label '{label}' is invalid or used more than once: a label is lower-case letters, "
                    "digits and '-', unique within the app's traffic.",
                )
        for t in traffic:
            name = t.get("revisionName")
            if not t.get("latestRevision") and not name:
                raise ArmError(
                    400,
                    "ContainerAppInvalidTrafficWeight",
                    "A traffic weight must name a revision (revisionName) or set latestRevision.",
                )
            if name and name not in known:
                raise ArmError(
                    400,
                    "ContainerAppInvalidTrafficWeight",
                    f"Revision '{name}' in the traffic weights does not exist for container app "
                    f"'{app.name if app else ''}'.",
                )

    def _check_quota(self, props: dict[str, Any]) -> None:
        prof = self.profiles[props.get("workloadProfileName") or "Consumption"]
        if prof.usage is None or prof.usage not in self.usages:
            return
        usage = self.usages[prof.usage]
        scale = (props.get("template") or {}).get("scale") or {}
        need = gpus_of(prof.type) * max(1, int(scale.get("minReplicas", 0) or 0))
        current = usage.current + self._gpus_held(prof.usage, self._now())
        if current + need > usage.limit:
            raise ArmError(
                400,
                "QuotaExceeded",
                "Operation could not be completed as it results in exceeding approved "
                f"{usage.display} quota. Additional details - Location: {self.location}, Current Limit: "
                f"{usage.limit:g}, Current Usage: {current:g}, Additional Required: {need}, (Minimum) New Limit "
                f"Required: {current + need:g}.",
            )

    # --- handlers -----------------------------------------------------------------------------------------------

    async def _handle(self, request: Request, fn: Callable[[Request], Any]) -> Response:
        try:
            with self.lock:
                self._check(request)
                self._advance()
            request.state.raw = await request.body() if request.method == "PUT" else b""
            with self.lock:
                response: Response = fn(request)
                return response
        except ArmError as exc:
            return JSONResponse(
                {"error": {"code": exc.code, "message": exc.message}},
                status_code=exc.status,
                headers={"x-ms-failure-cause": "service"} if exc.status >= 400 else None,
            )

    def _environment(self, request: Request) -> Response:
        if request.path_params["env"].lower() != self.environment.lower():
            raise self._not_found("managedEnvironments", request.path_params["env"])
        return JSONResponse(
            {
                "id": self.environment_id,
                "name": self.environment,
                "type": "Microsoft.App/managedEnvironments",
                "location": self.location,
                "properties": {
                    "provisioningState": "Succeeded",
                    "defaultDomain": self.default_domain,
                    "staticIp": "20.0.0.2",
                    "workloadProfiles": [
                        {
                            k: v
                            for k, v in {
                                "name": p.name,
                                "workloadProfileType": p.type,
                                "minimumCount": p.minimum_count,
                                "maximumCount": p.maximum_count,
                            }.items()
                            if v is not None
                        }
                        for p in self.profiles.values()
                    ],
                },
            }
        )

    def _available(self, request: Request) -> Response:
        loc = _norm_location(request.path_params["loc"])
        value = []
        for t in self.types.get(loc, []):
            gpus = gpus_of(t)
            props: dict[str, Any] = {
                "category": "GPU" if gpus else "GeneralPurpose",
                "applicability": "LocationDefault",
                "cores": _cores_of(t),
                "displayName": t,
            }
            if gpus:
                props["gpus"] = gpus
            value.append(
                {
                    "id": f"/subscriptions/{self.subscription}/providers/Microsoft.App/locations/{loc}"
                    f"/availableManagedEnvironmentsWorkloadProfileTypes/{t}",
                    "name": t,
                    "type": "Microsoft.App/locations/availableManagedEnvironmentsWorkloadProfileTypes",
                    "location": self.location,
                    "properties": props,
                }
            )
        return JSONResponse({"value": value})

    def _usages(self, request: Request) -> Response:
        if _norm_location(request.path_params["loc"]) != _norm_location(self.location):
            return JSONResponse({"value": []})
        return self._usage_list()

    def _environment_usages(self, request: Request) -> Response:
        if request.path_params["env"].lower() != self.environment.lower():
            raise self._not_found("managedEnvironments", request.path_params["env"])
        return self._usage_list()

    def _usage_list(self) -> Response:
        # The sandbox keeps one set of quotas; the environment's (ManagedEnvironmentConsumption*Gpus) and the
        # subscription's in the region are both answered from it, each as its own usages list.
        now = self._now()
        return JSONResponse(
            {
                "value": [
                    {
                        "unit": u.unit,
                        "currentValue": u.current + self._gpus_held(u.name, now),
                        "limit": u.limit,
                        "name": {"value": u.name, "localizedValue": u.display},
                    }
                    for u in self.usages.values()
                ]
            }
        )

    def _get_app(self, request: Request) -> Response:
        return JSONResponse(self._app_doc(self._app(request.path_params["app"])))

    def _put_app(self, request: Request) -> Response:
        raw = request.state.raw
        name = request.path_params["app"]
        try:
            body = json.loads(raw or b"null")
        except ValueError as exc:
            raise ArmError(
                400,
                "InvalidRequestContent",
                f"The request content was invalid and could not be deserialized: '{exc}'.",
            ) from None
        props = self._validate_put(name, body)
        existing = self.apps.get(name)
        if existing is not None and existing.deleting_since is not None:
            raise ArmError(409, "ContainerAppOperationInProgress", f"Container app '{name}' is being deleted.")
        self._validate_traffic(existing, props)
        template = copy.deepcopy(props.get("template") or {})
        latest = existing.revisions.get(existing.latest) if existing else None
        if latest is None or latest.template != template:
            self._check_quota(props)
        now = self._now()
        stored = _without_read_only(body)
        app = existing or App(name, stored, now)
        app.body = stored
        op = _Op(f"{next(self._ids):08x}-aca-op", "put", name, now)
        if latest is None or latest.template != template:
            suffix = template.get("revisionSuffix") or _suffix(name, len(app.revisions))
            rev_name = f"{name}--{suffix}"
            if rev_name in app.revisions:
                raise ArmError(
                    400,
                    "ContainerAppRevisionSuffixConflict",
                    f"Revision with suffix '{suffix}' already exists for container app '{name}'.",
                )
            fail = self._fail_next.pop(0) if self._fail_next else ""
            app.revisions[rev_name] = Revision(rev_name, name, template, now, fail=fail)
            app.latest = rev_name
            op.revision = rev_name
        self.apps[name] = app
        self.ops[op.id] = op
        base = str(request.base_url).rstrip("/")
        headers = {
            "Azure-AsyncOperation": self._op_url(base, "containerappOperationStatuses", op.id),
            "Retry-After": str(self.retry_after_s),
        }
        return JSONResponse(self._app_doc(app), status_code=200 if existing else 201, headers=headers)

    def _delete_app(self, request: Request) -> Response:
        name = request.path_params["app"]
        app = self.apps.get(name)
        if app is None:
            return Response(status_code=204)  # ARM: deleting what does not exist is No Content
        if app.deleting_since is None:
            app.deleting_since = self._now()
        op = _Op(f"{next(self._ids):08x}-aca-op", "delete", name, self._now())
        self.ops[op.id] = op
        base = str(request.base_url).rstrip("/")
        headers = {
            "Location": self._op_url(base, "containerappOperationResults", op.id),
            "Retry-After": str(self.retry_after_s),
        }
        return Response(status_code=202, headers=headers)

    def _revisions(self, request: Request) -> Response:
        app = self._app(request.path_params["app"])
        return JSONResponse({"value": [self._revision_doc(app, r) for r in app.revisions.values()]})

    def _revision(self, request: Request) -> Response:
        app = self._app(request.path_params["app"])
        rev = app.revisions.get(request.path_params["rev"])
        if rev is None:
            raise self._not_found(f"containerApps/{app.name}/revisions", request.path_params["rev"])
        return JSONResponse(self._revision_doc(app, rev))

    def _operation(self, request: Request) -> Response:
        op = self.ops.get(request.path_params["op"])
        if op is None:
            raise ArmError(404, "OperationNotFound", f"The operation '{request.path_params['op']}' was not found.")
        doc: dict[str, Any] = {
            "id": f"/subscriptions/{self.subscription}/providers/Microsoft.App/locations/"
            f"{_norm_location(self.location)}/containerappOperationStatuses/{op.id}",
            "name": op.id,
            "status": op.status,
            "startTime": _iso(op.started, self.epoch),
        }
        if op.ended is not None:
            doc["endTime"] = _iso(op.ended, self.epoch)
        if op.error:
            doc["error"] = op.error
        headers = {"Retry-After": str(self.retry_after_s)} if op.status == "InProgress" else None
        return JSONResponse(doc, headers=headers)

    def _operation_result(self, request: Request) -> Response:
        op = self.ops.get(request.path_params["op"])
        if op is None:
            raise ArmError(404, "OperationNotFound", f"The operation '{request.path_params['op']}' was not found.")
        if op.status == "InProgress":
            return Response(status_code=202, headers={"Retry-After": str(self.retry_after_s)})
        if op.status == "Failed" and op.error:
            return JSONResponse({"error": op.error}, status_code=400)
        return Response(status_code=204)

    async def _unknown(self, request: Request) -> Response:
        for extra in self.extra_routes:  # other providers on this host, added at any time (aca_metrics_api.py)
            match, child = extra.matches(request.scope)
            if match == Match.FULL:
                scope = {**request.scope, **child}
                response: Response = await extra.endpoint(Request(scope, request.receive))
                return response
        return JSONResponse(
            {
                "error": {
                    "code": "InvalidResourceType",
                    "message": f"The resource type could not be found for path '{request.url.path}' and api version "
                    f"'{request.query_params.get('api-version', '')}'.",
                }
            },
            status_code=404,
        )

    def app(self) -> Starlette:
        sub = "/subscriptions/{sub}"
        rg = sub + "/resourceGroups/{rg}/providers/Microsoft.App"
        loc = sub + "/providers/Microsoft.App/locations/{loc}"

        def route(path: str, fn: Callable[[Request], Response], methods: list[str]) -> Route:
            async def endpoint(request: Request) -> Response:
                return await self._handle(request, fn)

            return Route(path, endpoint, methods=methods)

        return Starlette(
            routes=[
                route(rg + "/managedEnvironments/{env}", self._environment, ["GET"]),
                route(rg + "/managedEnvironments/{env}/usages", self._environment_usages, ["GET"]),
                route(loc + "/availableManagedEnvironmentsWorkloadProfileTypes", self._available, ["GET"]),
                route(loc + "/usages", self._usages, ["GET"]),
                route(loc + "/containerappOperationStatuses/{op}", self._operation, ["GET"]),
                route(loc + "/containerappOperationResults/{op}", self._operation_result, ["GET"]),
                route(rg + "/containerApps/{app}", self._get_app, ["GET"]),
                route(rg + "/containerApps/{app}", self._put_app, ["PUT"]),
                route(rg + "/containerApps/{app}", self._delete_app, ["DELETE"]),
                route(rg + "/containerApps/{app}/revisions", self._revisions, ["GET"]),
                route(rg + "/containerApps/{app}/revisions/{rev}", self._revision, ["GET"]),
                Route("/{path:path}", self._unknown, methods=["GET", "PUT", "DELETE", "POST", "PATCH"]),
            ]
        )


def _suffix(app: str, n: int) -> str:
    """Seven lower-case characters, as ACA's generated suffixes look, stable for an app's n-th revision."""
    digest = hashlib.sha256(f"{app}/{n}".encode()).digest()
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    return "".join(alphabet[b % len(alphabet)] for b in digest[:7])


def _without_read_only(body: dict[str, Any]) -> dict[str, Any]:
    """The body as stored: ARM ignores read-only members a client sends (the ones it fills in itself)."""
    out = copy.deepcopy(body)
    for k in ("id", "name", "type", "systemData"):
        out.pop(k, None)
    props = out.get("properties") or {}
    for k in (
        "provisioningState",
        "runningStatus",
        "latestRevisionName",
        "latestReadyRevisionName",
        "latestRevisionFqdn",
        "outboundIpAddresses",
        "customDomainVerificationId",
        "eventStreamEndpoint",
        "deploymentErrors",
    ):
        props.pop(k, None)
    ingress = (props.get("configuration") or {}).get("ingress") or {}
    ingress.pop("fqdn", None)
    return out


@contextmanager
def serve_aca(standin: AcaStandIn) -> Iterator[tuple[str, str]]:
    """Yield (https://127.0.0.1:PORT, CA file) while the stand-in answers there: the adapter's base_url and
    connection_verify."""
    with serve_tls(standin.app()) as served:
        yield served

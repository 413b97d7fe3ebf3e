"""A Cloud Run Admin API v2 stand-in (REST/JSON, as google-cloud-run's REST transport speaks it).

Services, revisions and long-running operations live in memory. Creating or updating a service makes a new
revision; its operation completes after `op_polls` polls, and the revision then becomes ready or fails its
startup probe (`next_revision_outcome`), with the condition wording Cloud Run uses. Calls are recorded.

As Cloud Run does, an update that leaves the template alone (a traffic move) creates no revision; enum
numbers (the client's REST transport sends integers) are normalised to names; `fail_next` injects an HTTP
error for the next matching call (method, "LIST_REVISIONS", "GET_REVISION", "GET_OPERATION" or "*").

Traffic splits and tags: a template may name its revision (RevisionTemplate.revision: prefixed with the service's
name and a dash, a DNS-1035 label, not already taken), and traffic may target that revision in the same update;
any other REVISION target must exist. The split takes effect when the new revision is ready; if it fails, the
service keeps the traffic it had. A tagged target's status carries its URL (`tag_uri`; Cloud Run's form is
`https://TAG---SERVICE-HASH-REGION.a.run.app`).
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.sandbox.cloud_run_validation import RequestRejected, dns1035_problem, validate_service

SERVICE_TYPE = "type.googleapis.com/google.cloud.run.v2.Service"
PROBE_FAILED = (
    "Revision '{rev}' is not ready and cannot serve traffic. The user-provided container failed the configured "
    "startup probe checks. Logs for this revision might contain more information."
)


class Lifecycle(Protocol):
    """Decides when and how a new revision ends (bot/sandbox/lifecycle.py), instead of `op_polls`."""

    def started(self, svc: dict[str, Any], service: str, revision: str) -> None: ...

    def tick(self) -> None: ...


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class _Op:
    name: str
    service: str
    kind: str  # create | update | delete
    polls_left: int
    revision: str
    outcome: str
    done: bool = False
    error: str = ""


class CloudRunStandIn:
    def __init__(self, project: str = "test-proj", location: str = "us-central1") -> None:
        self.project = project
        self.location = location
        self.services: dict[str, dict[str, Any]] = {}  # short name -> v2 JSON
        self.revisions: dict[str, list[dict[str, Any]]] = {}
        self.ops: dict[str, _Op] = {}
        self.requests: list[tuple[str, str]] = []  # (method, path)
        self.op_polls = 1
        self.next_revision_outcome = "ready"  # or "probe_failed"
        self.faults: list[tuple[str, int, str]] = []  # (method or '*', status, message), consumed in order
        # Called with (service, revision) when a revision is created: what its container would log as it
        # starts (a test hands it to the Cloud Logging stand-in).
        self.on_revision: Callable[[str, str], None] | None = None
        self._counter = itertools.count(1)
        self._lock = threading.Lock()
        self.lifecycle: Lifecycle | None = None  # the sandbox's revision lifecycle, when it runs one
        # (service, tag, revision) -> the tagged target's URL; the sandbox points it at its per-revision servers.
        self.tag_uri: Callable[[str, str, str], str] = lambda svc, tag, _rev: (
            f"https://{tag}---{svc}-abc123-uc.a.run.app"
        )
        self._prior_traffic: dict[str, list[dict[str, Any]]] = {}  # restored if the revision a split names fails
        # The region's GPU quota: accelerator -> (quota id, GPUs allowed), None when not limited. The sandbox reads
        # its Cloud Quotas stand-in; None (the default): no quota is enforced.
        self.gpu_quota: Callable[[str], tuple[str, int] | None] | None = None
        prefix = "/v2/projects/{project}/locations/{location}"
        self.app = Starlette(
            routes=[
                Route(prefix + "/services", self._services, methods=["GET", "POST"]),
                Route(prefix + "/services/{name}", self._service, methods=["GET", "PATCH", "DELETE"]),
                Route(prefix + "/services/{name}/revisions", self._list_revisions, methods=["GET"]),
                Route(prefix + "/services/{name}/revisions/{rev}", self._get_revision, methods=["GET"]),
                Route(prefix + "/operations/{op}", self._get_operation, methods=["GET"]),
            ]
        )

    # --- seeding, for tests ----------------------------------------------------------------------------
    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.location}"

    def seed_service(
        self,
        name: str,
        *,
        uri: str = "",
        ready: bool = True,
        min_instances: int = 0,
        max_instances: int = 1,
        gpu: str = "nvidia-l4",
        image: str = "vllm/vllm-openai:v0.25.1-cu129",  # the L4 pin (skills/data/vllm_images.yaml)
        failure_message: str = "",
    ) -> dict[str, Any]:
        template = {
            "scaling": {"minInstanceCount": min_instances, "maxInstanceCount": max_instances},
            "nodeSelector": {"accelerator": gpu},
            "maxInstanceRequestConcurrency": 4,
            "containers": [
                {
                    "image": image,
                    "args": ["--max-model-len", "16384"],
                    "resources": {
                        "limits": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"},
                        "cpuIdle": False,
                    },
                    "ports": [{"containerPort": 8080}],
                }
            ],
        }
        with self._lock:
            self.services[name] = {"name": f"{self.parent}/services/{name}", "template": template}
            self.revisions.setdefault(name, [])
            rev = self._new_revision(name, template)
        if ready:
            self._finish_revision(name, rev, "ready")
        else:
            self._finish_revision(name, rev, "probe_failed", failure_message)
        svc = self.services[name]
        svc["uri"] = uri or f"https://{name}-abc123-uc.a.run.app"
        return svc

    def fail_next(self, method: str, status: int, message: str) -> None:
        self.faults.append((method, status, message))

    # --- internals ----------------------------------------------------------------------------------
    def _new_revision(self, name: str, template: dict[str, Any]) -> str:
        n = len(self.revisions[name]) + 1
        rev_name = template.get("revision") or f"{name}-{n:05d}-{uuid.uuid4().hex[:3]}"
        rev = {
            "name": f"{self.parent}/services/{name}/revisions/{rev_name}",
            "service": f"{self.parent}/services/{name}",
            "createTime": _now(),
            # A Revision carries its template's configuration (every RevisionTemplate field but `revision` and
            # `healthCheckDisabled`, run_v2.Revision), so a revision can be read back as what it runs.
            **{k: copy.deepcopy(v) for k, v in template.items() if k not in ("revision", "healthCheckDisabled")},
            "reconciling": True,
            "conditions": [{"type": "Ready", "state": "CONDITION_RECONCILING"}],
        }
        self.revisions[name].append(rev)
        if self.lifecycle is not None:  # the sandbox decides when and how this revision ends
            self.lifecycle.started(self.services[name], name, rev_name)
        svc = self.services[name]
        svc["latestCreatedRevision"] = rev["name"]
        svc["reconciling"] = True
        svc["terminalCondition"] = {"type": "Ready", "state": "CONDITION_RECONCILING"}
        if self.on_revision is not None:
            self.on_revision(name, rev_name)
        return rev_name

    def complete_revision(self, name: str, rev_name: str, outcome: str, message: str = "") -> None:
        """End a reconciling revision: "ready", or failed with the condition `message` (the lifecycle calls it)."""
        with self._lock:
            if name in self.services:
                self._finish_revision(name, rev_name, "ready" if outcome == "ready" else "probe_failed", message)

    def _finish_revision(self, name: str, rev_name: str, outcome: str, message: str = "") -> None:
        svc = self.services[name]
        rev = next(r for r in self.revisions[name] if r["name"].endswith("/" + rev_name))
        rev["reconciling"] = False
        svc["reconciling"] = False
        if outcome == "ready":
            rev["conditions"] = [{"type": "Ready", "state": "CONDITION_SUCCEEDED", "lastTransitionTime": _now()}]
            svc["latestReadyRevision"] = rev["name"]
            svc["terminalCondition"] = {
                "type": "Ready",
                "state": "CONDITION_SUCCEEDED",
                "lastTransitionTime": _now(),
            }
            traffic = svc.get("traffic") or [{"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST", "percent": 100}]
            svc["traffic"] = traffic
            self._prior_traffic.pop(name, None)
            svc["trafficStatuses"] = self._statuses(name, rev_name)
        else:
            if name in self._prior_traffic:  # the split named this revision: the service keeps what it had
                svc["traffic"] = self._prior_traffic.pop(name)
            msg = message or PROBE_FAILED.format(rev=rev_name)
            cond = {
                "type": "Ready",
                "state": "CONDITION_FAILED",
                "revisionReason": "HEALTH_CHECK_CONTAINER_ERROR",
                "message": msg,
                "lastTransitionTime": _now(),
            }
            rev["conditions"] = [
                cond,
                {"type": "ContainerHealthy", "state": "CONDITION_FAILED", "message": msg},
            ]
            svc["terminalCondition"] = {**cond, "revisionReason": None, "reason": "REVISION_FAILED"}
            svc["terminalCondition"].pop("revisionReason")

    def _apply_traffic(self, name: str) -> None:
        svc = self.services[name]
        svc["trafficStatuses"] = self._statuses(name, svc.get("latestReadyRevision", "").rsplit("/", 1)[-1])

    def _statuses(self, name: str, latest_ready: str) -> list[dict[str, Any]]:
        """TrafficTargetStatus for each target of the service's traffic (LATEST resolved; a tag gets its URL)."""
        out = []
        for t in self.services[name].get("traffic") or []:
            latest = t.get("type") == "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST"
            rev = latest_ready if latest else t.get("revision", "")
            status = {
                "type": t.get("type", "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION"),
                "revision": rev,
                "percent": t.get("percent", 0),
            }
            if t.get("tag"):
                status["tag"] = t["tag"]
                status["uri"] = self.tag_uri(name, t["tag"], rev)
            out.append(status)
        return out

    def _quota_rejected(self, template: dict[str, Any]) -> Response | None:
        """A GPU service whose max instances exceed the region's GPU quota (one GPU per instance) is refused. The
        wording is what gcloud prints for Cloud Run's refusal, quoted in field reports (public-code index, checked
        2026-12-05): "spec.template.metadata.annotations[autoscaling.knative.dev/maxScale]: Max instances must be
        set to 3 or fewer in order to set GPU requirements. To request quota: g.co/cloudrun/gpu-quota Quota
        violated: NvidiaL4GpuAllocNoZonalRedundancyPerProjectRegion requested: 4 allowed: 3" (an L4 service) and
        the same with "set to 1 or fewer ... NvidiaRtxPro6000GpuAllocNoZonalRedundancyPerProjectRegion requested: 3
        allowed: 1" (RTX Pro 6000, where `quotas info` read 1000: that quota counts milli-GPUs, the refusal GPUs;
        public-code index file ids 68408999705 and 69641025864).
        gcloud prints a field violation as "field: description"; the v2 API's status code for it is not quoted
        anywhere found, so this is a 400 INVALID_ARGUMENT with that field violation."""
        accelerator = (template.get("nodeSelector") or {}).get("accelerator")
        if not accelerator or self.gpu_quota is None:
            return None
        limit = self.gpu_quota(accelerator)
        wanted = int((template.get("scaling") or {}).get("maxInstanceCount") or 0)
        if limit is None or wanted <= limit[1]:
            return None
        qid, allowed = limit
        field = "spec.template.metadata.annotations[autoscaling.knative.dev/maxScale]"
        message = (
            f"Max instances must be set to {allowed} or fewer in order to set GPU requirements.\n"
            f"To request quota: g.co/cloudrun/gpu-quota\nQuota violated:\n{qid} requested: {wanted} allowed: {allowed}"
        )
        return JSONResponse(RequestRejected(message, field).body, status_code=400)

    def _traffic_rejected(self, name: str, body: dict[str, Any], current: dict[str, Any] | None) -> Response | None:
        """What the API refuses that needs the service's state: a named revision that is malformed or taken, and
        traffic to a revision that does not exist (nor is being created by this request)."""
        named = (body.get("template") or {}).get("revision", "")
        taken = {r["name"].rsplit("/", 1)[-1] for r in self.revisions.get(name, [])}
        if named:
            if not named.startswith(name + "-"):
                msg = f"Revision name {named!r} must be prefixed by the name of the enclosing Service: {name!r}."
                return _error(400, msg)
            if why := dns1035_problem(named):
                return _error(400, f"Invalid revision name {named!r}: {why}.")
            unchanged = current is not None and _meaningful(body["template"]) == _meaningful(
                current.get("template", {})
            )
            if named in taken and not unchanged:
                return _error(409, f"Revision named {named!r} with different configuration already exists.")
        for t in body.get("traffic") or []:
            rev = t.get("revision", "")
            if rev and rev not in taken and rev != named:
                return _error(400, f"Revision {rev!r} referenced in traffic not found.")
        return None

    def _fault(self, method: str) -> Response | None:
        if self.lifecycle is not None:  # every request sees the simulated present
            self.lifecycle.tick()
        with self._lock:
            for i, (m, status, message) in enumerate(self.faults):
                if m in (method, "*"):
                    del self.faults[i]
                    return _error(status, message)
        return None

    def _op_json(self, op: _Op) -> dict[str, Any]:
        out: dict[str, Any] = {"name": op.name, "done": op.done}
        if op.done and op.error:
            out["error"] = {"code": 9, "message": op.error}
        elif op.done and op.service in self.services:
            out["response"] = {"@type": SERVICE_TYPE, **_public(self.services[op.service])}
        return out

    def _start_op(self, service: str, kind: str, revision: str) -> _Op:
        op = _Op(
            name=f"{self.parent}/operations/{uuid.uuid4()}",
            service=service,
            kind=kind,
            polls_left=self.op_polls,
            revision=revision,
            outcome=self.next_revision_outcome,
        )
        self.ops[op.name.rsplit("/", 1)[-1]] = op
        return op

    def _revision(self, name: str, rev_name: str) -> dict[str, Any] | None:
        if not rev_name:
            return None
        return next((r for r in self.revisions.get(name, []) if r["name"].endswith("/" + rev_name)), None)

    # --- routes -------------------------------------------------------------------------------------
    async def _services(self, request: Request) -> Response:
        self.requests.append((request.method, request.url.path))
        if (fault := self._fault(request.method)) is not None:
            return fault
        if request.method == "GET":
            return JSONResponse({"services": [_public(s) for s in self.services.values()]})
        name = request.query_params.get("serviceId", "")
        raw = json.loads(await request.body() or b"{}")
        if (rejected := _rejected(raw)) is not None:
            return rejected
        body = _names(raw)
        with self._lock:
            if name in self.services:
                return _error(409, f"Resource '{name}' already exists.")
            if (refused := self._traffic_rejected(name, body, None)) is not None:
                return refused
            if (refused := self._quota_rejected(body.get("template") or {})) is not None:
                return refused
            body["name"] = f"{self.parent}/services/{name}"
            body.setdefault("template", {})
            body["uri"] = f"https://{name}-abc123-uc.a.run.app"
            self.services[name] = body
            self.revisions[name] = []
            rev = self._new_revision(name, body["template"])
            op = self._start_op(name, "create", rev)
        return JSONResponse(self._op_json(op))

    async def _service(self, request: Request) -> Response:
        self.requests.append((request.method, request.url.path))
        if (fault := self._fault(request.method)) is not None:
            return fault
        name = request.path_params["name"]
        if name not in self.services:
            return _error(
                404,
                f"Resource '{name}' of kind 'SERVICE' in region '{self.location}' "
                f"in project '{self.project}' does not exist.",
            )
        if request.method == "GET":
            return JSONResponse(_public(self.services[name]))
        if request.method == "DELETE":
            with self._lock:
                op = self._start_op(name, "delete", "")
            return JSONResponse(self._op_json(op))
        raw = json.loads(await request.body() or b"{}")
        if (rejected := _rejected(raw)) is not None:
            return rejected
        body = _names(raw)
        with self._lock:
            svc = self.services[name]
            if (refused := self._traffic_rejected(name, body, svc)) is not None:
                return refused
            if (refused := self._quota_rejected(body.get("template") or svc.get("template") or {})) is not None:
                return refused
            new_template = "template" in body and _meaningful(body["template"]) != _meaningful(svc.get("template", {}))
            if new_template and "traffic" in body:
                self._prior_traffic[name] = copy.deepcopy(svc.get("traffic") or [])
            for key in (
                "template",
                "scaling",
                "traffic",
                "labels",
                "annotations",
                "invokerIamDisabled",
                "ingress",
            ):
                if key in body:
                    svc[key] = body[key]
            if new_template:
                rev = self._new_revision(name, svc.get("template", {}))
                op = self._start_op(name, "update", rev)
            else:  # a traffic/metadata-only change: no revision; traffic moves when the operation completes
                op = self._start_op(name, "traffic", "")
        return JSONResponse(self._op_json(op))

    async def _list_revisions(self, request: Request) -> Response:
        self.requests.append((request.method, request.url.path))
        if (fault := self._fault("LIST_REVISIONS")) is not None:
            return fault
        name = request.path_params["name"]
        return JSONResponse({"revisions": list(self.revisions.get(name, []))})

    async def _get_revision(self, request: Request) -> Response:
        self.requests.append((request.method, request.url.path))
        if (fault := self._fault("GET_REVISION")) is not None:
            return fault
        name, rev = request.path_params["name"], request.path_params["rev"]
        for r in self.revisions.get(name, []):
            if r["name"].endswith("/" + rev):
                return JSONResponse(r)
        return _error(404, f"Revision '{rev}' does not exist.")

    async def _get_operation(self, request: Request) -> Response:
        self.requests.append((request.method, request.url.path))
        if (fault := self._fault("GET_OPERATION")) is not None:
            return fault
        op = self.ops.get(request.path_params["op"])
        if op is None:
            return _error(404, "Operation not found.")
        with self._lock:
            rev = self._revision(op.service, op.revision) if self.lifecycle is not None else None
            if not op.done and rev is not None:  # the lifecycle decides: done when the revision is
                if not rev["reconciling"]:
                    op.done = True
                    if rev["conditions"][0]["state"] != "CONDITION_SUCCEEDED":
                        op.error = rev["conditions"][0].get("message", "")
            elif not op.done:
                op.polls_left -= 1
                if op.polls_left <= 0:
                    op.done = True
                    if op.kind == "delete":
                        self.services.pop(op.service, None)
                        self.revisions.pop(op.service, None)
                    elif op.kind == "traffic":
                        self._apply_traffic(op.service)
                    else:
                        self._finish_revision(op.service, op.revision, op.outcome)
                        if op.outcome != "ready":
                            op.error = self.services[op.service]["terminalCondition"]["message"]
        return JSONResponse(self._op_json(op))


_ENUM_NAMES = {
    "type": {1: "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST", 2: "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION"},
    "executionEnvironment": {1: "EXECUTION_ENVIRONMENT_GEN1", 2: "EXECUTION_ENVIRONMENT_GEN2"},
    "ingress": {
        1: "INGRESS_TRAFFIC_ALL",
        2: "INGRESS_TRAFFIC_INTERNAL_ONLY",
        3: "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER",
        4: "INGRESS_TRAFFIC_NONE",
    },
}


def _names(value: Any, key: str = "") -> Any:
    """Enum integers -> names (the REST transport sends integers; the API answers with names)."""
    if isinstance(value, dict):
        return {k: _names(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_names(v, key) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and key in _ENUM_NAMES:
        return _ENUM_NAMES[key].get(value, value)
    return value


def _meaningful(value: Any) -> Any:
    """Drop empty/default values so a template compares equal however sparsely it was sent."""
    if isinstance(value, dict):
        out = {k: _meaningful(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, "", 0, False, [], {}, "0")}
    if isinstance(value, list):
        return [_meaningful(v) for v in value]
    return value


def _public(svc: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(svc)


_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    412: "FAILED_PRECONDITION",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": status, "message": message, "status": _STATUS.get(status, "UNKNOWN")}},
        status_code=status,
    )


# --- request validation: what the real API rejects (rules in bot/sandbox/cloud_run_validation.py) ------------


def _rejected(body: dict[str, Any]) -> Response | None:
    try:
        validate_service(body)
    except RequestRejected as exc:
        return JSONResponse(exc.body, status_code=400)
    return None

"""A Cloud TPU API v2 stand-in over gRPC (google.cloud.tpu.v2.Tpu + google.longrunning.Operations), reached by
the real google-cloud-tpu client (tpu_v2.TpuClient, grpc transport) on 127.0.0.1.

What it serves, from the library's own proto-plus types (google/cloud/tpu_v2/types/cloud_tpu.py):
- AcceleratorTypes: ListAcceleratorTypes / GetAcceleratorType per zone (`projects/P/locations/ZONE`).
- QueuedResources: Create (an LRO done once the request leaves CREATING), Get, List (paged), Delete (an LRO done
  when it is gone; an ACTIVE one with its node needs `force`, as gcloud's --force). States are the proto's
  QueuedResourceState.State: CREATING -> ACCEPTED -> PROVISIONING -> ACTIVE when the zone has capacity for the
  tier (on-demand, spot, guaranteed), else WAITING_FOR_RESOURCES until capacity frees up or the queueing policy's
  valid_until_duration passes ("If the request cannot be fulfilled by this time the request will be failed":
  FAILED with the no-capacity wording real TPU errors carry); a spot node preempted -> SUSPENDING -> SUSPENDED
  (state_initiator SERVICE), its node PREEMPTED; DELETING -> gone.
- Nodes: GetNode (state READY, internal IP in network_endpoints, the metadata the create sent).
- Quota per zone and tier, counted in chips over every queued resource that exists, whatever its state: failed
  and suspended ones hold quota until deleted (marin-community/marin#87, skypilot-org/skypilot#1483); exceeding it
  is RESOURCE_EXHAUSTED "Quota 'TPUV6EPerProjectPerZoneForTPUAPI' exhausted. Limit N in zone Z" (the wording of
  real TPU quota errors, skills/data/tpu.yaml `quota_ids`).
Strict like the API: a request carrying fields the proto does not know, a malformed name, an accelerator type the
zone does not offer or a second node spec is INVALID_ARGUMENT; an unknown resource NOT_FOUND; a duplicate id
ALREADY_EXISTS; methods not served here are UNIMPLEMENTED (gRPC's own answer for an unregistered method).
Time is the sandbox clock's (`now`): state moves when asked, so tests advance the clock instead of sleeping.
Phase durations are the sandbox's choice (estimates, not measurements of Cloud TPU).
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.cloud import tpu_v2
from google.longrunning import operations_pb2
from google.protobuf import any_pb2, empty_pb2, timestamp_pb2, unknown_fields
from google.protobuf.message import Message
from google.rpc import code_pb2, status_pb2

from bot.sandbox.grpc_server import serve_grpc_services

_QRS = tpu_v2.QueuedResourceState
State: Any = _QRS.State  # proto-plus enums: members are typed as int by the stubs
NodeState: Any = tpu_v2.Node.State
_HEALTHY: Any = tpu_v2.Node.Health.HEALTHY
_ID = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_PARENT = re.compile(r"^projects/([^/]+)/locations/([a-z]+-[a-z]+\d+-(?:[a-z]|ai\d+[a-z]?))$")  # AI zones: -ai1, -ai1b
_ACCEL_TYPES = {"v6e-1": "1x1", "v6e-4": "2x2", "v6e-8": "2x4"}

_DATA = {
    State.CREATING: ("creating_data", _QRS.CreatingData),
    State.ACCEPTED: ("accepted_data", _QRS.AcceptedData),
    State.PROVISIONING: ("provisioning_data", _QRS.ProvisioningData),
    State.ACTIVE: ("active_data", _QRS.ActiveData),
    State.SUSPENDING: ("suspending_data", _QRS.SuspendingData),
    State.SUSPENDED: ("suspended_data", _QRS.SuspendedData),
    State.DELETING: ("deleting_data", _QRS.DeletingData),
}

# Simulated seconds per phase (sandbox estimates).
ACCEPT_S = 5.0
PROVISION_S = 120.0
SUSPEND_S = 30.0
DELETE_S = 20.0


def no_capacity_message(zone: str) -> str:
    """The wording of TPU capacity errors (hashicorp/terraform-provider-google#21243, gsoc-wav2vec2#11)."""
    return (
        f'There is no more capacity in the zone "{zone}"; you can try in another zone where Cloud TPU Nodes are '
        "offered (see https://cloud.google.com/tpu/docs/regions) [EID: 0x5a1dbox]"
    )


def quota_message(quota_id: str, limit: int, zone: str) -> str:
    return f"Quota '{quota_id}' exhausted. Limit {limit} in zone {zone}"


@dataclass
class _Zone:
    types: set[str]
    capacity: dict[str, int]  # tier -> free chips ("on-demand", "spot", "guaranteed")


@dataclass
class _Queued:
    qr: tpu_v2.QueuedResource
    zone: str
    tier: str
    chips: int
    created: float
    since: float  # when the current state began
    valid_until: float | None
    node_name: str
    node: tpu_v2.Node
    holds_capacity: bool = False


@dataclass
class _Op:
    op: operations_pb2.Operation
    done_when: Callable[[], Any]  # returns a proto-plus message (the response) once done, else None
    failed: Callable[[], status_pb2.Status | None] = field(default=lambda: None)


def _same(tier: str) -> tuple[str, ...]:
    """The tiers that draw on the same quota (reservations on on-demand quota)."""
    return ("spot",) if tier == "spot" else ("on-demand", "guaranteed")


def _ts(seconds: float) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=1_790_000_000 + int(seconds))


def _tier(qr: tpu_v2.QueuedResource) -> str:
    if "spot" in qr:
        return "spot"
    if "guaranteed" in qr or qr.reservation_name:  # a reservation's capacity (tpu.yaml `reservation`)
        return "guaranteed"
    return "on-demand"


class TpuStandIn:
    def __init__(self, project: str = "sandbox", now: Callable[[], float] | None = None) -> None:
        self.project = project
        self._now = now or (lambda: 0.0)
        self.zones: dict[str, _Zone] = {}
        # (quota id, zone) -> chips; a zone without an entry has no quota (0)
        self.quota: dict[tuple[str, str], int] = {}
        self.quota_ids = {
            "on-demand": "TPUV6EPerProjectPerZoneForTPUAPI",
            "guaranteed": "TPUV6EPerProjectPerZoneForTPUAPI",
            "spot": "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI",
        }
        # (quota id, region) -> chips: the regional quota a create must fit as well as the zone's (tpu.yaml
        # `quota_regional`); a region without an entry is not limited here (the sandbox seeds zone quota only)
        self.region_quota: dict[tuple[str, str], int] = {}
        self.region_quota_ids = {
            "on-demand": "TPUV6EPerProjectPerRegionForTPUAPI",
            "guaranteed": "TPUV6EPerProjectPerRegionForTPUAPI",
            "spot": "TPUV6EPreemptiblePerProjectPerRegionForTPUAPI",
        }
        self.queued: dict[str, _Queued] = {}
        self.ops: dict[str, _Op] = {}
        self.requests: list[tuple[str, Message]] = []
        self._ids = itertools.count(1)
        self._lock = threading.RLock()

    # --- set-up (sandbox scenarios, tests) ----------------------------------------------------------------------

    def add_zone(
        self,
        zone: str,
        *,
        capacity: int = 8,
        spot_capacity: int = 8,
        quota: int = 8,
        spot_quota: int = 8,
        types: tuple[str, ...] = tuple(_ACCEL_TYPES),
    ) -> None:
        with self._lock:
            self.zones[zone] = _Zone(set(types), {"on-demand": capacity, "spot": spot_capacity, "guaranteed": 0})
            self.quota[(self.quota_ids["on-demand"], zone)] = quota
            self.quota[(self.quota_ids["spot"], zone)] = spot_quota

    def set_capacity(self, zone: str, tier: str, chips: int) -> None:
        with self._lock:
            self.zones[zone].capacity[tier] = chips

    def set_quota(self, zone: str, tier: str, chips: int) -> None:
        with self._lock:
            self.quota[(self.quota_ids[tier], zone)] = chips

    def set_region_quota(self, region: str, tier: str, chips: int) -> None:
        with self._lock:
            self.region_quota[(self.region_quota_ids[tier], region)] = chips

    def preempt(self, node_id: str) -> None:
        """Cloud TPU reclaims a spot node: the node is PREEMPTED, its queued resource SUSPENDING then SUSPENDED."""
        with self._lock:
            self._advance()
            q = next((q for q in self.queued.values() if q.node_name.endswith(f"/nodes/{node_id}")), None)
            if q is None or q.qr.state.state != State.ACTIVE:
                raise ValueError(f"no ACTIVE queued resource runs node {node_id}")
            q.node.state = NodeState.PREEMPTED
            self._set(q, State.SUSPENDING, initiator=tpu_v2.QueuedResourceState.StateInitiator.SERVICE)

    def create_by_hand(self, parent: str, queued_resource_id: str, qr: tpu_v2.QueuedResource) -> None:
        """A create as gcloud would send it (sandbox scenarios: a teammate past the bot), with the same checks."""
        req = tpu_v2.CreateQueuedResourceRequest(
            parent=parent, queued_resource_id=queued_resource_id, queued_resource=qr
        )
        self.create_queued_resource(req, _Refuse())  # type: ignore[arg-type]

    def node_ip(self, node_id: str) -> str | None:
        with self._lock:
            q = next((q for q in self.queued.values() if q.node_name.endswith(f"/nodes/{node_id}")), None)
            return q.node.network_endpoints[0].ip_address if q and q.node.network_endpoints else None

    # --- the state machine --------------------------------------------------------------------------------------

    def _set(self, q: _Queued, state: Any, *, initiator: Any = None, error: str = "", at: float | None = None) -> None:
        now = self._now() if at is None else at
        st = tpu_v2.QueuedResourceState(state=state)
        if initiator is not None:
            st.state_initiator = initiator
        if state == State.FAILED:
            st.failed_data = _QRS.FailedData(error=status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message=error))
        elif state in _DATA:
            attr, cls = _DATA[state]
            setattr(st, attr, cls())
        q.qr.state = st
        q.since = now

    def _free(self, zone: str, tier: str) -> int:
        return self.zones[zone].capacity.get(tier, 0)

    def _release(self, q: _Queued) -> None:
        if q.holds_capacity:
            self.zones[q.zone].capacity[q.tier] = self._free(q.zone, q.tier) + q.chips
            q.holds_capacity = False

    def _advance(self) -> None:
        """Every transition whose time has come, each at the simulated time it was due (several may be due)."""
        now = self._now()
        moved = True
        while moved:
            moved = False
            for name, q in list(self.queued.items()):
                if self._step(name, q, now):
                    moved = True

    def _step(self, name: str, q: _Queued, now: float) -> bool:
        s = q.qr.state.state
        if s == State.CREATING and now >= q.since + ACCEPT_S:
            self._set(q, State.ACCEPTED, at=q.since + ACCEPT_S)
            return True
        if s in (State.ACCEPTED, State.WAITING_FOR_RESOURCES):
            if self._free(q.zone, q.tier) >= q.chips:
                self.zones[q.zone].capacity[q.tier] -= q.chips
                q.holds_capacity = True
                self._set(q, State.PROVISIONING, at=max(q.since, now if s == State.WAITING_FOR_RESOURCES else q.since))
                return True
            if q.valid_until is not None and now >= q.valid_until:
                self._set(q, State.FAILED, error=no_capacity_message(q.zone), at=q.valid_until)
                return True
            if s == State.ACCEPTED:
                self._set(q, State.WAITING_FOR_RESOURCES, at=q.since)
                return True
            return False
        if s == State.PROVISIONING and now >= q.since + PROVISION_S:
            at = q.since + PROVISION_S
            q.node.state = NodeState.READY
            q.node.health = _HEALTHY
            q.node.create_time = _ts(at)
            self._set(q, State.ACTIVE, at=at)
            return True
        if s == State.SUSPENDING and now >= q.since + SUSPEND_S:
            self._release(q)
            self._set(q, State.SUSPENDED, initiator=_QRS.StateInitiator.SERVICE, at=q.since + SUSPEND_S)
            return True
        if s == State.DELETING and now >= q.since + DELETE_S:
            self._release(q)
            del self.queued[name]
            return True
        return False

    # --- helpers ------------------------------------------------------------------------------------------------

    def _strict(self, request: Any, context: grpc.ServicerContext) -> None:
        """Fields the proto does not know (at any depth) are refused, as the API refuses unknown names."""

        def walk(msg: Message, path: str) -> str | None:
            if len(unknown_fields.UnknownFieldSet(msg)):
                return path or "request"
            for fd, value in msg.ListFields():
                if fd.message_type is None or fd.message_type.GetOptions().map_entry:
                    continue
                items = value if fd.is_repeated else [value]
                for item in items:
                    if (bad := walk(item, f"{path}.{fd.name}".lstrip("."))) is not None:
                        return bad
            return None

        bad = walk(type(request).pb(request), "")
        if bad is not None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"Invalid request: unknown field in {bad}")

    def _zone(self, parent: str, context: grpc.ServicerContext) -> str:
        m = _PARENT.match(parent)
        if not m:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"Invalid parent: {parent!r} (projects/P/locations/ZONE)")
            raise AssertionError("unreachable")
        if m.group(1) != self.project:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"Permission denied on resource project {m.group(1)}.")
        if m.group(2) not in self.zones:
            context.abort(grpc.StatusCode.NOT_FOUND, f"Location {m.group(2)} is not found or access is unauthorized.")
        return m.group(2)

    def _qr(self, name: str, context: grpc.ServicerContext) -> _Queued:
        parent = name.rpartition("/queuedResources/")[0]
        self._zone(parent, context)
        if name not in self.queued:
            context.abort(grpc.StatusCode.NOT_FOUND, f"Resource '{name}' was not found")
        return self.queued[name]

    def _operation(self, parent: str, verb: str, target: str, done_when: Callable[[], Any]) -> operations_pb2.Operation:
        name = f"{parent}/operations/operation-{next(self._ids)}"
        meta = any_pb2.Any()
        md = tpu_v2.OperationMetadata(create_time=_ts(self._now()), target=target, verb=verb, api_version="v2")
        meta.Pack(tpu_v2.OperationMetadata.pb(md))
        op = operations_pb2.Operation(name=name, metadata=meta, done=False)
        self.ops[name] = _Op(op, done_when)
        return self._refresh(self.ops[name])

    def _refresh(self, entry: _Op) -> operations_pb2.Operation:
        if not entry.op.done:
            response = entry.done_when()
            if response is not None:
                packed = any_pb2.Any()
                packed.Pack(type(response).pb(response) if not isinstance(response, Message) else response)
                entry.op.response.CopyFrom(packed)
                entry.op.done = True
        return entry.op

    def _used_quota(self, zone: str, quota_id: str) -> int:
        return sum(q.chips for q in self.queued.values() if q.zone == zone and self.quota_ids[q.tier] == quota_id)

    # --- RPCs ---------------------------------------------------------------------------------------------------

    def list_accelerator_types(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self._lock:
            self.requests.append(("ListAcceleratorTypes", request))
            self._strict(request, context)
            zone = self._zone(request.parent, context)
            types = [
                tpu_v2.AcceleratorType(
                    name=f"{request.parent}/acceleratorTypes/{t}",
                    type_=t,
                    accelerator_configs=[
                        tpu_v2.AcceleratorConfig(type_=tpu_v2.AcceleratorConfig.Type.V6E, topology=_ACCEL_TYPES[t])
                    ],
                )
                for t in sorted(self.zones[zone].types)
            ]
            return tpu_v2.ListAcceleratorTypesResponse(accelerator_types=types)

    def get_accelerator_type(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self._lock:
            self._strict(request, context)
            parent, _, t = request.name.rpartition("/acceleratorTypes/")
            zone = self._zone(parent, context)
            if t not in self.zones[zone].types:
                context.abort(grpc.StatusCode.NOT_FOUND, f"Resource '{request.name}' was not found")
            cfg = tpu_v2.AcceleratorConfig(type_=tpu_v2.AcceleratorConfig.Type.V6E, topology=_ACCEL_TYPES[t])
            return tpu_v2.AcceleratorType(name=request.name, type_=t, accelerator_configs=[cfg])

    def create_queued_resource(self, request: Any, context: grpc.ServicerContext) -> operations_pb2.Operation:
        with self._lock:
            self.requests.append(("CreateQueuedResource", request))
            self._strict(request, context)
            self._advance()
            zone = self._zone(request.parent, context)
            qid = request.queued_resource_id
            if not _ID.match(qid):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"Invalid queued_resource_id {qid!r}")
            name = f"{request.parent}/queuedResources/{qid}"
            if name in self.queued:
                context.abort(grpc.StatusCode.ALREADY_EXISTS, f"Resource '{name}' already exists")
            qr = request.queued_resource
            specs = list(qr.tpu.node_spec)
            if len(specs) != 1:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "Exactly one node_spec is supported for a single slice")
            spec = specs[0]
            if spec.parent != request.parent:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"node_spec.parent must be {request.parent}")
            if not _ID.match(spec.node_id):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"Invalid node_id {spec.node_id!r}")
            node = tpu_v2.Node(spec.node)
            if not node.runtime_version:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "node.runtime_version is required")
            acc = node.accelerator_type
            if acc not in self.zones[zone].types:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"Cloud TPU received a bad request. The requested accelerator configuration for accelerator type, "
                    f"{acc!r}, could not be found in zone {zone}.",
                )
            if qr.reservation_name and not qr.reservation_name.startswith(f"{request.parent}/reservations/"):
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"Invalid reservation_name {qr.reservation_name!r} (projects/P/locations/ZONE/reservations/NAME)",
                )
            tier = _tier(qr)
            chips = int(acc.rsplit("-", 1)[1])
            quota_id = self.quota_ids[tier]
            limit = self.quota.get((quota_id, zone), 0)
            if self._used_quota(zone, quota_id) + chips > limit:
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, quota_message(quota_id, limit, zone))
            region = zone.rsplit("-", 1)[0]
            rid = self.region_quota_ids[tier]
            if (rid, region) in self.region_quota:  # held like the zone's: every queued resource, whatever its state
                used = sum(
                    q.chips
                    for q in self.queued.values()
                    if q.zone.rsplit("-", 1)[0] == region and q.tier in _same(tier)
                )
                rlimit = self.region_quota[(rid, region)]
                if used + chips > rlimit:
                    context.abort(
                        grpc.StatusCode.RESOURCE_EXHAUSTED,
                        f"Quota '{rid}' exhausted. Limit {rlimit} in region {region}",
                    )
            now = self._now()
            node_name = f"{request.parent}/nodes/{spec.node_id}"
            n = len(self.queued) + 1
            node.name = node_name
            node.state = NodeState.CREATING
            node.queued_resource = name
            node.id = 7_000_000 + n
            node.network_endpoints = [
                tpu_v2.NetworkEndpoint(ip_address=f"10.128.{list(self.zones).index(zone)}.{n + 1}", port=8470)
            ]
            node.scheduling_config = tpu_v2.SchedulingConfig(spot=tier == "spot", reserved=tier == "guaranteed")
            node.accelerator_config = tpu_v2.AcceleratorConfig(
                type_=tpu_v2.AcceleratorConfig.Type.V6E, topology=_ACCEL_TYPES[acc]
            )
            stored = tpu_v2.QueuedResource(qr)
            stored.name = name
            stored.create_time = _ts(now)
            valid = qr.queueing_policy.valid_until_duration if "queueing_policy" in qr else None
            until = now + valid.total_seconds() if valid is not None and valid.total_seconds() > 0 else None
            q = _Queued(stored, zone, tier, chips, now, now, until, node_name, node)
            self.queued[name] = q
            self._set(q, State.CREATING)

            def accepted() -> Any:
                current = self.queued.get(name)
                if current is None or current.qr.state.state == State.CREATING:
                    return None
                return current.qr

            return self._operation(request.parent, "create", name, accepted)

    def get_queued_resource(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self._lock:
            self._strict(request, context)
            self._advance()
            return self._qr(request.name, context).qr

    def list_queued_resources(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self._lock:
            self._strict(request, context)
            self._advance()
            self._zone(request.parent, context)
            mine = [q.qr for n, q in sorted(self.queued.items()) if n.startswith(f"{request.parent}/")]
            try:
                start = int(request.page_token or 0)
            except ValueError:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "Invalid page_token")
                raise AssertionError("unreachable") from None
            size = request.page_size if request.page_size > 0 else 100
            page = mine[start : start + size]
            token = str(start + size) if start + size < len(mine) else ""
            return tpu_v2.ListQueuedResourcesResponse(queued_resources=page, next_page_token=token)

    def delete_queued_resource(self, request: Any, context: grpc.ServicerContext) -> operations_pb2.Operation:
        with self._lock:
            self.requests.append(("DeleteQueuedResource", request))
            self._strict(request, context)
            self._advance()
            q = self._qr(request.name, context)
            state = q.qr.state.state
            if state in (State.ACTIVE, State.PROVISIONING, State.SUSPENDING) and not request.force:
                context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"Queued resource '{request.name}' has nodes ({state.name}); delete them first or set force.",
                )
            if state != State.DELETING:
                if q.node.state != NodeState.PREEMPTED:
                    q.node.state = NodeState.DELETING
                self._set(q, State.DELETING)
            name = request.name
            parent = name.rpartition("/queuedResources/")[0]
            return self._operation(
                parent, "delete", name, lambda: empty_pb2.Empty() if name not in self.queued else None
            )

    def get_node(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self._lock:
            self._strict(request, context)
            self._advance()
            parent, _, _ = request.name.rpartition("/nodes/")
            self._zone(parent, context)
            q = next((q for q in self.queued.values() if q.node_name == request.name), None)
            if q is None or q.qr.state.state in (
                State.CREATING,
                State.ACCEPTED,
                State.WAITING_FOR_RESOURCES,
                State.FAILED,
            ):
                context.abort(grpc.StatusCode.NOT_FOUND, f"Resource '{request.name}' was not found")
                raise AssertionError("unreachable")
            return q.node

    def get_operation(self, request: operations_pb2.GetOperationRequest, context: grpc.ServicerContext) -> Any:
        with self._lock:
            self._strict_pb(request, context)
            self._advance()
            entry = self.ops.get(request.name)
            if entry is None:
                context.abort(grpc.StatusCode.NOT_FOUND, f"Operation '{request.name}' was not found")
                raise AssertionError("unreachable")
            return self._refresh(entry)

    def _strict_pb(self, request: Message, context: grpc.ServicerContext) -> None:
        if len(unknown_fields.UnknownFieldSet(request)):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "Invalid request: unknown field")


class _Refuse:
    """A servicer context for calls made in-process: an abort is an exception with the status and message."""

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise ValueError(f"{code.name}: {details}")

    def is_active(self) -> bool:
        return True


def _handler(fn: Callable[..., Any], req: Any, resp: Any) -> grpc.RpcMethodHandler:
    return grpc.unary_unary_rpc_method_handler(
        fn, request_deserializer=req.deserialize, response_serializer=resp.serialize
    )


def _pb_handler(fn: Callable[..., Any], req: type[Message]) -> grpc.RpcMethodHandler:
    return grpc.unary_unary_rpc_method_handler(
        fn, request_deserializer=req.FromString, response_serializer=lambda m: m.SerializeToString()
    )


class _Raw:
    """Serializer for handlers that return plain protobuf messages (operations) under a proto-plus request."""

    @staticmethod
    def serialize(message: Message) -> bytes:
        return message.SerializeToString()


def tpu_services(standin: TpuStandIn) -> dict[str, dict[str, grpc.RpcMethodHandler]]:
    v2 = tpu_v2
    return {
        "google.cloud.tpu.v2.Tpu": {
            "ListAcceleratorTypes": _handler(
                standin.list_accelerator_types, v2.ListAcceleratorTypesRequest, v2.ListAcceleratorTypesResponse
            ),
            "GetAcceleratorType": _handler(
                standin.get_accelerator_type, v2.GetAcceleratorTypeRequest, v2.AcceleratorType
            ),
            "CreateQueuedResource": _handler(standin.create_queued_resource, v2.CreateQueuedResourceRequest, _Raw),
            "GetQueuedResource": _handler(standin.get_queued_resource, v2.GetQueuedResourceRequest, v2.QueuedResource),
            "ListQueuedResources": _handler(
                standin.list_queued_resources, v2.ListQueuedResourcesRequest, v2.ListQueuedResourcesResponse
            ),
            "DeleteQueuedResource": _handler(standin.delete_queued_resource, v2.DeleteQueuedResourceRequest, _Raw),
            "GetNode": _handler(standin.get_node, v2.GetNodeRequest, v2.Node),
        },
        "google.longrunning.Operations": {
            "GetOperation": _pb_handler(standin.get_operation, operations_pb2.GetOperationRequest),
        },
    }


@contextmanager
def serve_tpu(standin: TpuStandIn, workers: int = 4) -> Iterator[str]:
    """Yield '127.0.0.1:PORT' while the TPU API and its operations answer there."""
    with serve_grpc_services(tpu_services(standin), workers) as target:
        yield target

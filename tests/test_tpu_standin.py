"""The Cloud TPU API stand-in, reached by the real google-cloud-tpu client over gRPC on 127.0.0.1: accelerator
types per zone, queued resources through their states (long-running operations), capacity, quota, preemption,
delete; malformed or unknown-field requests get the API's gRPC status codes."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from google.api_core import exceptions as gexc
from google.cloud import tpu_v2
from google.cloud.tpu_v2.services.tpu.transports import TpuGrpcTransport
from google.protobuf import duration_pb2

from bot.sandbox.clock import SandboxClock
from bot.sandbox.tpu_api import PROVISION_S, TpuStandIn, serve_tpu

State = tpu_v2.QueuedResourceState.State
P = "projects/sandbox/locations"


@pytest.fixture
def env() -> Iterator[tuple[TpuStandIn, tpu_v2.TpuClient, SandboxClock]]:
    clock = SandboxClock(speed=0)
    standin = TpuStandIn(now=clock.now)
    standin.add_zone("us-east5-a", capacity=0, spot_capacity=0)  # the first zone has no capacity
    standin.add_zone("europe-west4-a", capacity=8, quota=8)
    standin.add_zone("us-east1-d", capacity=8, quota=0, spot_quota=0)
    with serve_tpu(standin) as target:
        channel = grpc.insecure_channel(target)
        client = tpu_v2.TpuClient(transport=TpuGrpcTransport(channel=channel))
        yield standin, client, clock
        client.transport.close()


def _qr(zone: str, node_id: str, acc: str = "v6e-4", *, spot: bool = False, wait_s: int = 0) -> tpu_v2.QueuedResource:
    spec = tpu_v2.QueuedResource.Tpu.NodeSpec(
        parent=f"{P}/{zone}",
        node_id=node_id,
        node=tpu_v2.Node(accelerator_type=acc, runtime_version="v2-alpha-tpuv6e", metadata={"startup-script": "echo"}),
    )
    qr = tpu_v2.QueuedResource(tpu=tpu_v2.QueuedResource.Tpu(node_spec=[spec]))
    if spot:
        qr.spot = tpu_v2.QueuedResource.Spot()
    if wait_s:
        qr.queueing_policy = tpu_v2.QueuedResource.QueueingPolicy(
            valid_until_duration=duration_pb2.Duration(seconds=wait_s)
        )
    return qr


def _create(client: tpu_v2.TpuClient, zone: str, qid: str, **kw: object):
    return client.create_queued_resource(
        parent=f"{P}/{zone}",
        queued_resource_id=qid,
        queued_resource=_qr(zone, f"{qid}-node", **kw),  # type: ignore[arg-type]
    )


def test_accelerator_types_per_zone(env) -> None:
    _, client, _ = env
    types = [t.type_ for t in client.list_accelerator_types(parent=f"{P}/europe-west4-a")]
    assert types == ["v6e-1", "v6e-4", "v6e-8"]
    got = client.get_accelerator_type(name=f"{P}/europe-west4-a/acceleratorTypes/v6e-8")
    assert got.accelerator_configs[0].topology == "2x4"
    with pytest.raises(gexc.NotFound):
        list(client.list_accelerator_types(parent=f"{P}/us-west9-z"))


def test_a_queued_resource_goes_from_creating_to_active_with_a_node_and_its_ip(env) -> None:
    _, client, clock = env
    op = _create(client, "europe-west4-a", "gemma")
    assert client.get_queued_resource(name=f"{P}/europe-west4-a/queuedResources/gemma").state.state == State.CREATING
    clock.advance(5)
    qr = op.result(timeout=5)  # the LRO is done once the request is accepted, polled through GetOperation
    assert qr.name.endswith("/queuedResources/gemma")
    assert client.get_queued_resource(name=qr.name).state.state == State.PROVISIONING
    clock.advance(PROVISION_S)
    assert client.get_queued_resource(name=qr.name).state.state == State.ACTIVE
    node = client.get_node(name=f"{P}/europe-west4-a/nodes/gemma-node")
    assert node.state == tpu_v2.Node.State.READY and node.accelerator_type == "v6e-4"
    assert node.network_endpoints[0].ip_address.startswith("10.") and node.metadata["startup-script"] == "echo"
    assert [q.name for q in client.list_queued_resources(parent=f"{P}/europe-west4-a")] == [qr.name]


def test_no_capacity_waits_then_fails_with_the_real_wording(env) -> None:
    _, client, clock = env
    op = _create(client, "us-east5-a", "waits", wait_s=600)
    clock.advance(5)
    qr = op.result(timeout=5)
    assert client.get_queued_resource(name=qr.name).state.state == State.WAITING_FOR_RESOURCES
    clock.advance(600)
    failed = client.get_queued_resource(name=qr.name).state
    assert failed.state == State.FAILED
    assert 'There is no more capacity in the zone "us-east5-a"' in failed.failed_data.error.message


def test_quota_is_counted_over_every_queued_resource_and_failed_ones_hold_it(env) -> None:
    standin, client, clock = env
    with pytest.raises(gexc.ResourceExhausted, match=r"Quota 'TPUV6EPerProjectPerZoneForTPUAPI' exhausted\. Limit 0"):
        _create(client, "us-east1-d", "noquota")
    standin.set_quota("us-east5-a", "on-demand", 4)
    op = _create(client, "us-east5-a", "first", wait_s=60)
    clock.advance(65)
    op.result(timeout=5)
    assert client.get_queued_resource(name=f"{P}/us-east5-a/queuedResources/first").state.state == State.FAILED
    with pytest.raises(gexc.ResourceExhausted):  # the FAILED one still holds the 4 chips
        _create(client, "us-east5-a", "second")
    client.delete_queued_resource(name=f"{P}/us-east5-a/queuedResources/first")
    clock.advance(30)
    _create(client, "us-east5-a", "second")


def test_spot_preemption_suspends_and_delete_of_active_needs_force(env) -> None:
    standin, client, clock = env
    standin.set_capacity("europe-west4-a", "spot", 8)
    op = _create(client, "europe-west4-a", "spot1", spot=True)
    clock.advance(5)
    name = op.result(timeout=5).name
    clock.advance(PROVISION_S)
    assert client.get_node(name=f"{P}/europe-west4-a/nodes/spot1-node").scheduling_config.spot
    with pytest.raises(gexc.FailedPrecondition):
        client.delete_queued_resource(name=name)
    standin.preempt("spot1-node")
    qr = client.get_queued_resource(name=name)
    assert qr.state.state == State.SUSPENDING
    assert qr.state.state_initiator == tpu_v2.QueuedResourceState.StateInitiator.SERVICE
    clock.advance(30)
    assert client.get_queued_resource(name=name).state.state == State.SUSPENDED
    assert client.get_node(name=f"{P}/europe-west4-a/nodes/spot1-node").state == tpu_v2.Node.State.PREEMPTED
    delete = client.delete_queued_resource(name=name)
    clock.advance(20)
    delete.result(timeout=5)
    with pytest.raises(gexc.NotFound):
        client.get_queued_resource(name=name)


def test_bad_requests_get_real_status_codes(env) -> None:
    _, client, _ = env
    with pytest.raises(gexc.InvalidArgument, match="accelerator"):
        _create(client, "europe-west4-a", "big", acc="v6e-16")
    with pytest.raises(gexc.InvalidArgument, match="queued_resource_id"):
        _create(client, "europe-west4-a", "Bad_Id")
    with pytest.raises(gexc.InvalidArgument, match="parent"):
        client.get_queued_resource(name="queuedResources/x")
    with pytest.raises(gexc.PermissionDenied):
        list(client.list_queued_resources(parent="projects/other/locations/europe-west4-a"))
    _create(client, "europe-west4-a", "dup")
    with pytest.raises(gexc.AlreadyExists):
        _create(client, "europe-west4-a", "dup")
    with pytest.raises(gexc.MethodNotImplemented):  # not served here: gRPC's own UNIMPLEMENTED
        client.list_nodes(parent=f"{P}/europe-west4-a")


def test_unknown_fields_are_refused(env) -> None:
    standin, client, _ = env
    channel: grpc.Channel = client.transport.grpc_channel
    call = channel.unary_unary(
        "/google.cloud.tpu.v2.Tpu/GetQueuedResource",
        request_serializer=lambda b: b,
        response_deserializer=tpu_v2.QueuedResource.deserialize,
    )
    body = tpu_v2.GetQueuedResourceRequest.serialize(
        tpu_v2.GetQueuedResourceRequest(name=f"{P}/europe-west4-a/queuedResources/x")
    )
    with pytest.raises(grpc.RpcError) as err:
        call(body + b"\xa0\x06\x01")  # field 100, varint 1: not in the proto
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # nested too: an unknown field inside the node of a create request
    node = (
        tpu_v2.Node.serialize(tpu_v2.Node(accelerator_type="v6e-1", runtime_version="v2-alpha-tpuv6e"))
        + b"\xa0\x06\x01"
    )
    spec = tpu_v2.QueuedResource.Tpu.NodeSpec(parent=f"{P}/europe-west4-a", node_id="n1")
    spec_bytes = tpu_v2.QueuedResource.Tpu.NodeSpec.serialize(spec) + b"\x22" + bytes([len(node)]) + node
    tpu_bytes = b"\x0a" + bytes([len(spec_bytes)]) + spec_bytes
    qr_bytes = b"\x12" + bytes([len(tpu_bytes)]) + tpu_bytes  # QueuedResource.tpu = 2
    req = (
        tpu_v2.CreateQueuedResourceRequest.serialize(
            tpu_v2.CreateQueuedResourceRequest(parent=f"{P}/europe-west4-a", queued_resource_id="n1")
        )
        + b"\x1a"
        + bytes([len(qr_bytes)])
        + qr_bytes
    )  # CreateQueuedResourceRequest.queued_resource = 3
    create = channel.unary_unary("/google.cloud.tpu.v2.Tpu/CreateQueuedResource", request_serializer=lambda b: b)
    with pytest.raises(grpc.RpcError) as err:
        create(req)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "tpu.node_spec.node" in (err.value.details() or "")
    assert not standin.queued

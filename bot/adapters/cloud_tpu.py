"""TpuApi port (skills/targets/tpu/api.py) on the Cloud TPU API v2 through google-cloud-tpu (tpu_v2.TpuClient,
gRPC), a blocking client on its own threads. CLOUD_TPU_API_ENDPOINT points it at a local stand-in (insecure
channel on 127.0.0.1, as the Monitoring adapter does)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from google.api_core import exceptions as gexc
from google.protobuf import duration_pb2

from bot.adapters.blocking import BlockingPool
from bot.adapters.google_auth import cloud_credentials
from bot.settings import Settings
from skills.errors import CloudUnavailable, InvalidInput, NotFound, TransientCloudError
from skills.logs.redact import redact
from skills.targets.tpu.api import CreateRequest, QueuedInfo, QuotaExhausted


def _is_local(endpoint: str) -> bool:
    host = endpoint.split("://", 1)[-1].rsplit(":", 1)[0]
    return host in ("127.0.0.1", "localhost", "::1", "[::1]")


class CloudTpu:
    def __init__(self, settings: Settings, pool: BlockingPool | None = None, project: str | None = None) -> None:
        self._settings = settings
        self._pool = pool or BlockingPool("tpu", settings.cloud_client_threads)
        self._client: Any = None
        self._project = project or ""

    def _tpu(self) -> Any:
        if self._client is None:
            from google.cloud import tpu_v2  # a slow import a process may never need

            endpoint = self._settings.cloud_tpu_api_endpoint
            creds, project = cloud_credentials(self._settings)
            self._project = self._project or project or ""
            if endpoint and _is_local(endpoint):
                import grpc
                from google.cloud.tpu_v2.services.tpu.transports import TpuGrpcTransport

                channel = grpc.insecure_channel(endpoint.split("://", 1)[-1])
                self._client = tpu_v2.TpuClient(transport=TpuGrpcTransport(channel=channel))
            else:
                from google.api_core.client_options import ClientOptions

                opts = ClientOptions(api_endpoint=endpoint) if endpoint else None
                self._client = tpu_v2.TpuClient(credentials=creds, client_options=opts)
        return self._client

    def _parent(self, zone: str) -> str:
        self._tpu()
        return f"projects/{self._project}/locations/{zone}"

    async def aclose(self) -> None:
        self._pool.shutdown()
        if self._client is not None:
            self._client.transport.close()
            self._client = None

    # --- the port -------------------------------------------------------------------------------------------

    async def accelerator_types(self, zone: str) -> list[str]:
        return await self._pool.run(self._types, zone)

    async def create(self, req: CreateRequest) -> None:
        await self._pool.run(self._create, req)

    async def get(self, zone: str, queued_resource_id: str) -> QueuedInfo | None:
        return await self._pool.run(self._get, zone, queued_resource_id)

    async def delete(self, zone: str, queued_resource_id: str, *, force: bool) -> None:
        await self._pool.run(self._delete, zone, queued_resource_id, force)

    async def queued(self, zone: str) -> list[QueuedInfo]:
        return await self._pool.run(self._list, zone)

    # --- blocking calls -------------------------------------------------------------------------------------

    def _types(self, zone: str) -> list[str]:
        client = self._tpu()
        with _explained(f"accelerator types in {zone}"):
            pager = client.list_accelerator_types(parent=self._parent(zone), timeout=self._deadline())
            return sorted(t.type_ for t in pager)

    def _create(self, req: CreateRequest) -> None:
        from google.cloud import tpu_v2

        client = self._tpu()
        parent = self._parent(req.zone)
        node = tpu_v2.Node(
            accelerator_type=req.accelerator_type,
            runtime_version=req.runtime_version,
            metadata=req.metadata,
            labels=req.labels,
            network_config=tpu_v2.NetworkConfig(network=req.network, enable_external_ips=req.external_ips),
        )
        qr = tpu_v2.QueuedResource(
            tpu=tpu_v2.QueuedResource.Tpu(
                node_spec=[tpu_v2.QueuedResource.Tpu.NodeSpec(parent=parent, node_id=req.node_id, node=node)]
            )
        )
        if req.tier == "spot":
            qr.spot = tpu_v2.QueuedResource.Spot()
        elif req.tier == "reserved":  # the API's field for a reservation; `guaranteed` carries only a min duration
            qr.reservation_name = f"{parent}/reservations/{req.reservation}"
        if req.valid_until_s:
            qr.queueing_policy = tpu_v2.QueuedResource.QueueingPolicy(
                valid_until_duration=duration_pb2.Duration(seconds=req.valid_until_s)
            )
        with _explained(f"create {req.queued_resource_id} in {req.zone}"):
            # The operation is done once the request is accepted; the target follows the states itself.
            client.create_queued_resource(
                parent=parent, queued_resource_id=req.queued_resource_id, queued_resource=qr, timeout=self._deadline()
            )

    def _list(self, zone: str) -> list[QueuedInfo]:
        client = self._tpu()
        out: list[QueuedInfo] = []
        with _explained(f"queued resources in {zone}"):
            for qr in client.list_queued_resources(parent=self._parent(zone), timeout=self._deadline()):
                specs = list(qr.tpu.node_spec)
                out.append(
                    QueuedInfo(
                        name=qr.name.rsplit("/", 1)[-1],
                        zone=zone,
                        state=qr.state.state.name,
                        tier="spot"
                        if "spot" in qr
                        else ("reserved" if qr.reservation_name or "guaranteed" in qr else "on-demand"),
                        accelerator_type=specs[0].node.accelerator_type if specs else "",
                    )
                )
        return out

    def _get(self, zone: str, qid: str) -> QueuedInfo | None:
        client = self._tpu()
        name = f"{self._parent(zone)}/queuedResources/{qid}"
        try:
            with _explained(f"queued resource {qid}"):
                qr = client.get_queued_resource(name=name, timeout=self._deadline())
        except NotFound:
            return None
        state = qr.state.state.name
        info = QueuedInfo(
            name=qid,
            zone=zone,
            state=state,
            state_initiator=qr.state.state_initiator.name if qr.state.state_initiator else "",
            error=redact(qr.state.failed_data.error.message) if state == "FAILED" else "",
            tier="spot" if "spot" in qr else ("reserved" if qr.reservation_name or "guaranteed" in qr else "on-demand"),
        )
        specs = list(qr.tpu.node_spec)
        if specs:
            info.accelerator_type = specs[0].node.accelerator_type
            info.metadata = dict(specs[0].node.metadata)
        if state in ("PROVISIONING", "ACTIVE", "SUSPENDING", "SUSPENDED") and specs:
            try:
                with _explained(f"node {specs[0].node_id}"):
                    node = client.get_node(
                        name=f"{self._parent(zone)}/nodes/{specs[0].node_id}", timeout=self._deadline()
                    )
            except NotFound:
                return info
            info.node_state = node.state.name
            info.ip = node.network_endpoints[0].ip_address if node.network_endpoints else ""
            info.metadata = dict(node.metadata) or info.metadata
        return info

    def _delete(self, zone: str, qid: str, force: bool) -> None:
        from google.cloud import tpu_v2

        client = self._tpu()
        # `force` deletes the node with it (gcloud's --force); the client takes it on the request only.
        req = tpu_v2.DeleteQueuedResourceRequest(name=f"{self._parent(zone)}/queuedResources/{qid}", force=force)
        with _explained(f"delete {qid}"):
            client.delete_queued_resource(request=req, timeout=self._deadline())

    def _deadline(self) -> float:
        return float(self._settings.cloud_call_deadline_s)


@contextlib.contextmanager
def _explained(what: str) -> Iterator[None]:
    """The API's refusals in the bot's terms (the API's own message kept, redacted)."""
    try:
        yield
    except gexc.NotFound as exc:
        raise NotFound(f"Cloud TPU: {what}: {redact(exc.message)[:300]}") from None
    except gexc.ResourceExhausted as exc:
        raise QuotaExhausted(f"Cloud TPU refused {what}: {redact(exc.message)[:300]}") from None
    except (gexc.InvalidArgument, gexc.FailedPrecondition, gexc.AlreadyExists) as exc:
        raise InvalidInput(f"Cloud TPU refused {what}: {redact(exc.message)[:300]}") from None
    except gexc.PermissionDenied as exc:
        raise CloudUnavailable(
            f"Cloud TPU denied {what} (the bot's service account needs roles/tpu.admin): {redact(exc.message)[:200]}"
        ) from None
    except (gexc.ServiceUnavailable, gexc.DeadlineExceeded, gexc.InternalServerError) as exc:
        raise TransientCloudError(f"Cloud TPU: {what}: {redact(exc.message)[:200]}") from None
    except gexc.GoogleAPICallError as exc:
        raise CloudUnavailable(f"Cloud TPU answered {exc.code} for {what}: {redact(exc.message)[:200]}") from None

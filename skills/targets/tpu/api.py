"""What the TPU target needs from the Cloud TPU API (tpu_v2), as a port: bot/adapters/cloud_tpu.py implements it
with google-cloud-tpu; the sandbox's stand-in answers the same client on 127.0.0.1."""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel, Field

from skills.errors import UserFacingError

Tier = Literal["on-demand", "spot", "reserved"]


class QuotaExhausted(UserFacingError):
    """The create was refused for quota (RESOURCE_EXHAUSTED "Quota '...' exhausted. Limit N in zone Z")."""


class CreateRequest(BaseModel):
    zone: str
    queued_resource_id: str
    node_id: str
    accelerator_type: str
    runtime_version: str
    tier: Tier = "on-demand"
    reservation: str = ""  # reserved: the reservation's name in the zone (tpu_v2 QueuedResource.reservation_name)
    metadata: dict[str, str] = Field(default_factory=dict)  # startup-script and the bot's own spec
    labels: dict[str, str] = Field(default_factory=dict)
    valid_until_s: int | None = None  # queueing policy: fail if not provisioned by then
    network: str = ""  # the VPC the bot reaches the node on ("" = the project's default)
    external_ips: bool = False


class QueuedInfo(BaseModel):
    """A queued resource and its node, as the target reads them."""

    name: str
    zone: str
    state: str  # QueuedResourceState.State name: CREATING, ACCEPTED, WAITING_FOR_RESOURCES, PROVISIONING, ...
    state_initiator: str = ""
    error: str = ""  # FAILED: the failure's message
    accelerator_type: str = ""
    tier: Tier = "on-demand"
    node_state: str = ""  # Node.State name once there is a node: CREATING, READY, PREEMPTED, ...
    ip: str = ""  # the node's internal IP
    metadata: dict[str, str] = Field(default_factory=dict)


class TpuApi(Protocol):
    async def accelerator_types(self, zone: str) -> list[str]:
        """The accelerator types `zone` offers (NotFound for a location the API does not know)."""
        ...

    async def create(self, req: CreateRequest) -> None:
        """Create the queued resource; InvalidInput / QuotaExhausted / CloudUnavailable on refusal."""
        ...

    async def get(self, zone: str, queued_resource_id: str) -> QueuedInfo | None:
        """The queued resource and its node (None when it does not exist)."""
        ...

    async def delete(self, zone: str, queued_resource_id: str, *, force: bool) -> None: ...

    async def queued(self, zone: str) -> list[QueuedInfo]:
        """The project's queued resources in `zone` (name, state, tier, accelerator type; no node details)."""
        ...

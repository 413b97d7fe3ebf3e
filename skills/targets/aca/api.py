"""What the Azure Container Apps target needs from Azure Resource Manager (Microsoft.App), as a port:
bot/adapters/container_apps.py implements it with azure-mgmt-appcontainers; the sandbox's stand-in
(bot/sandbox/aca_api.py) answers the same client on 127.0.0.1.

The states are the REST API's own enum values (azure-mgmt-appcontainers models/_enums.py, generated from the
Microsoft.App REST specification): a container app's provisioningState (InProgress, Succeeded, Failed, Canceled,
Deleting) and runningStatus (Progressing, Running, Stopped, Suspended, Ready); a revision's provisioningState
(Provisioning, Provisioned, Failed, Deprovisioning, Deprovisioned), runningState (Running, Processing, Stopped,
Degraded, Failed, Unknown) and healthState (Healthy, Unhealthy, None).

Errors: the adapter raises NotFound for ARM's 404, QuotaExceeded for a refusal for quota, InvalidInput for
another 4xx (ARM's error code and message kept in the text), CloudUnavailable for 5xx and transport failures.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel, Field

from skills.errors import UserFacingError


class QuotaExceeded(UserFacingError):
    """ARM refused a write for quota (the environment's or the subscription's GPU cores in the region)."""


class WorkloadProfileInfo(BaseModel):
    """One workload profile of a managed environment (properties.workloadProfiles[])."""

    name: str  # the environment's own name for it, e.g. "NC24-A100"
    workload_profile_type: str  # e.g. "Consumption-GPU-NC24-A100", "NC24-A100", "Consumption"
    minimum_count: int | None = None  # dedicated profiles only
    maximum_count: int | None = None


class EnvironmentInfo(BaseModel):
    name: str
    location: str  # ARM's location name, e.g. "swedencentral"
    provisioning_state: str
    default_domain: str = ""  # apps' FQDNs are <app>.<default_domain>
    workload_profiles: list[WorkloadProfileInfo] = Field(default_factory=list)


class AppInfo(BaseModel):
    """A container app as read back (GET Microsoft.App/containerApps/{name})."""

    name: str
    location: str
    provisioning_state: str  # ContainerAppProvisioningState
    running_status: str = ""  # ContainerAppRunningStatus
    latest_revision: str = ""  # properties.latestRevisionName
    latest_ready_revision: str = ""  # properties.latestReadyRevisionName
    fqdn: str = ""  # properties.configuration.ingress.fqdn
    workload_profile: str = ""  # properties.workloadProfileName
    body: dict[str, Any] = Field(default_factory=dict)  # the resource as ARM returned it (camelCase REST JSON)


class AppRevision(BaseModel):
    """A revision (GET .../containerApps/{app}/revisions/{name})."""

    name: str
    active: bool
    created: datetime | None = None
    provisioning_state: str  # RevisionProvisioningState
    running_state: str = "Unknown"  # RevisionRunningState
    health_state: str = "None"  # RevisionHealthState
    provisioning_error: str = ""
    replicas: int = 0
    traffic_weight: int = 0
    fqdn: str = ""  # properties.fqdn: the revision's own host (a request there reaches this revision only)
    template: dict[str, Any] = Field(default_factory=dict)  # properties.template (containers, scale)


class UsageInfo(BaseModel):
    """One quota of the subscription in a region (GET Microsoft.App/locations/{loc}/usages) or of an environment
    (.../managedEnvironments/{env}/usages): name.value, currentValue, limit, unit."""

    name: str  # name.value
    display: str = ""  # name.localizedValue
    current: float
    limit: float
    unit: str = "Count"


class OperationState(BaseModel):
    """A long-running ARM operation as the poller sees it (Azure-AsyncOperation status)."""

    done: bool
    status: str  # InProgress, Succeeded, Failed, Canceled
    error: str = ""  # Failed: ARM's error code and message


class ContainerAppsApi(Protocol):
    """One subscription, resource group and managed environment (the settings name them)."""

    async def get_environment(self) -> EnvironmentInfo:
        """The managed environment (NotFound when it does not exist)."""
        ...

    async def available_profiles(self, location: str) -> list[str]:
        """The workload profile types the region offers
        (GET .../locations/{loc}/availableManagedEnvironmentsWorkloadProfileTypes)."""
        ...

    async def get_app(self, name: str) -> AppInfo | None:
        """The container app (None when it does not exist)."""
        ...

    async def begin_put_app(self, name: str, body: dict[str, Any]) -> str:
        """Create or replace the app from ARM JSON (PUT); returns a handle for `operation`."""
        ...

    async def begin_delete_app(self, name: str) -> str: ...

    async def operation(self, handle: str) -> OperationState:
        """Poll a write once (its long-running operation's status)."""
        ...

    async def list_revisions(self, app: str) -> list[AppRevision]: ...

    async def get_revision(self, app: str, revision: str) -> AppRevision | None: ...

    async def usages(self, location: str) -> list[UsageInfo]:
        """The subscription's Container Apps quotas in `location`."""
        ...

    async def environment_usages(self) -> list[UsageInfo]:
        """The managed environment's quotas (GET .../managedEnvironments/{env}/usages, `az containerapp env
        list-usages`): where the serverless GPU quotas (ManagedEnvironmentConsumption*Gpus) are counted."""
        ...

"""ContainerAppsApi port (skills/targets/aca/api.py) on Azure Resource Manager (Microsoft.App) through
azure-mgmt-appcontainers' async client (ContainerAppsAPIClient, api-version 2026-07-01).

Writes are ARM long-running operations: begin_put_app/begin_delete_app start the SDK's poller in a task of their
own (it sleeps the Retry-After ARM sends between polls) and keep it under a handle; `operation(handle)` only
reads where that poller is (done(), status(), its result or exception once done), so a watcher never blocks on
ARM. Handles live in this process: after a restart `operation` answers NotFound for an old one (the app's own
provisioningState says where a write got to).

The sandbox points `base_url` at its stand-in on 127.0.0.1 with `connection_verify` = its CA file and a
StaticTokenCredential; production uses DefaultAzureCredential and management.azure.com.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from azure.core.credentials import AccessToken, AccessTokenInfo
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)

from bot.adapters.azure_client import LazyAzureClient
from skills.errors import CloudUnavailable, InvalidInput, NotFound
from skills.logs.redact import redact
from skills.targets.aca.api import (
    AppInfo,
    AppRevision,
    EnvironmentInfo,
    OperationState,
    QuotaExceeded,
    UsageInfo,
    WorkloadProfileInfo,
)

# ARM's codes for a refusal for quota (the ACA stand-in answers QuotaExceeded; compute answers
# OperationNotAllowed with "exceeding approved ... quota" in the message).
_KEEP_OPS = 256
_QUOTA_CODES = ("QuotaExceeded", "SubscriptionIsOverQuotaForSku", "MaxNumberOfGpuCoresExceeded")


class StaticTokenCredential:
    """An AsyncTokenCredential that hands out one fixed token: for the sandbox's ARM stand-in only (it checks that
    a bearer token is sent, not what it is). Never used against management.azure.com."""

    def __init__(self, token: str = "sandbox-token", lifetime_s: int = 3600) -> None:
        self._token = token
        self._lifetime_s = lifetime_s

    async def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(self._token, int(time.time()) + self._lifetime_s)

    async def get_token_info(self, *scopes: str, options: Any = None) -> AccessTokenInfo:
        return AccessTokenInfo(self._token, int(time.time()) + self._lifetime_s)

    async def close(self) -> None:
        pass

    async def __aenter__(self) -> StaticTokenCredential:
        return self

    async def __aexit__(self, *args: Any) -> None:
        pass


class ContainerApps:
    def __init__(
        self,
        subscription_id: str,
        resource_group: str,
        environment: str,
        *,
        base_url: str | None = None,
        credential: Any = None,
        connection_verify: str | bool | None = None,
        polling_interval: float | None = None,
    ) -> None:
        self.subscription_id = subscription_id
        self.resource_group = resource_group
        self.environment = environment
        self._base_url = base_url
        self._azure = LazyAzureClient(self._make, credential, connection_verify)
        self._polling_interval = polling_interval  # between polls when ARM's Retry-After is absent or 0
        self._ops: dict[str, tuple[Any, asyncio.Task[Any]]] = {}
        self._ids = itertools.count(1)

    def _make(self, credential: Any, **kw: Any) -> Any:
        from azure.mgmt.appcontainers.aio import ContainerAppsAPIClient  # a slow import few processes need

        if self._polling_interval is not None:
            kw["polling_interval"] = self._polling_interval
        return ContainerAppsAPIClient(credential, self.subscription_id, base_url=self._base_url, **kw)

    def _aca(self) -> Any:
        return self._azure.get()

    async def aclose(self) -> None:
        for _, task in self._ops.values():
            task.cancel()
        for _, task in self._ops.values():
            with contextlib.suppress(BaseException):
                await task
        self._ops.clear()
        await self._azure.aclose()

    # --- the port -------------------------------------------------------------------------------------------

    async def get_environment(self) -> EnvironmentInfo:
        async with _explained(f"managed environment {self.environment}"):
            env = await self._aca().managed_environments.get(self.resource_group, self.environment)
        d = env.as_dict()
        props = d.get("properties") or {}
        return EnvironmentInfo(
            name=d.get("name") or self.environment,
            location=d.get("location") or "",
            provisioning_state=str(props.get("provisioningState") or ""),
            default_domain=props.get("defaultDomain") or "",
            workload_profiles=[
                WorkloadProfileInfo(
                    name=p.get("name", ""),
                    workload_profile_type=p.get("workloadProfileType", ""),
                    minimum_count=p.get("minimumCount"),
                    maximum_count=p.get("maximumCount"),
                )
                for p in props.get("workloadProfiles") or []
            ],
        )

    async def available_profiles(self, location: str) -> list[str]:
        async with _explained(f"workload profile types in {location}"):
            return [p.name async for p in self._aca().available_workload_profiles.get(location)]

    async def get_app(self, name: str) -> AppInfo | None:
        try:
            async with _explained(f"container app {name}"):
                app = await self._aca().container_apps.get(self.resource_group, name)
        except NotFound:
            return None
        d = app.as_dict()
        props = d.get("properties") or {}
        ingress = (props.get("configuration") or {}).get("ingress") or {}
        return AppInfo(
            name=d.get("name") or name,
            location=d.get("location") or "",
            provisioning_state=str(props.get("provisioningState") or ""),
            running_status=str(props.get("runningStatus") or ""),
            latest_revision=props.get("latestRevisionName") or "",
            latest_ready_revision=props.get("latestReadyRevisionName") or "",
            fqdn=ingress.get("fqdn") or "",
            workload_profile=props.get("workloadProfileName") or "",
            body=d,
        )

    async def begin_put_app(self, name: str, body: dict[str, Any]) -> str:
        async with _explained(f"create or update container app {name}"):
            poller = await self._aca().container_apps.begin_create_or_update(self.resource_group, name, body)
        return self._keep(poller, f"put/{name}")

    async def begin_delete_app(self, name: str) -> str:
        async with _explained(f"delete container app {name}"):
            poller = await self._aca().container_apps.begin_delete(self.resource_group, name)
        return self._keep(poller, f"delete/{name}")

    async def operation(self, handle: str) -> OperationState:
        entry = self._ops.get(handle)
        if entry is None:
            raise NotFound(f"Azure Container Apps: no operation {handle} in this process.")
        poller, task = entry
        if not task.done():
            return OperationState(done=False, status=_status(poller))
        exc = task.exception() if not task.cancelled() else asyncio.CancelledError()
        if exc is None:
            return OperationState(done=True, status=_status(poller, "Succeeded"))
        return OperationState(done=True, status="Failed", error=_arm_error(exc))

    async def list_revisions(self, app: str) -> list[AppRevision]:
        async with _explained(f"revisions of {app}"):
            return [
                _revision(r.as_dict())
                async for r in self._aca().container_apps_revisions.list_revisions(self.resource_group, app)
            ]

    async def get_revision(self, app: str, revision: str) -> AppRevision | None:
        try:
            async with _explained(f"revision {revision}"):
                r = await self._aca().container_apps_revisions.get_revision(self.resource_group, app, revision)
        except NotFound:
            return None
        return _revision(r.as_dict())

    async def usages(self, location: str) -> list[UsageInfo]:
        async with _explained(f"Container Apps quotas in {location}"):
            return [_usage(u.as_dict()) async for u in self._aca().usages.list(location)]

    async def environment_usages(self) -> list[UsageInfo]:
        async with _explained(f"the quotas of environment {self.environment}"):
            pager = self._aca().managed_environment_usages.list(self.resource_group, self.environment)
            return [_usage(u.as_dict()) async for u in pager]

    # --- helpers --------------------------------------------------------------------------------------------

    def _keep(self, poller: Any, what: str) -> str:
        handle = f"{what}#{next(self._ids)}"
        if len(self._ops) >= _KEEP_OPS:  # a long-lived bot forgets finished writes, oldest first
            for old in [h for h, (_, t) in self._ops.items() if t.done()][: len(self._ops) - _KEEP_OPS + 1]:
                del self._ops[old]
        # The poller only polls while awaited: its own task drives it, at ARM's Retry-After.
        task = asyncio.get_running_loop().create_task(poller.result(), name=f"aca-{handle}")
        task.add_done_callback(_retrieved)  # a failure nobody asked about is not "never retrieved"
        self._ops[handle] = (poller, task)
        return handle


def _retrieved(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _status(poller: Any, default: str = "InProgress") -> str:
    try:
        return str(poller.status()) or default
    except Exception:  # a poller not started yet has no status  # noqa: BLE001
        return default


def _arm_error(exc: BaseException) -> str:
    """ARM's `code: message` of a failed operation (the operation status document's error)."""
    if isinstance(exc, asyncio.CancelledError):
        return "the wait for the operation was cancelled"
    if isinstance(exc, HttpResponseError):
        err = exc.error
        code = getattr(err, "code", None) or ""
        message = getattr(err, "message", None) or exc.message or str(exc)
        return redact(f"{code}: {message}" if code else str(message))[:500]
    return redact(f"{type(exc).__name__}: {exc}")[:500]


def _revision(d: dict[str, Any]) -> AppRevision:
    props = d.get("properties") or {}
    created = props.get("createdTime")
    if isinstance(created, str):
        created = datetime.fromisoformat(created.replace("Z", "+00:00"))
    return AppRevision(
        name=d.get("name") or "",
        active=bool(props.get("active")),
        created=created,
        provisioning_state=str(props.get("provisioningState") or ""),
        running_state=str(props.get("runningState") or "Unknown"),
        health_state=str(props.get("healthState") or "None"),
        provisioning_error=redact(str(props.get("provisioningError") or "")),
        replicas=int(props.get("replicas") or 0),
        traffic_weight=int(props.get("trafficWeight") or 0),
        fqdn=str(props.get("fqdn") or ""),
        template=props.get("template") or {},
    )


def _is_quota(code: str, message: str) -> bool:
    return code in _QUOTA_CODES or "exceeding approved" in message or "Maximum Allowed Cores exceeded" in message


@contextlib.asynccontextmanager
async def _explained(what: str) -> AsyncIterator[None]:
    """ARM's refusals in the bot's terms, ARM's `code: message` kept (redacted)."""
    try:
        yield
    except ResourceNotFoundError as exc:
        raise NotFound(f"Azure Container Apps: {what}: {_arm_error(exc)[:300]}") from None
    except ClientAuthenticationError as exc:
        raise CloudUnavailable(
            f"Azure refused the bot's credentials for {what}: {_arm_error(exc)[:200]}",
            "Check the bot's Azure identity (az login / managed identity) and its role on the resource group.",
        ) from None
    except HttpResponseError as exc:
        status = exc.status_code or 0
        err = exc.error
        code = str(getattr(err, "code", "") or "")
        message = str(getattr(err, "message", "") or exc.message or "")
        text = _arm_error(exc)[:300]
        if 400 <= status < 500 and _is_quota(code, message):
            raise QuotaExceeded(f"Azure Container Apps refused {what} for quota: {text}") from None
        if status == 404:
            raise NotFound(f"Azure Container Apps: {what}: {text}") from None
        if 400 <= status < 500:
            raise InvalidInput(f"Azure Container Apps refused {what}: {text}") from None
        raise CloudUnavailable(f"Azure Container Apps answered {status} for {what}: {text}") from None
    except (ServiceRequestError, ServiceResponseError) as exc:
        text = redact(str(exc))[:200]
        raise CloudUnavailable(f"Azure Resource Manager could not be reached for {what}: {text}") from None


def _usage(d: dict[str, Any]) -> UsageInfo:
    name = d.get("name") or {}
    return UsageInfo(
        name=name.get("value", ""),
        display=name.get("localizedValue") or "",
        current=float(d.get("currentValue") or 0),
        limit=float(d.get("limit") or 0),
        unit=str(d.get("unit") or "Count"),
    )

"""Azure Container Apps scenarios: field failures of the sandbox's ACA app that reach the bot as Azure Monitor alerts.

Each breaks the app the way a teammate would with `az containerapp create/update`: a PUT straight to the ARM
stand-in (bot/sandbox/aca_api.py) over HTTPS with its token, past the bot's planner and preflight. It seeds what
the stand-in cannot decide from the configuration (an image pull: `fail_next_revision`; a replica's start, bf16 on
the T4 or a probe too short, follows from the flags and the profile by itself), waits for the
failure by the stand-in's own rules (its revision's provisioningState / runningState, read back over the wire as
`az containerapp revision show` reads them), then POSTs the alert Azure Monitor's action group would send, in the
common alert schema (handlers/alerts/azure_monitor.py names the schema's sources), to the bot's `/alerts/azure`.
The bot's incident pipeline then reads the app's logs from the sandbox's Log Analytics through the ACA target.

- `aca-bf16-on-t4`: gemma-4-E4B in bf16 (no `--dtype`) on the serverless T4 profile: vLLM refuses bfloat16 below
  compute capability 8.0 (its line: skills/data/aca.yaml sources.vllm_bf16). Kind `bf16_unsupported`.
- `aca-image-pull`: an image tag that does not exist: the revision fails to provision with the portal's "Persistent
  Image Pull Errors for image ..." notice (tests/data/aca_logs/manifest.yaml: the Azure OSS Developer Support
  blog). Kind `aca_image_pull_failed`.
- `aca-probe-timeout`: gemma-4-12B bf16 with a 40-second startup probe: the replica is still loading its weights
  when the probe gives up (the stand-in's own rule, bot/sandbox/aca_replicas.py). Kind `startup_probe_timeout`.
- `aca-quota-zero`: the environment's GPU usage limit set to 0 (both serverless GPU quotas): a deploy plan is refused
  at plan time, and the teammate's hand deploy gets ARM's 400 QuotaExceeded; Azure Monitor's activity log alert on
  the failed `Microsoft.App/containerApps/write` carries ARM's error. Kind `gpu_quota_exceeded`.

Which alert fires is the sandbox's choice of alert rules (a log search alert V2 on the environment's
`ContainerAppConsoleLogs_CL`/`ContainerAppSystemLogs_CL` split by app and revision, or an activity log alert on
failed writes); the rule names, their queries, the workspace's ARM name and the severities are the sandbox's, not
from a source. Times are the sandbox's Azure time (its clock, from the ACA world's epoch).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import httpx

from bot.sandbox.aca_api import API_VERSION
from bot.sandbox.aca_world import AcaWorld
from bot.sandbox.clock import SandboxClock
from skills.capacity.aca_catalog import load_aca_catalog
from skills.capacity.catalog import load_catalog

Narrate = Callable[[str], Awaitable[None]]
SERVICE = "vllm-gemma4-aca"  # the ACA app the sandbox's settings give (ACA_SERVICE_NAME's default)
A100 = "Consumption-GPU-NC24-A100"
T4 = "Consumption-GPU-NC8as-T4"
IMAGE = "vllm/vllm-openai:v0.25.1"
WORKSPACE_NAME = "gemma-env-logs"  # the Log Analytics workspace's ARM name in the sandbox (its own choice)
PROFILE_A100 = "gemma4-12b-qat-aca-a100"
MISSING_TAG = "vllm/vllm-openai:v0.251"  # a typo of v0.25.1 (the stand-in pulls nothing: the seed makes it fail)
# The portal's notice (tests/data/aca_logs/portal_persistent_image_pull_errors.log, its source in the manifest)
PULL_LINE = f'Persistent Image Pull Errors for image "{MISSING_TAG}". Please check https://aka.ms/cappsimagepullerrors.'


class AcaSandbox(Protocol):
    """What an ACA scenario uses of the sandbox (bot/sandbox/cloud.py Sandbox is one)."""

    azure: AcaWorld
    clock: SandboxClock

    def wait_budget_s(self) -> float: ...

    async def post_azure_alert(self, payload: dict[str, Any]) -> httpx.Response: ...

    def track_azure_alert(self, revision: str, payload: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class AcaScenario:
    name: str
    summary: str
    kind: str  # the diagnosis kind its incident's findings should name (skills/diagnosis/analyzers)
    alert: str  # the Azure Monitor alert rule it fires
    run: Callable[[AcaSandbox, Narrate], Awaitable[None]] = field(compare=False)


# --- az, as a teammate runs it -------------------------------------------------------------------------------------


def _arm_url(world: AcaWorld, path: str = "") -> str:
    s = world.standin
    return (
        f"{world.urls['arm']}/subscriptions/{s.subscription}/resourceGroups/{s.resource_group}"
        f"/providers/Microsoft.App/containerApps/{SERVICE}{path}"
    )


async def arm(world: AcaWorld, method: str, path: str = "", body: dict[str, Any] | None = None) -> httpx.Response:
    trust = ssl.create_default_context(cafile=world.ca_files["arm"])  # the stand-in's own CA
    auth = {"Authorization": f"Bearer {world.token}"}
    async with httpx.AsyncClient(verify=trust, headers=auth, timeout=10) as client:
        return await client.request(method, _arm_url(world, path), params={"api-version": API_VERSION}, json=body)


def app_body(
    world: AcaWorld, *, profile: str, model: str, image: str = IMAGE, probe: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The container app `az containerapp create --workload-profile-name PROFILE --min-replicas 1 ...` makes: one
    vLLM container with the model's repo, external ingress on vLLM's port, no dtype flag."""
    aca = load_aca_catalog().profiles[profile]
    repo = load_catalog().model(model).hf_repo
    container: dict[str, Any] = {
        "name": "vllm",
        "image": image,
        "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        "args": ["--model", repo, "--max-model-len", "8192", "--port", "8000"],
        "resources": {"cpu": aca.vcpu, "memory": f"{aca.memory_gib:g}Gi"},
    }
    if probe is not None:
        container["probes"] = [{"type": "Startup", "httpGet": {"path": "/health", "port": 8000}, **probe}]
    return {
        "location": world.location,
        "properties": {
            "environmentId": world.standin.environment_id,
            "workloadProfileName": profile,  # the sandbox's environment names each profile as its type
            "configuration": {
                "activeRevisionsMode": "Single",
                "ingress": {"external": True, "targetPort": 8000, "transport": "http"},
            },
            "template": {"containers": [container], "scale": {"minReplicas": 1, "maxReplicas": 1}},
        },
    }


def _verb(world: AcaWorld) -> str:
    """`create` for an app that does not exist yet, else `update` (what the teammate types)."""
    with world.standin.lock:
        return "update" if SERVICE in world.standin.apps else "create"


async def wait_revision(sb: AcaSandbox, revision: str, timeout_s: float) -> dict[str, Any] | None:
    """The revision's properties once it failed or became healthy (None: neither within `timeout_s` real seconds),
    as `az containerapp revision show` reads them."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        resp = await arm(sb.azure, "GET", f"/revisions/{revision}")
        if resp.status_code == 200:
            props: dict[str, Any] = resp.json().get("properties") or {}
            if props.get("provisioningState") == "Failed" or props.get("runningState") == "Failed":
                return props
            if props.get("runningState") == "Running" and props.get("healthState") == "Healthy":
                return props
        await asyncio.sleep(0.05)
    return None


def azure_now(world: AcaWorld, clock: SandboxClock) -> datetime:
    """The sandbox's Azure time (its stand-ins write their times from the same epoch and clock)."""
    return world.epoch + timedelta(seconds=clock.now())


def _iso(t: datetime) -> str:
    """UTC with seven fractional digits, as Azure writes its times ("2019-03-22T13:58:24.3713213Z" in the samples):
    no rounding down past a log line of the same microsecond."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "0Z"


# --- the alerts Azure Monitor sends (the common alert schema; handlers/alerts/azure_monitor.py) ----------------------


def _essentials(
    world: AcaWorld,
    *,
    rule: str,
    severity: str,
    signal: str,
    service: str,
    targets: list[str],
    items: list[str],
    fired: datetime,
    description: str,
) -> dict[str, Any]:
    sub = world.standin.subscription
    return {
        "alertId": f"/subscriptions/{sub}/providers/Microsoft.AlertsManagement/alerts/{uuid.uuid4()}",
        "alertRule": rule,
        "severity": severity,
        "signalType": signal,
        "monitorCondition": "Fired",
        "monitoringService": service,
        "alertTargetIDs": targets,
        "configurationItems": items,
        "originAlertId": str(uuid.uuid4()),
        "firedDateTime": _iso(fired),
        "description": description,
        "essentialsVersion": "1.0",
        "alertContextVersion": "1.0",
    }


def log_search_alert(
    world: AcaWorld, *, rule: str, query: str, revision: str, count: int, fired: datetime, description: str
) -> dict[str, Any]:
    """A log search alert V2 on the environment's workspace, split by app and revision (the samples' shape)."""
    s = world.standin
    workspace = (
        f"/subscriptions/{s.subscription}/resourcegroups/{s.resource_group.lower()}/providers/"
        f"microsoft.operationalinsights/workspaces/{WORKSPACE_NAME}"
    )
    start = fired - timedelta(minutes=5)
    return {
        "schemaId": "azureMonitorCommonAlertSchema",
        "data": {
            "essentials": _essentials(
                world,
                rule=rule,
                severity="Sev1",
                signal="Log",
                service="Log Alerts V2",
                targets=[workspace],
                items=[],
                fired=fired,
                description=description,
            ),
            "alertContext": {
                "properties": {},
                "conditionType": "LogQueryCriteria",
                "condition": {
                    "windowSize": "PT5M",
                    "allOf": [
                        {
                            "searchQuery": query,
                            "metricMeasureColumn": None,
                            "targetResourceTypes": "['Microsoft.OperationalInsights/workspaces']",
                            "operator": "GreaterThan",
                            "threshold": "0",
                            "timeAggregation": "Count",
                            "dimensions": [
                                {"name": "ContainerAppName_s", "value": SERVICE},
                                {"name": "RevisionName_s", "value": revision},
                            ],
                            "metricValue": float(count),
                            "failingPeriods": {"numberOfEvaluationPeriods": 1, "minFailingPeriodsToAlert": 1},
                        }
                    ],
                    "windowStartTime": _iso(start),
                    "windowEndTime": _iso(fired),
                },
            },
        },
    }


def write_failed_alert(
    world: AcaWorld, *, rule: str, status_code: int, error: dict[str, Any], fired: datetime, description: str
) -> dict[str, Any]:
    """An activity log alert (Administrative) on a failed `Microsoft.App/containerApps/write` of the app, with ARM's
    error document as the event's statusMessage."""
    app_id = world.standin.app_id(SERVICE)
    reason = {400: "BadRequest", 409: "Conflict"}.get(status_code, str(status_code))
    return {
        "schemaId": "azureMonitorCommonAlertSchema",
        "data": {
            "essentials": _essentials(
                world,
                rule=rule,
                severity="Sev1",
                signal="Activity Log",
                service="Activity Log - Administrative",
                targets=[app_id.lower()],
                items=[SERVICE],
                fired=fired,
                description=description,
            ),
            "alertContext": {
                "authorization": {"action": "Microsoft.App/containerApps/write", "scope": app_id},
                "channels": "Operation",
                "claims": "{}",
                "caller": "teammate@contoso.com",
                "correlationId": str(uuid.uuid4()),
                "eventSource": "Administrative",
                "eventTimestamp": _iso(fired),
                "eventDataId": str(uuid.uuid4()),
                "level": "Error",
                "operationName": "Microsoft.App/containerApps/write",
                "operationId": str(uuid.uuid4()),
                "properties": {
                    "statusCode": reason,
                    "serviceRequestId": None,
                    "statusMessage": json.dumps({"error": error}, separators=(",", ":")),
                },
                "status": "Failed",
                "subStatus": reason,
                "submissionTimestamp": _iso(fired),
            },
        },
    }


# --- the scenarios ------------------------------------------------------------------------------------------------


async def _send(sb: AcaSandbox, say: Narrate, payload: dict[str, Any], revision: str) -> None:
    resp = await sb.post_azure_alert(payload)
    if resp.status_code != 202:
        await say(f"The alert webhook answered {resp.status_code}: {resp.text[:200]}")
        return
    # A failed revision's alert resolves once a newer revision serves. An activity log alert is not resolved (its
    # alerts are stateless, as recalled from Azure Monitor's docs: not found in the sources read).
    if revision:
        sb.track_azure_alert(revision, payload)


async def _break_revision(
    sb: AcaSandbox,
    say: Narrate,
    body: dict[str, Any],
    what: str,
    *,
    rule: str,
    query: str,
    seed: tuple[Callable[[], None], Callable[[], None]] | None = None,
) -> None:
    """PUT `body` as `az containerapp create/update` would, after `seed` (what to seed, how to take it back when ARM
    refuses the write: a seed left behind would break the next deploy); wait for the revision's failure; alert."""
    world = sb.azure
    verb = _verb(world)
    if seed is not None:
        seed[0]()
    resp = await arm(world, "PUT", body=body)
    if resp.status_code >= 400:
        if seed is not None:
            seed[1]()
        err = (
            (resp.json().get("error") or {})
            if resp.headers.get("content-type", "").startswith("application/json")
            else {}
        )
        await say(
            f":warning: ARM refused the teammate's `az containerapp {verb}`: {resp.status_code} "
            f"{err.get('code', '')}: {err.get('message', resp.text[:200])} (no revision, no alert)."
        )
        return
    revision = str((resp.json().get("properties") or {}).get("latestRevisionName") or "")
    await say(f"A teammate ran `az containerapp {verb} -n {SERVICE}` by hand: {what}. Revision `{revision}`.")
    props = await wait_revision(sb, revision, sb.wait_budget_s())
    if props is None:
        await say(f"Revision `{revision}` is still starting; no alert sent.")
        return
    if props.get("runningState") == "Running":
        await say(f"Revision `{revision}` became healthy after all; no alert.")
        return
    state = (
        "failed to provision" if props.get("provisioningState") == "Failed" else "failed: its replica never got ready"
    )
    await say(f"Revision `{revision}` {state}; Azure Monitor's log search alert `{rule}` fires.")
    fired = azure_now(world, sb.clock)
    payload = log_search_alert(
        world,
        rule=rule,
        query=query,
        revision=revision,
        count=1,
        fired=fired,
        description=f"{what} on {SERVICE}",
    )
    await _send(sb, say, payload, revision)


_CONSOLE_ERRORS = "ContainerAppConsoleLogs_CL | where Stream_s == 'stderr'"
_SYSTEM_ERRORS = "ContainerAppSystemLogs_CL | where Type_s in ('Error', 'Warning')"


async def _bf16_on_t4(sb: AcaSandbox, say: Narrate) -> None:
    # No seed: the replica's vLLM refuses bfloat16 on the T4 by itself (bot/sandbox/aca_replicas.py derives the
    # start from the revision's flags and its profile's GPU, as the Cloud Run sandbox does).
    body = app_body(sb.azure, profile=T4, model="gemma-4-e4b")
    await _break_revision(
        sb,
        say,
        body,
        "gemma-4-E4B in bf16 (no `--dtype half`) on the serverless T4 profile",
        rule="vllm-replica-errors",
        query=_CONSOLE_ERRORS,
    )


def _unfail(world: AcaWorld) -> None:
    """Take back `fail_next_revision(PULL_LINE)` (the stand-in offers no call for it: its queue, under its lock)."""
    with world.standin.lock:
        if PULL_LINE in world.standin._fail_next:
            world.standin._fail_next.remove(PULL_LINE)


async def _image_pull(sb: AcaSandbox, say: Narrate) -> None:
    body = app_body(sb.azure, profile=A100, model="gemma-4-12b-qat", image=MISSING_TAG)
    await _break_revision(
        sb,
        say,
        body,
        f"the image `{MISSING_TAG}` (a tag that does not exist)",
        rule="aca-system-errors",
        query=_SYSTEM_ERRORS,
        seed=(lambda: sb.azure.standin.fail_next_revision(PULL_LINE), lambda: _unfail(sb.azure)),
    )


async def _probe_timeout(sb: AcaSandbox, say: Narrate) -> None:
    probe = {"initialDelaySeconds": 10, "periodSeconds": 10, "failureThreshold": 3, "timeoutSeconds": 5}
    body = app_body(sb.azure, profile=A100, model="gemma-4-12b", probe=probe)
    await _break_revision(
        sb,
        say,
        body,
        "gemma-4-12B bf16 with a 40 s startup probe (10 s delay + 3 x 10 s)",
        rule="aca-system-errors",
        query=_SYSTEM_ERRORS,
    )


async def _quota_zero(sb: AcaSandbox, say: Narrate) -> None:
    world = sb.azure
    usages = sorted({p.quota_usage for p in load_aca_catalog().profiles.values() if p.serverless and p.quota_usage})
    for usage in usages:
        world.standin.set_usage(usage, 0)
    await say(
        f"The environment's serverless GPU quota is now 0 ({', '.join(usages)}). `/gemma deploy {PROFILE_A100}` is "
        "refused at plan time (preflight reads the usage); a teammate deploys by hand anyway."
    )
    verb = _verb(world)
    resp = await arm(world, "PUT", body=app_body(world, profile=T4, model="gemma-4-e4b-qat"))
    if resp.status_code < 400:
        await say(f":warning: ARM accepted the write ({resp.status_code}): no quota refusal, no alert.")
        return
    error = resp.json().get("error") or {}
    await say(
        f"ARM refused `az containerapp {verb} -n {SERVICE}`: {resp.status_code} {error.get('code')}. Azure Monitor's "
        "activity log alert on the failed write fires."
    )
    payload = write_failed_alert(
        world,
        rule="aca-write-failed",
        status_code=resp.status_code,
        error=error,
        fired=azure_now(world, sb.clock),
        description=f"A write to {SERVICE} failed",
    )
    await _send(sb, say, payload, "")


_ALL = [
    AcaScenario(
        "aca-bf16-on-t4",
        "E4B bf16 by hand on the serverless T4: vLLM refuses bfloat16",
        "bf16_unsupported",
        "vllm-replica-errors",
        _bf16_on_t4,
    ),
    AcaScenario(
        "aca-image-pull",
        "a hand deploy of an image tag that does not exist",
        "aca_image_pull_failed",
        "aca-system-errors",
        _image_pull,
    ),
    AcaScenario(
        "aca-probe-timeout",
        "12B bf16 with a 40 s startup probe: killed while loading",
        "startup_probe_timeout",
        "aca-system-errors",
        _probe_timeout,
    ),
    AcaScenario(
        "aca-quota-zero",
        "the environment's GPU quota at 0: plans refused, a hand deploy gets QuotaExceeded",
        "gpu_quota_exceeded",
        "aca-write-failed",
        _quota_zero,
    ),
]
ACA_SCENARIOS: dict[str, AcaScenario] = {s.name: s for s in _ALL}

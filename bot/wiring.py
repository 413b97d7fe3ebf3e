"""Build the Deps: choose an adapter for each port from the settings. The one place that knows the wiring."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from bot.adapters.aca_logs import AcaLogs
from bot.adapters.aca_metrics import AcaMetrics
from bot.adapters.cloud_logging import CloudLoggingLogs
from bot.adapters.cloud_monitoring import make_metrics
from bot.adapters.cloud_run import CloudRunRuntime
from bot.adapters.cloud_tpu import CloudTpu
from bot.adapters.container_apps import ContainerApps
from bot.adapters.google_auth import IdentityTokens
from bot.adapters.llm import LLMEndpoint
from bot.adapters.model_server import HttpModelServer
from bot.adapters.preflight import make_preflight
from bot.adapters.stream_client import EndpointStreams
from bot.agent import Agent
from bot.agent_evals import ScenarioEvals
from bot.deps import Deps
from bot.settings import Settings
from bot.state import make_redis
from bot.telemetry import Telemetry
from skills.ports import Logs, ModelServer, QuotaReader
from skills.targets.aca.target import KIND as ACA_KIND
from skills.targets.aca.target import AcaOptions, AcaTarget
from skills.targets.cloud_run.target import CloudRunTarget
from skills.targets.tpu.logs import tpu_log_filter
from skills.targets.tpu.target import TpuOptions, TpuTarget

if TYPE_CHECKING:
    from bot.sandbox.aca_world import AzureAccess
    from handlers.context import Responder

log = logging.getLogger(__name__)


def make_tpu_target(
    settings: Settings,
    model_server: ModelServer,
    quotas: QuotaReader | None,
    logs: Logs | None,
    endpoint_of: Callable[[str], str] | None = None,
) -> TpuTarget:
    options = TpuOptions(
        project=settings.google_cloud_project or "",
        network=settings.tpu_network,
        api_key_secret=settings.tpu_api_key_secret,
        hf_token_secret=settings.hf_token_secret,
        queue_wait_s=settings.tpu_queue_wait_s,
        zones=list(settings.tpu_zones),
        service=settings.tpu_service_name,
    )
    tpu_logs = CloudLoggingLogs(settings, build=tpu_log_filter) if logs is not None else None
    return TpuTarget(
        CloudTpu(settings, project=settings.google_cloud_project),
        model_server,
        options,
        quotas=quotas,
        logs=tpu_logs,
        endpoint_of=endpoint_of,
    )


ACA_UNWIRED = (
    "Set AZURE_SUBSCRIPTION_ID, ACA_RESOURCE_GROUP and ACA_ENVIRONMENT (an environment with a GPU workload profile), "
    "and ACA_API_KEY_SECRET_URL and ACA_IDENTITY for vLLM's API key (README: Azure Container Apps)."
)


def aca_wired(settings: Settings) -> bool:
    return bool(settings.azure_subscription_id and settings.aca_resource_group and settings.aca_environment)


def make_aca_target(
    settings: Settings,
    model_server: ModelServer,
    *,
    credential: Any = None,
    arm_verify: Any = None,
    logs_verify: Any = None,
    now: Callable[[], datetime] | None = None,
    polling_interval: float | None = None,
) -> AcaTarget:
    """The ACA target on the settings' subscription, resource group and environment, with the environment's Log
    Analytics logs and the apps' Azure Monitor metrics. `credential`: None is DefaultAzureCredential (each
    adapter's own); the sandbox passes its local token, its stand-ins' CA files and its clock (`now`)."""
    sub, rg = settings.azure_subscription_id, settings.aca_resource_group
    arm = settings.azure_resource_manager_endpoint
    api = ContainerApps(
        sub,
        rg,
        settings.aca_environment,
        base_url=arm,
        credential=credential,
        connection_verify=arm_verify,
        polling_interval=polling_interval,
    )
    logs = (
        AcaLogs(
            settings.aca_log_analytics_workspace_id,
            credential=credential,
            endpoint=settings.aca_log_analytics_endpoint,
            connection_verify=logs_verify,
        )
        if settings.aca_log_analytics_workspace_id
        else None
    )
    metrics = AcaMetrics(sub, rg, credential=credential, base_url=arm, connection_verify=arm_verify, now=now)
    options = AcaOptions(
        subscription=settings.azure_subscription_id,
        resource_group=settings.aca_resource_group,
        environment=settings.aca_environment,
        location=settings.aca_location,
        service=settings.aca_service_name,
        api_key_secret_url=settings.aca_api_key_secret_url,
        identity=settings.aca_identity,
    )
    template = settings.aca_endpoint_template
    return AcaTarget(
        api, model_server, options, logs=logs, metrics=metrics, endpoint_of=lambda fqdn: template.format(fqdn=fqdn)
    )


def wire_aca(deps: Deps, target: AcaTarget | None) -> None:
    """Put the ACA target beside the others (its service on it), or say what to set when there is none."""
    if target is None:
        deps.unwired_targets[ACA_KIND] = ACA_UNWIRED
        return
    deps.unwired_targets.pop(ACA_KIND, None)
    deps.extra_targets[target.kind] = target
    deps.service_targets[deps.settings.aca_service_name] = target.kind


def build_deps(settings: Settings, azure: AzureAccess | None = None) -> Deps:
    """`azure`: how the Azure clients reach the sandbox's stand-ins (its token, CA files, clock); None: Azure."""
    tokens = IdentityTokens(settings)
    api_key = settings.vllm_api_key.get_secret_value() if settings.vllm_api_key else None
    logs, metrics = CloudLoggingLogs(settings), make_metrics(settings)
    # The serving target: Cloud Run (the only one wired today; another kind is added to Deps.extra_targets and
    # the services on it to Deps.service_targets, and everything else follows from skills/targets/registry.py).
    target = CloudRunTarget(CloudRunRuntime(settings), logs=logs, metrics=metrics)
    model_server = HttpModelServer(tokens, settings.probe_timeout_s, api_key)
    deps = Deps(
        settings=settings,
        redis=make_redis(settings),
        runtime=target,
        model_server=model_server,
        telemetry=Telemetry(),
        endpoint=LLMEndpoint(settings, target, model_server, tokens),
        evals=ScenarioEvals(settings, build_deps, close_deps),
        metrics=metrics,
        logs=logs,
    )
    deps.streams = EndpointStreams(deps.endpoint)  # the bench's streaming client, with the endpoint's auth
    deps.preflight = make_preflight(settings, deps.redis)  # checks before a deploy's Confirm
    # Cloud TPU beside it: profiles with `target: cloud-tpu` deploy there; its service is on it.
    template = settings.tpu_endpoint_template
    tpu = make_tpu_target(
        settings,
        model_server,
        deps.preflight.quotas if deps.preflight else None,
        logs,
        endpoint_of=lambda ip: template.format(ip=ip),
    )
    deps.extra_targets[tpu.kind] = tpu
    deps.service_targets[settings.tpu_service_name] = tpu.kind
    # Azure Container Apps beside them, when the settings name a subscription, resource group and environment.
    aca = None
    if aca_wired(settings):
        extra = (
            {}
            if azure is None
            else {
                "credential": azure.credential,
                "arm_verify": azure.arm_verify,
                "logs_verify": azure.logs_verify,
                "now": azure.now,
                "polling_interval": azure.polling_interval,
            }
        )
        aca = make_aca_target(settings, model_server, **extra)
    wire_aca(deps, aca)
    deps.agent = Agent(deps)  # the tool-calling loop over deps.endpoint (bot/agent)
    return deps


async def close_deps(deps: Deps) -> None:
    await deps.drain()
    # Adapters with connections or threads close them (the ports do not require it: stand-ins may not).
    registry = deps.preflight.registry if deps.preflight else None
    for part in (deps.model_server, deps.metrics, deps.logs, *deps.targets.by_kind.values(), registry):
        close = getattr(part, "aclose", None)
        if close is not None:
            await close()
    await deps.endpoint.aclose()
    await deps.redis.aclose()


async def reconcile_writes(deps: Deps) -> int:
    """At start: writes left `pending` in the audit by a process stopped mid-watch get the outcome the service
    shows now (skills/deploy/reconcile.py). Never stops a start: a cloud that cannot be read is logged."""
    try:
        return len(await deps.writes.reconcile())
    except Exception as exc:  # noqa: BLE001 - the bot starts regardless; the records stay pending for next time
        log.warning("could not reconcile pending writes: %s: %s", type(exc).__name__, str(exc)[:200])
        return 0


async def resume_canary_watches(deps: Deps, responder_for: Callable[[str], Responder]) -> int:
    """At start, after reconcile_writes: canary watches a stopped process left running are taken up again, or
    closed when their split is gone (handlers/canary_thread.py resume_canaries). Never stops a start."""
    from handlers.canary_thread import resume_canaries

    try:
        done = await resume_canaries(deps, responder_for)
    except Exception as exc:  # noqa: BLE001 - the bot starts regardless; the records stay for the next start
        log.warning("could not resume canary watches: %s: %s", type(exc).__name__, str(exc)[:200])
        return 0
    for r in done:
        log.info("canary watch of %s on %s: %s", r.revision, r.service, r.state)
    return sum(r.state == "resumed" for r in done)

"""Build the Deps: choose an adapter for each port from the settings. The one place that knows the wiring."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from bot.adapters.cloud_logging import CloudLoggingLogs
from bot.adapters.cloud_monitoring import make_metrics
from bot.adapters.cloud_run import CloudRunRuntime
from bot.adapters.cloud_tpu import CloudTpu
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
from skills.targets.cloud_run.target import CloudRunTarget
from skills.targets.tpu.logs import tpu_log_filter
from skills.targets.tpu.target import TpuOptions, TpuTarget

if TYPE_CHECKING:
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


def build_deps(settings: Settings) -> Deps:
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

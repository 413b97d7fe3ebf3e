"""Build the Deps: choose an adapter for each port from the settings. The one place that knows the wiring."""

from __future__ import annotations

import logging

from bot.adapters.cloud_logging import CloudLoggingLogs
from bot.adapters.cloud_monitoring import make_metrics
from bot.adapters.cloud_run import CloudRunRuntime
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
from skills.targets.cloud_run.target import CloudRunTarget

log = logging.getLogger(__name__)


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
        evals=ScenarioEvals(settings),
        metrics=metrics,
        logs=logs,
    )
    deps.streams = EndpointStreams(deps.endpoint)  # the bench's streaming client, with the endpoint's auth
    deps.preflight = make_preflight(settings, deps.redis)  # checks before a deploy's Confirm
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

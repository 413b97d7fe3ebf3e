"""Service status: Cloud Run's view (conditions, revisions, scaling, resources) plus the model server's own
probes, cached in Redis for a short TTL so a flurry of `/gemma status` calls costs one API round-trip."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from pydantic import BaseModel

from skills.observe.service_metrics import ServiceMetrics, service_metrics
from skills.ports import Metrics, ModelServer, ProbeResult, Runtime, ServiceInfo, Store


class ModelProbe(BaseModel):
    base_url: str
    health: ProbeResult
    models: list[str]
    models_probe: ProbeResult


class StatusReport(BaseModel):
    service: ServiceInfo
    model: ModelProbe | None = None
    cold: bool = False
    notes: list[str] = []
    cloud_metrics: ServiceMetrics | None = None  # Cloud Monitoring figures, when a Metrics port is wired
    fetched_at: datetime
    from_cache: bool = False
    revisions: bool = True  # the target has revisions (skills/targets/port.py): there are some to show
    where: str = "Cloud Run"  # the serving target, as people name it

    def age_s(self, now: datetime | None = None) -> float:
        return max(0.0, ((now or datetime.now(UTC)) - self.fetched_at).total_seconds())


async def probe_model(model_server: ModelServer, base_url: str) -> ModelProbe:
    health, (ids, models_probe) = await asyncio.gather(model_server.health(base_url), model_server.models(base_url))
    return ModelProbe(base_url=base_url, health=health, models=ids, models_probe=models_probe)


def status_notes(
    info: ServiceInfo, model: ModelProbe | None, where: str = "Cloud Run", revisions: bool = True
) -> tuple[bool, list[str]]:
    """`where`: the serving target, as people name it; `revisions`: it has revisions (without them, the service's
    own condition says why it is not ready yet, e.g. a TPU slice's vLLM still compiling)."""
    notes: list[str] = []
    cold = False
    if info.ready is False and info.terminal_condition is not None:
        tc = info.terminal_condition
        notes.append(f"Not ready: {tc.reason or tc.state}: {tc.message}".rstrip(": "))
    elif (
        info.ready is None and info.terminal_condition is not None and info.terminal_condition.message and not revisions
    ):
        notes.append(f"Not ready yet: {info.terminal_condition.message}.")  # a target without revisions says why
    elif info.ready is None:
        notes.append(f"{where} is still rolling out a change (reconciling).")
    if info.latest_created_revision and info.latest_created_revision != info.latest_ready_revision:
        notes.append(
            f"Latest revision {info.latest_created_revision} is not ready; traffic stays on "
            f"{info.latest_ready_revision or 'no revision'}."
        )
    if model is None:
        notes.append("No URL to probe the model server (service has no URL and VLLM_BASE_URL is unset).")
    elif not model.health.ok:
        if info.min_instances == 0 and model.health.status_code in (None, 429, 503):
            cold = True
            notes.append(
                f"The model server did not answer: the service scales to zero (min-{info.scaling_unit}s 0), so it "
                f"is probably cold. A request starts {_a(info.scaling_unit)}; loading weights takes minutes, not "
                "seconds."
            )
        else:
            notes.append(f"The model server's /health failed ({model.health.error}).")
    return cold, notes


async def collect_status(
    runtime: Runtime,
    model_server: ModelServer,
    service: str,
    base_url_override: str | None = None,
    metrics: Metrics | None = None,
    metrics_minutes: int = 30,
    revisions: bool = True,
    where: str = "Cloud Run",
) -> StatusReport:
    # Cloud Monitoring runs alongside the Cloud Run call; it is optional and bounded by a short timeout.
    cloud = asyncio.ensure_future(service_metrics(metrics, service, metrics_minutes, 3.0)) if metrics else None
    try:
        info = await runtime.get_service(service)
        base_url = base_url_override or info.uri
        model = await probe_model(model_server, base_url) if base_url else None
    except BaseException:
        if cloud is not None:
            cloud.cancel()
        raise
    cold, notes = status_notes(info, model, where, revisions)
    report = StatusReport(
        service=info,
        model=model,
        cold=cold,
        notes=notes,
        fetched_at=datetime.now(UTC),
        revisions=revisions,
        where=where,
    )
    if cloud is not None:
        report.cloud_metrics = await cloud
    return report


async def service_status(
    runtime: Runtime,
    model_server: ModelServer,
    store: Store,
    cache_key: str,
    ttl_s: int,
    service: str,
    base_url_override: str | None = None,
    fresh: bool = False,
    metrics: Metrics | None = None,
    revisions: bool = True,
    where: str = "Cloud Run",
) -> StatusReport:
    """Status from the cache when younger than ttl_s (and not `fresh`), else collected and cached."""
    if not fresh:
        cached = await store.get(cache_key)
        if cached:
            return StatusReport.model_validate_json(cached).model_copy(update={"from_cache": True})
    report = await collect_status(
        runtime, model_server, service, base_url_override, metrics=metrics, revisions=revisions, where=where
    )
    await store.set(cache_key, report.model_dump_json(), ex=ttl_s)
    return report


def _a(noun: str) -> str:
    return ("an " if noun[:1] in "aeiou" else "a ") + noun

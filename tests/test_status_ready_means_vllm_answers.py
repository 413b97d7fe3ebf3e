"""Status says ready only when vLLM answers (issue 49): a service its platform counts ready whose vLLM /health
fails (not a cold start: an instance is kept) is headed NOT serving, naming both; a cold one stays cold; a healthy
one ready."""

from __future__ import annotations

from datetime import UTC, datetime

from handlers.commands.status import render_status
from skills.observe.status import ModelProbe, StatusReport, status_notes
from skills.ports import ProbeResult, ServiceInfo


def _report(health: ProbeResult, min_instances: int) -> StatusReport:
    info = ServiceInfo(name="vllm-gemma4", uri="http://127.0.0.1:9", ready=True, min_instances=min_instances)
    models = ProbeResult(ok=health.ok, status_code=health.status_code, error=health.error)
    model = ModelProbe(base_url=info.uri, health=health, models=[], models_probe=models)
    cold, notes = status_notes(info, model)
    return StatusReport(service=info, model=model, cold=cold, notes=notes, fetched_at=datetime.now(UTC))


def test_ready_is_said_only_when_vllm_answers() -> None:
    broken = render_status(_report(ProbeResult(ok=False, status_code=500, error="HTTP 500"), min_instances=1))
    assert "NOT serving" in broken.title and "Cloud Run counts it ready" in broken.title, broken.title
    cold = render_status(_report(ProbeResult(ok=False, status_code=503, error="HTTP 503"), min_instances=0))
    assert "cold" in cold.title, cold.title
    fine = render_status(_report(ProbeResult(ok=True, status_code=200, latency_ms=4), min_instances=1))
    assert fine.title.endswith("vllm-gemma4: ready"), fine.title

"""Without cloud configuration the bot says that the logs could not be read and why; never "no known failure"
(nothing was looked at) nor "scaled to zero" (the model was never found). Console and alert thread alike."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import redis.asyncio as redis

from bot.console import ConsoleResponder, handle_line
from bot.settings import Settings
from bot.wiring import build_deps
from handlers.incident_investigation import make_investigator
from handlers.registry import load_all
from skills.incidents.model import Alert, Incident


def unconfigured(settings: Settings) -> Settings:
    # Anonymous credentials and no project: the deterministic stand-in for "no Google credentials".
    return settings.model_copy(
        update={
            "google_cloud_project": None,
            "cloud_run_api_endpoint": None,
            "cloud_logging_api_endpoint": None,
            "vllm_base_url": None,
        }
    )


async def test_console_analyze_without_credentials_says_logs_unreadable(
    settings: Settings, redis_client: redis.Redis
) -> None:
    load_all()
    deps = build_deps(unconfigured(settings))
    out = io.StringIO()
    responder = ConsoleResponder(out, lambda prompt: None)
    await handle_line(deps, responder, "/gemma analyze")
    text = out.getvalue()
    assert "logs could not be read" in text.lower()
    assert "GOOGLE_CLOUD_PROJECT is not set" in text
    assert "No known failure" not in text and "scaled to zero" not in text
    await deps.redis.aclose()


async def test_alert_thread_without_credentials_says_why(settings: Settings, redis_client: redis.Redis) -> None:
    deps = build_deps(unconfigured(settings))
    now = datetime.now(UTC)
    alert = Alert(source="gcp", fingerprint="inc-cfg", state="firing", name="p95 high", service="vllm-gemma4")
    inc = Incident(id="i1", service="vllm-gemma4", channel="C1", opened_at=now, last_event_at=now)
    replies = [r async for r in make_investigator(deps)(inc, alert)]
    titles = " | ".join(r.title for r in replies)
    assert "Could not read the logs" in titles and "GOOGLE_CLOUD_PROJECT is not set" in titles
    assert "not asked for a plan" in titles
    assert "scaled to zero" not in titles and "no known failure" not in titles.lower()
    await deps.redis.aclose()

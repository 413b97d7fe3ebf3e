"""Choosing the sandbox, and wiring it into the bot: Deps, the console's incident threads, serve's app.

The sandbox is the default when there are no Google credentials at all (no GOOGLE_CLOUD_PROJECT, no Cloud
Run endpoint, no GOOGLE_APPLICATION_CREDENTIALS, no gcloud application-default credentials file, not on
Cloud Run); `--sandbox` forces it. The deployed model is the vLLM simulator; the agent uses VLLM_BASE_URL
(any OpenAI-compatible server) when it is set, and otherwise is off and says what to set.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from bot.adapters.google_auth import IdentityTokens
from bot.adapters.llm import LLMEndpoint
from bot.deps import Deps
from bot.sandbox.cloud import Sandbox
from bot.settings import Settings


def no_google_credentials(settings: Settings, environ: dict[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    if settings.google_cloud_project or settings.cloud_run_api_endpoint or settings.google_anonymous_credentials:
        return False
    if env.get("GOOGLE_APPLICATION_CREDENTIALS") or env.get("K_SERVICE"):
        return False
    gcloud = Path(env.get("CLOUDSDK_CONFIG") or Path.home() / ".config" / "gcloud")
    return not (gcloud / "application_default_credentials.json").exists()


def build_sandbox_deps(settings: Settings, sandbox: Sandbox, agent_base_url: str | None) -> Deps:
    """`settings` already configured by `sandbox.configure`; `agent_base_url` is the user's VLLM_BASE_URL."""
    from bot.agent import Agent
    from bot.wiring import build_deps

    # The sandbox's Azure is wired here only, with its token and CA files: settings pointing at it without them
    # would have the Azure clients look for real credentials (bot/sandbox/aca_world.py).
    settings = settings.model_copy(update=sandbox.azure.settings_update())
    deps = build_deps(settings, azure=sandbox.azure.access())
    deps.sandbox = sandbox
    deps.clock = sandbox.clock  # a canary's window passes at SANDBOX_SPEED, like the cold start before it
    deps.agent = None
    if agent_base_url:
        agent_settings = settings.model_copy(update={"vllm_base_url": agent_base_url})
        endpoint = LLMEndpoint(agent_settings, deps.runtime, deps.model_server, IdentityTokens(agent_settings))
        sandbox.closers.append(endpoint.aclose)
        deps.agent = Agent(dataclasses.replace(deps, endpoint=endpoint))
    return deps


async def attach_console(deps: Deps, responder: Any) -> None:
    """Alerts the sandbox sends reach the bot's webhook route and open incident threads in the console."""
    from bot.alert_queue import STORE_DOWN, AlertQueue
    from handlers.alerts.web import alert_routes
    from handlers.incident_chat import RenderedIncidentChat
    from handlers.incident_investigation import make_investigator
    from skills.incidents.threads import IncidentThreads

    sandbox = deps.sandbox
    if sandbox is None:
        raise RuntimeError("attach_console needs the sandbox wired (deps.sandbox)")
    chat = RenderedIncidentChat(lambda channel: responder, deps.settings.vllm_service_name)
    # The incident pipeline runs on the sandbox's clock: a fix's follow-up after ALERT_FIX_CHECK_S, coalescing and
    # debounce pass at SANDBOX_SPEED, like the simulated cold starts they follow.
    threads = IncidentThreads(
        deps.redis,
        deps.settings,
        chat,
        make_investigator(deps),
        sandbox.clock,
        store_down=STORE_DOWN,
        known=deps.service_targets,
    )
    queue = AlertQueue(deps, threads.handle, threads.on_dead, concurrency=2, publisher=threads.publisher)
    await queue.start()
    sandbox.closers.append(queue.stop)
    sandbox.alert_app = Starlette(routes=alert_routes(deps, queue.enqueue))

    async def settle(timeout_s: float = 300.0) -> None:
        # The console prints the thread before its next prompt: wait until the queue has done the alert (and
        # any close notification a command just made due: a fix's revision became ready).
        assert sandbox is not None
        await sandbox.close_cleared()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            b = await queue.backlog()
            # The jobs only record; the publisher makes the Slack (here: console) posts.
            if b["queued"] == 0 and b["pending"] == 0 and await threads.publisher.pending() == 0:
                return
            await asyncio.sleep(0.05)

    sandbox.settle = settle


def attach_app(app: Any, sandbox: Sandbox) -> None:
    """serve: the sandbox's alerts go into the app's own /alerts/gcp route (its queue, its Slack threads)."""
    sandbox.alert_app = app

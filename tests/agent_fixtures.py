"""Fixtures for the agent tests: the scripted OpenAI-compatible model, the logging stand-in, wired Deps."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from bot.agent import Agent
from bot.deps import Deps
from bot.sandbox.cloud_logging_api import CloudLoggingStandIn
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.openai_script import OpenAIScript
from bot.sandbox.server import serve
from bot.settings import Settings
from bot.wiring import build_deps, close_deps
from tests.agent_helpers import MODEL_ID, load_scenario


@pytest.fixture
def logging_api() -> Iterator[CloudLoggingStandIn]:
    standin = CloudLoggingStandIn()
    with serve(standin.app()) as url:
        standin.base_url = url  # type: ignore[attr-defined]
        yield standin


@pytest.fixture
def script() -> Iterator[OpenAIScript]:
    standin = OpenAIScript(model_id=MODEL_ID)
    with serve(standin.app) as url:
        standin.base_url = url  # type: ignore[attr-defined]
        yield standin


def agent_settings(settings: Settings, script: OpenAIScript, **overrides: Any) -> Settings:
    update = {"vllm_base_url": script.base_url, "vllm_model_id": MODEL_ID, **overrides}  # type: ignore[attr-defined]
    return settings.model_copy(update=update)


@pytest.fixture
async def make_deps(
    settings: Settings, script: OpenAIScript, cloud_run: CloudRunStandIn, logging_api: CloudLoggingStandIn
) -> AsyncIterator[Any]:
    """make_deps(scenario=..., extra_entries=[...], **setting_overrides) -> Deps with an Agent wired."""
    cloud_run.seed_service("vllm-gemma4", uri=script.base_url)  # type: ignore[attr-defined]
    built: list[Deps] = []

    def make(
        scenario: str = "example-kv-cache-insufficient",
        extra_entries: list[dict[str, Any]] | None = None,
        **overrides: Any,
    ) -> Deps:
        load_scenario(logging_api, scenario)
        logging_api.entries.extend(extra_entries or [])
        overrides.setdefault("cloud_logging_api_endpoint", logging_api.base_url)  # type: ignore[attr-defined]
        deps = build_deps(agent_settings(settings, script, **overrides))
        # Tests use short backoffs; the retry logic is the production one.
        deps.agent = Agent(deps, initial_backoff_s=0.01, max_backoff_s=0.05)
        built.append(deps)
        return deps

    yield make
    for d in built:
        await close_deps(d)

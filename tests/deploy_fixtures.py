"""Fixtures for the deploy/operate/plan tests (loaded with pytest_plugins): Deps wired to the stand-ins."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.deps import Deps
from bot.settings import Settings
from bot.wiring import build_deps, close_deps


@pytest.fixture
def fast_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"deploy_poll_s": 0.01})


@pytest.fixture
async def deps(fast_settings: Settings, redis_client: Any) -> AsyncIterator[Deps]:
    d = build_deps(fast_settings)
    yield d
    await close_deps(d)

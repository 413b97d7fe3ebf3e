"""The model-based test of whole console runs (its machine is bench/console_model.py, which runs hundreds of
examples): a few deterministic examples in every suite run, against the sandbox and the real Redis."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.conftest import REDIS_URL


def _machine() -> ModuleType:
    path = Path(__file__).resolve().parent.parent / "bench" / "console_model.py"
    spec = importlib.util.spec_from_file_location("bench_console_model", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


MODEL = _machine()


@pytest.fixture(scope="module")
def shared() -> Iterator[Any]:
    s = MODEL.Shared(redis_url=REDIS_URL).start()
    MODEL.ConsoleModel.shared = s
    try:
        yield s
    finally:
        MODEL.ConsoleModel.shared = None
        s.close()


def test_console_runs_keep_their_invariants(shared: Any) -> None:
    run_state_machine_as_test(
        MODEL.ConsoleModel,
        settings=settings(
            max_examples=4,
            stateful_step_count=12,
            derandomize=True,  # the same examples every run: a failure here is reproducible
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


def test_two_failures_in_a_row_each_get_their_own_investigation(shared: Any) -> None:
    """The invariant on a fixed run that exercises it: two scenarios, two failed revisions, two incidents (the
    random examples above may not fire two scenarios in one run)."""
    machine = MODEL.ConsoleModel()
    try:
        machine.scenario("kv-cache-too-small")
        machine.scenario("probe-too-short")
        assert len(set(MODEL.ALERTED.findall(machine.session.text))) == 2
        machine.every_failed_revision_has_its_own_investigation()
    finally:
        machine.teardown()

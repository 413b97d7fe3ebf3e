"""The model-based test of whole console runs (tests/console_model.py), a few deterministic examples per suite
run; bench/console_model.py runs hundreds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.console_model import ConsoleModel, Shared


@pytest.fixture(scope="module")
def shared() -> Iterator[Shared]:
    s = Shared().start()
    ConsoleModel.shared = s
    try:
        yield s
    finally:
        ConsoleModel.shared = None
        s.close()


def test_console_runs_keep_their_invariants(shared: Shared) -> None:
    run_state_machine_as_test(
        ConsoleModel,
        settings=settings(
            max_examples=4,
            stateful_step_count=12,
            derandomize=True,  # the same examples every run: a failure here is reproducible
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )

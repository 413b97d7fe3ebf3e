"""pytest plugin for bench/mutation.py's baseline run: which test reaches which line, and how long each test takes.

Loaded with `-p bench.mutation_coverage` and two environment variables: MUTATION_COVERAGE_FILE (coverage's data
file; each test's lines are recorded under the test's node id as coverage's dynamic context) and
MUTATION_BASELINE_OUT (a JSON file: node id -> seconds and whether it passed). Lines a test reaches only in a
subprocess it starts are not seen here; bench/mutation.py runs every test of the target for a mutant there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import coverage
import pytest

_cov: coverage.Coverage | None = None
_tests: dict[str, dict[str, Any]] = {}


def pytest_configure(config: pytest.Config) -> None:
    global _cov
    include = [p for p in os.environ.get("MUTATION_COVERAGE_INCLUDE", "").split(os.pathsep) if p]
    _cov = coverage.Coverage(data_file=os.environ["MUTATION_COVERAGE_FILE"], include=include or None)
    _cov.start()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if _cov is not None:
        _cov.switch_context(item.nodeid)
    yield
    if _cov is not None:
        _cov.switch_context("")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    rec = _tests.setdefault(report.nodeid, {"secs": 0.0, "passed": True})
    rec["secs"] += report.duration
    if report.failed:
        rec["passed"] = False


def pytest_unconfigure(config: pytest.Config) -> None:
    if _cov is not None:
        _cov.stop()
        _cov.save()
    out = os.environ.get("MUTATION_BASELINE_OUT")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(_tests, f)

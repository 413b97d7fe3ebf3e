"""The bot's image installs requirements-runtime.lock: the runtime part of requirements.lock, at the same versions.

A runtime lock that drifted from the full lock (the one the tests install) would ship libraries nobody tested; one
that misses a runtime dependency would fail in the image, not here."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.MULTILINE)


def _pins(name: str) -> dict[str, str]:
    return {canonicalize_name(p): v for p, v in PIN.findall((ROOT / name).read_text(encoding="utf-8"))}


def test_every_runtime_pin_is_the_full_locks_pin() -> None:
    full, runtime = _pins("requirements.lock"), _pins("requirements-runtime.lock")
    assert runtime, "requirements-runtime.lock pins nothing"
    drift = {p: (v, full.get(p)) for p, v in runtime.items() if full.get(p) != v}
    assert not drift, f"runtime pins differ from requirements.lock (run ./dev lock): {drift}"


def _closure(names: set[str]) -> set[str]:
    """The installed distributions these need, transitively (markers evaluated here, no extras)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = distribution(name).requires or []
        except PackageNotFoundError:
            continue
        for raw in requires:
            req = Requirement(raw)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return seen


def test_the_runtime_lock_holds_every_runtime_dependency_and_no_dev_tool() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = _pins("requirements-runtime.lock")
    direct = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    assert direct <= set(runtime), f"missing from requirements-runtime.lock: {sorted(direct - set(runtime))}"
    needed = _closure(direct)
    assert needed <= set(runtime), f"runtime needs, not locked: {sorted(needed - set(runtime))}"
    extras_only = {
        canonicalize_name(Requirement(r).name) for reqs in project["optional-dependencies"].values() for r in reqs
    } - needed
    assert not extras_only & set(runtime), f"dev/bench packages in the image: {sorted(extras_only & set(runtime))}"


def test_the_image_installs_from_the_runtime_lock_with_hashes() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert "--require-hashes -r requirements-runtime.lock" in dockerfile
    assert "pip install --no-compile --no-deps ." in dockerfile

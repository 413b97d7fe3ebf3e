"""The repository stands alone: a bare clone has every file the suite, the benches and the sandbox read.

(.ci/run also runs the whole suite from a fresh clone in an empty temporary directory.)
"""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

from bot.sandbox.examples import ALERTS, SCENARIOS
from tests.example_data import LOGHUB

REPO = Path(__file__).resolve().parents[1]


def _tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", *patterns], cwd=REPO, capture_output=True, text=True, check=True)
    return [REPO / line for line in out.stdout.splitlines()]


# The team's example-data folder beside the checkout, in the spellings code would use to reach it.
_BESIDE = ("/".join(("..", "shared")), " / ".join(('"shared"', '"data"')), "_".join(("GEMMA_SRE", "SHARED", "DATA")))


def test_nothing_reads_beside_the_checkout() -> None:
    offenders = []
    for path in _tracked("*.py", "*.sh", "*.toml", "*.yaml", "*.yml", "dev", ".ci/run"):
        text = path.read_text(errors="replace")
        if any(needle in text for needle in _BESIDE):
            offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


def test_benches_import_nothing_from_tests() -> None:
    offenders = []
    for path in sorted((REPO / "bench").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n == "tests" or n.startswith("tests.")]
    assert offenders == []


def test_bundled_data_is_tracked_and_complete() -> None:
    manifest = json.loads((SCENARIOS / "manifest.json").read_text())
    tracked = {p.relative_to(REPO) for p in _tracked("bot/sandbox/data", "tests/data")}
    for name in manifest:
        assert (SCENARIOS / f"{name}.jsonl").relative_to(REPO) in tracked, name
    assert {p.name for p in ALERTS.glob("*.json")} >= {"gcp-monitoring-open.json", "alertmanager-firing.json"}
    systems = [d for d in LOGHUB.iterdir() if d.is_dir()]
    assert len(systems) == 8
    for d in systems:
        assert (d / f"{d.name}_2k.log_structured.csv").relative_to(REPO) in tracked, d.name
    # Each data set says where it comes from.
    for folder in (SCENARIOS, ALERTS, LOGHUB):
        assert (folder / "README.md").read_text().strip()

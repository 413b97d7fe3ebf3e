"""handlers/ and skills/ do not import bot/ (issue 18: bot/ wires, handlers parse and render, skills do the
work). Checked in a fresh interpreter that loads every handler module the registry knows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_LOAD = """
import json, pkgutil, importlib, sys
import handlers, skills
from handlers.registry import load_all
load_all()
for pkg in (handlers, skills):
    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(m.name)
print(json.dumps(sorted(m for m in sys.modules if m == "bot" or m.startswith("bot."))))
"""


def test_handlers_and_skills_load_without_bot() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _LOAD], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert json.loads(out.splitlines()[-1]) == []

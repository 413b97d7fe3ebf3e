"""`gemma-sre serve` starts without importing the client libraries a request may never use (issue 18: answer
/healthz within 1 s of start; the figure itself is bench/startup.py's). Checked in a fresh interpreter: the
serving app built exactly as `serve` builds it leaves the slow imports for the first request that needs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LAZY = ("openai", "google.cloud.run_v2", "google.cloud.monitoring_v3", "google.cloud.logging", "matplotlib")

_BUILD = """
import json, sys
from bot.settings import load_settings
from bot.web import create_app
from bot.wiring import build_deps
create_app(build_deps(load_settings(
    slack_bot_token="xoxb-x", slack_signing_secret="s", redis_url="redis://127.0.0.1:6379/0", key_prefix="x",
)))
print(json.dumps(sorted(m for m in LAZY if m in sys.modules)))
"""


def test_the_serving_app_is_built_without_the_slow_client_libraries() -> None:
    code = f"LAZY = {LAZY!r}\n" + _BUILD
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert json.loads(out.splitlines()[-1]) == []


_SERVE_PARSE = """
import contextlib, io, json, os, sys
for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "REDIS_URL", "SLACK_APP_TOKEN"):
    os.environ.pop(name, None)
from bot.cli import main
with contextlib.redirect_stderr(io.StringIO()):
    code = main(["serve"])  # refuses to start (no env): everything serve imports before binding is loaded
print(json.dumps([code, sorted(m for m in OFFLINE if m in sys.modules)]))
"""


def test_serve_does_not_import_the_offline_tools_before_it_binds() -> None:
    # `gemma-sre fit` / `diagnose` register their parsers from bot/cli_<name>.py, importing the planner and
    # the log diagnosis (~0.3 s); serve needs neither before it answers /healthz.
    code = "OFFLINE = ('skills.diagnosis.diagnose', 'handlers.commands.fit', 'skills.capacity.fit')\n" + _SERVE_PARSE
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert json.loads(out.splitlines()[-1]) == [2, []]

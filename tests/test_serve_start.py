"""`gemma-sre serve` as an operator starts it: a refused Slack token is one clear log line (auth.test), and
Bolt's start-up notice about the token is not printed. A real process against the Slack stand-in."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from bot.sandbox.slack_api import Fault, SlackStandIn
from tests.conftest import REDIS_URL

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve_lines(slack: SlackStandIn, key_prefix: str, token: str) -> list[dict[str, object]]:
    """The JSON log records of a serve run stopped by Ctrl-C (SIGINT), which ends it quietly: status 130 (a
    SIGINT's), nothing on the output that is not a log record (no traceback)."""
    env = dict(
        os.environ,
        SLACK_BOT_TOKEN=token,
        SLACK_SIGNING_SECRET="s3cret",
        REDIS_URL=REDIS_URL,
        KEY_PREFIX=key_prefix,
        SLACK_API_URL=slack.base_url + "/api/",
        PYTHONPATH=str(ROOT),
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "serve", "--host", "127.0.0.1", "--port", str(_free_port())],
        env=env,
        cwd=ROOT / "tests",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not any("bot.slack_check" in line for line in lines):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    reader.join(timeout=5)
    assert proc.returncode == 128 + signal.SIGINT, "".join(lines)
    assert not [line for line in lines if not line.startswith("{")], "".join(lines)
    return [json.loads(line) for line in lines if line.startswith("{")]


def test_refused_token_is_one_clear_line_and_no_bolt_noise(slack: SlackStandIn, key_prefix: str) -> None:
    slack.inject("auth.test", Fault(status=200, error="invalid_auth"))
    records = _serve_lines(slack, key_prefix, "xoxb-wrong\n")
    problems = [r for r in records if r["severity"] in ("WARNING", "ERROR")]
    assert len(problems) == 1, problems
    assert "auth.test: invalid_auth" in str(problems[0]["message"])
    assert "SLACK_BOT_TOKEN" in str(problems[0]["message"])
    assert not any("Traceback" in str(r) for r in records)


def test_good_token_says_who_the_bot_is(slack: SlackStandIn, key_prefix: str) -> None:
    records = _serve_lines(slack, key_prefix, "xoxb-good")
    assert any("signed in as @gemma-sre in Acme" in str(r["message"]) for r in records)
    assert not [r for r in records if r["severity"] in ("WARNING", "ERROR")]
    # serve asked Slack once at start.
    assert slack.of("auth.test")

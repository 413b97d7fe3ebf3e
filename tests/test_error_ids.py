"""An unexpected failure's error id comes with the class of failure (Redis refused, Slack unreachable,
credentials missing), what to do, and where the log line is; the exceptions here are the libraries' own,
raised by really calling a closed port, never built by hand."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import google.auth
import pytest
import redis.asyncio as aioredis
from google.auth.exceptions import DefaultCredentialsError
from slack_sdk.web.async_client import AsyncWebClient

from skills.errors import failure_class

ROOT = Path(__file__).resolve().parent.parent


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: connections are refused


async def test_redis_refused() -> None:
    client = aioredis.from_url(f"redis://127.0.0.1:{closed_port()}/0")
    with pytest.raises(Exception) as info:
        await client.get("k")
    await client.aclose()
    kind = failure_class(info.value)
    assert kind is not None and kind[0].startswith("Redis refused the connection") and "REDIS_URL" in kind[1]


async def test_slack_unreachable() -> None:
    client = AsyncWebClient(token="xoxb-1", base_url=f"http://127.0.0.1:{closed_port()}/api/")
    with pytest.raises(Exception) as info:
        await client.auth_test()
    kind = failure_class(info.value)
    assert kind is not None and kind[0].startswith("Slack could not be reached") and "SLACK_API_URL" in kind[1]


def test_credentials_missing_even_when_wrapped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-such-key.json"))
    try:
        try:
            google.auth.default()  # the library's own refusal
        except DefaultCredentialsError as inner:
            raise RuntimeError("listing revisions failed") from inner
    except RuntimeError as exc:
        kind = failure_class(exc)
    assert kind is not None and kind[0] == "Google credentials are missing or expired"
    assert "application-default login" in kind[1]


def test_unknown_failures_are_not_guessed() -> None:
    assert failure_class(ValueError("x")) is None


def test_console_names_the_failure_and_its_log_file(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "SLACK_", "REDIS_", "VLLM_"))}
    env.update(
        PYTHONPATH=str(ROOT),
        CLOUDSDK_CONFIG=str(tmp_path / "no-gcloud"),
        NO_GCE_CHECK="true",
        SANDBOX_SPEED="5000",
        REDIS_URL=f"redis://127.0.0.1:{closed_port()}/0",
    )
    run = subprocess.run(
        [sys.executable, "-m", "bot.cli", "console", "--sandbox"],
        cwd=tmp_path,
        env=env,
        input="/gemma status\nquit\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = next(x for x in run.stdout.splitlines() if "error id" in x)
    rest = run.stdout[run.stdout.index(line) :]
    assert "Redis refused the connection" in line, run.stdout
    assert "correct REDIS_URL" in rest and "gemma-sre-console.log" in rest
    assert "Traceback" not in run.stdout

"""`gemma-sre serve` while Slack's Web API is unreachable: each failed Slack call is one log line that says so,
never a middleware traceback, and the user's slash command is still answered (Slack shows the ack's text)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from bot.sandbox.slack_signing import command_body, signed_headers
from tests.eventually import eventually

SECRET = "sandbox-signing-secret-0123456789"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server() -> Iterator[tuple[int, int, subprocess.Popen[str]]]:
    port, dead = _free_port(), _free_port()  # nothing listens on `dead`: Slack is unreachable
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "SLACK_", "REDIS_", "VLLM_"))}
    env |= {
        "NO_GCE_CHECK": "true",
        "CLOUDSDK_CONFIG": "/nonexistent-gcloud-config",
        "PYTHONUNBUFFERED": "1",
        "SLACK_BOT_TOKEN": "xoxb-sandbox",
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": f"http://127.0.0.1:{dead}/api/",
        "SANDBOX_SPEED": "5000",
        "GRPC_VERBOSITY": "ERROR",
    }
    cmd = [sys.executable, "-m", "bot.cli", "serve", "--sandbox", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield port, dead, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    return proc.communicate(timeout=30)[0]


async def test_each_failed_slack_call_is_one_line_without_traceback(
    server: tuple[int, int, subprocess.Popen[str]],
) -> None:
    port, dead, proc = server
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:

            async def up() -> bool:
                try:
                    return (await client.get("/readyz")).status_code == 200
                except httpx.HTTPError:
                    return False

            assert await eventually(up, timeout=60), "serve did not come up"
            answers = []
            for i, text in enumerate(("status", "metrics")):
                body = command_body(text, f"http://127.0.0.1:{dead}/response/{i}", trigger_id=f"t{i}")
                resp = await client.post("/slack/events", content=body, headers=signed_headers(SECRET, body))
                answers.append(resp)
    finally:
        out = _stop(proc)
    for resp in answers:
        assert resp.status_code == 200
        said = json.loads(resp.text)
        assert said["response_type"] == "ephemeral" and "cannot answer right now" in said["text"]
    assert "Traceback" not in out and "Failed to run a middleware" not in out, out[-3000:]
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    failed = [x for x in lines if "Slack request not handled: Slack could not be reached" in x["message"]]
    assert len(failed) == 2, [x["message"][:200] for x in lines]
    assert all("SLACK_API_URL" in x["message"] for x in failed)

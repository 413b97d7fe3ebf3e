"""`gemma-sre serve --sandbox`: the bot as Slack sees it (signed requests over HTTP to a real server process)
on the simulated project, with the Slack Web API stand-in recording what the workspace would show."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from bot.sandbox.cloud import BANNER
from bot.sandbox.slack_api import SlackStandIn
from bot.sandbox.slack_signing import action_body, command_body, signed_headers
from tests.eventually import eventually

SECRET = "sandbox-signing-secret-0123456789"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(slack: SlackStandIn) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "SLACK_", "REDIS_", "VLLM_"))}
    env |= {
        "NO_GCE_CHECK": "true",
        "CLOUDSDK_CONFIG": "/nonexistent-gcloud-config",
        "PYTHONUNBUFFERED": "1",
        "SLACK_BOT_TOKEN": "xoxb-sandbox",
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": slack.base_url + "/api/",
        "DEPLOYER_USER_IDS": "U1",
        "SANDBOX_SPEED": "5000",
        "DEPLOY_POLL_S": "0.2",
        "GRPC_VERBOSITY": "ERROR",
    }
    cmd = [sys.executable, "-m", "bot.cli", "serve", "--sandbox", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.fixture
async def bot(
    server: tuple[str, subprocess.Popen[str]],
) -> AsyncIterator[tuple[httpx.AsyncClient, subprocess.Popen[str]]]:
    url, proc = server
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:

        async def up() -> bool:
            try:
                return (await client.get("/readyz")).status_code == 200
            except httpx.HTTPError:
                return False

        assert await _until(up, 60), "serve --sandbox did not come up"
        yield client, proc


async def _until(check: Any, timeout: float) -> bool:  # noqa: ASYNC109
    """Poll an async check (the server is another process: polling is how we learn it is up)."""
    return bool(await eventually(check, timeout=timeout))


async def _post(client: httpx.AsyncClient, body: str) -> None:
    resp = await client.post("/slack/events", content=body, headers=signed_headers(SECRET, body))
    assert resp.status_code == 200, resp.text


def _texts(slack: SlackStandIn) -> str:
    parts = [str(c.payload.get("text", "")) + str(c.payload.get("blocks", "")) for c in list(slack.calls)]
    parts += [str(r.get("text", "")) + str(r.get("blocks", "")) for r in list(slack.responses)]
    return "\n".join(parts)


def _button(messages: list[dict[str, Any]], label: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    for m in reversed(messages):
        for block in m.get("blocks") or []:
            for el in block.get("elements") or []:
                if el.get("type") == "button" and el["text"]["text"].startswith(label):
                    return m, el
    return None


async def test_serve_sandbox_alert_to_incident_thread_to_confirmed_fix(
    bot: tuple[httpx.AsyncClient, subprocess.Popen[str]], slack: SlackStandIn
) -> None:
    client, proc = bot
    assert proc.stdout is not None and proc.stdout.readline().strip() == BANNER

    await _post(client, command_body("status", slack.response_url("status")))
    assert await eventually(lambda: "vllm-gemma4: ready" in _texts(slack), timeout=30)

    await _post(client, command_body("sandbox kv-cache-too-small", slack.response_url("scenario"), trigger_id="t2"))
    assert await eventually(lambda: "FIRING: vLLM revision failed to start" in _texts(slack), timeout=60)
    found = await eventually(lambda: _button(slack.of("chat.postMessage"), "Plan redeploy: max_model_len"), 60)
    assert found, _texts(slack)[-2000:]
    message, button = found
    assert "kv_cache_insufficient" in str(message.get("blocks"))

    await _post(
        client,
        action_body(button["action_id"], button["value"], slack.response_url("plan"), message_ts="1700000002.000100"),
    )
    plans = lambda: [r for r in slack.responses if r["_rid"] == "plan"] + slack.of("chat.postMessage")  # noqa: E731
    confirm = await eventually(lambda: _button(plans(), "Confirm"), timeout=30)
    assert confirm, _texts(slack)[-2000:]
    await _post(
        client,
        action_body(confirm[1]["action_id"], confirm[1]["value"], slack.response_url("confirm"), trigger_id="t4"),
    )
    assert await eventually(lambda: "redeploy `vllm-gemma4`: ready" in _texts(slack), timeout=60), _texts(slack)[-3000:]


def test_serve_sandbox_needs_slack_but_not_redis() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "SLACK_", "REDIS_", "VLLM_"))}
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli", "serve", "--sandbox"], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 2
    assert "SLACK_BOT_TOKEN" in result.stderr and "SLACK_SIGNING_SECRET" in result.stderr
    assert "REDIS_URL" not in result.stderr

"""`gemma-sre serve` as a real process with the settings that turn on its inbound paths without a public URL:
Socket Mode (SLACK_APP_TOKEN, against the Socket Mode stand-in) and Pub/Sub alerts (ALERT_PUBSUB_SUBSCRIPTION
with PUBSUB_EMULATOR_HOST, against the Subscriber stand-in). The fast-start shell wires the app in a worker
thread; both clients need the event loop, so this is where "works in the tests, dead in serve" shows."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.sandbox.pubsub_grpc import PubSubStandIn, serve_pubsub
from bot.sandbox.slack_api import SlackStandIn
from bot.sandbox.socket_mode_api import SocketModeStandIn
from tests.alerts_fixtures import am_alert, gcp_alert
from tests.conftest import REDIS_URL
from tests.eventually import eventually
from tests.test_socket_mode import command

ROOT = Path(__file__).resolve().parent.parent
APP_TOKEN = "xapp-1-A0SANDBOX1-1-serve"
SUB = "projects/test-proj/subscriptions/gemma-alerts"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    """One `gemma-sre serve` process; its JSON log lines are collected as they come."""

    def __init__(self, env: dict[str, str]) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        base = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "SLACK_", "REDIS_", "VLLM_"))}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve", "--host", "127.0.0.1", "--port", str(self.port)],
            env=base | {"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "GRPC_VERBOSITY": "ERROR"} | env,
            cwd=ROOT / "tests",
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(
            target=lambda: self.lines.extend(iter(self.proc.stdout.readline, "")),  # type: ignore[union-attr]
            daemon=True,
        )
        self._reader.start()

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in list(self.lines) if line.startswith("{")]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)
        self._reader.join(timeout=5)

    async def readyz(self) -> httpx.Response | None:
        async with httpx.AsyncClient(base_url=self.url, timeout=5) as client:
            try:
                return await client.get("/readyz")
            except httpx.HTTPError:
                return None

    async def wait_ready(self) -> None:
        """Until /readyz answers 200; fails with the process's last lines if it exits first."""

        async def ready() -> bool:
            resp = await self.readyz()
            return (resp is not None and resp.status_code == 200) or self.proc.poll() is not None

        assert await eventually(ready, 60)
        assert self.proc.poll() is None, "serve exited:\n" + "".join(self.lines[-20:])


def _common(slack: SlackStandIn, key_prefix: str) -> dict[str, str]:
    return {
        "SLACK_BOT_TOKEN": "xoxb-serve",
        "SLACK_API_URL": slack.base_url + "/api/",
        "REDIS_URL": REDIS_URL,
        "KEY_PREFIX": key_prefix,
        "GOOGLE_CLOUD_PROJECT": "test-proj",
        "GOOGLE_ANONYMOUS_CREDENTIALS": "true",
        "NO_GCE_CHECK": "true",
        "CLOUDSDK_CONFIG": "/nonexistent-gcloud-config",
        "SLACK_ALERTS_CHANNEL": "#gemma-alerts",
    }


@pytest.fixture
def socket_slack(slack: SlackStandIn) -> SocketModeStandIn:
    return SocketModeStandIn(slack, app_token=APP_TOKEN)


@pytest.fixture
def pubsub(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[PubSubStandIn, str]]:
    standin = PubSubStandIn(pull_wait_s=0.2)
    standin.create_subscription(SUB, ack_deadline_s=10)
    with serve_pubsub(standin) as host:
        yield standin, host


async def test_serve_with_an_app_token_answers_over_socket_mode(
    slack: SlackStandIn, socket_slack: SocketModeStandIn, key_prefix: str
) -> None:
    serve = Serve(_common(slack, key_prefix) | {"SLACK_APP_TOKEN": APP_TOKEN})
    try:
        assert await eventually(lambda: socket_slack.live_connections() == 1 or serve.proc.poll() is not None, 60)
        assert serve.proc.poll() is None, "serve exited:\n" + "".join(serve.lines[-20:])
        eid = socket_slack.send("slash_commands", command("help", "trig-serve-1"))
        ack = await eventually(lambda: socket_slack.acked(eid), timeout=15)
        assert ack and "/gemma" in json.dumps(ack.get("payload"))
        ready = await serve.readyz()
        assert ready is not None and ready.status_code == 200
        assert ready.json()["socket_mode"] == "connected"
        assert socket_slack.protocol_errors == []
    finally:
        serve.stop()
    assert not [r for r in serve.records() if r["severity"] == "ERROR"], serve.records()


async def test_serve_with_a_wrong_app_token_is_not_ready_and_says_why(
    slack: SlackStandIn, socket_slack: SocketModeStandIn, key_prefix: str
) -> None:
    serve = Serve(_common(slack, key_prefix) | {"SLACK_APP_TOKEN": "xapp-1-A0SANDBOX1-1-wrong"})
    try:

        async def not_ready() -> httpx.Response | None:
            resp = await serve.readyz()
            return resp if resp is not None and "socket_mode" in resp.text else None

        resp = await eventually(not_ready, 60)
        assert resp is not None, "".join(serve.lines[-20:])
        assert resp.status_code == 503 and "invalid_auth" in resp.json()["socket_mode"]
    finally:
        serve.stop()
    said = [r for r in serve.records() if r["severity"] == "ERROR" and "Socket Mode" in str(r["message"])]
    assert len(said) == 1 and "invalid_auth" in str(said[0]["message"])
    assert any("Socket Mode: not connected" in p.get("text", "") for p in slack.of("chat.postMessage"))


async def test_serve_pulls_alerts_from_pubsub_into_the_alerts_channel(
    slack: SlackStandIn, pubsub: tuple[PubSubStandIn, str], key_prefix: str
) -> None:
    standin, host = pubsub
    env = _common(slack, key_prefix) | {
        "SLACK_SIGNING_SECRET": "s3cret",
        "ALERT_PUBSUB_SUBSCRIPTION": SUB,
        "PUBSUB_EMULATOR_HOST": host,
    }
    serve = Serve(env)
    try:
        await serve.wait_ready()
        resp = await serve.readyz()
        assert resp is not None and resp.json()["pubsub"] == "pulling"
        mid = standin.publish(SUB, json.dumps(gcp_alert("inc-serve-ps-1")).encode())
        assert await eventually(lambda: mid in standin.acked, 30), "".join(serve.lines[-20:])
        assert await eventually(lambda: slack.of("chat.postMessage"), 30)
    finally:
        serve.stop()
    assert not [r for r in serve.records() if "Pub/Sub alerts are off" in str(r["message"])]


async def test_serve_with_pubsub_that_cannot_start_is_not_ready(
    slack: SlackStandIn, key_prefix: str, tmp_path: Path
) -> None:
    # No emulator and credentials that cannot be read: the client cannot be created.
    bad = tmp_path / "creds.json"
    bad.write_text("{not json")
    env = _common(slack, key_prefix) | {
        "SLACK_SIGNING_SECRET": "s3cret",
        "ALERT_PUBSUB_SUBSCRIPTION": SUB,
        "GOOGLE_ANONYMOUS_CREDENTIALS": "false",
        "GOOGLE_APPLICATION_CREDENTIALS": str(bad),
    }
    serve = Serve(env)
    try:

        async def answered() -> httpx.Response | None:
            resp = await serve.readyz()
            return resp if resp is not None and "pubsub" in resp.text else None

        resp = await eventually(answered, 60)
        assert resp is not None, "".join(serve.lines[-20:])
        assert resp.status_code == 503 and resp.json()["pubsub"].startswith("off:")
    finally:
        serve.stop()
    said = [r for r in serve.records() if "Pub/Sub alerts are off" in str(r["message"])]
    assert len(said) == 1
    # and a start-up message where the alerts would have gone
    assert any("Pub/Sub alerts: off" in p.get("text", "") for p in slack.of("chat.postMessage"))


async def test_serve_takes_both_alert_webhooks_into_the_alerts_channel(slack: SlackStandIn, key_prefix: str) -> None:
    # The webhooks as Cloud Monitoring (token in the query) and Alertmanager (bearer) call them, with a poison
    # body between the two: it gets its 400 and the good alert after it still reaches Slack.
    token = "serve-hook-token-1"
    serve = Serve(_common(slack, key_prefix) | {"SLACK_SIGNING_SECRET": "s3cret", "ALERT_WEBHOOK_TOKEN": token})
    try:
        await serve.wait_ready()
        async with httpx.AsyncClient(base_url=serve.url, timeout=15) as client:
            gcp = await client.post(f"/alerts/gcp?auth_token={token}", json=gcp_alert("inc-serve-hook-1"))
            deep = b"[" * 100_000 + b"]" * 100_000
            poison = await client.post(
                "/alerts/alertmanager",
                content=deep,
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
            am = await client.post(
                "/alerts/alertmanager",
                json=am_alert("fp-serve-hook-1", service="vllm-other"),
                headers={"Authorization": f"Bearer {token}"},
            )
        assert gcp.status_code == 202 and am.status_code == 202, (gcp.text, am.text)
        assert poison.status_code == 400

        def incident_for(service: str) -> bool:
            return any(service in json.dumps(p) for p in slack.of("chat.postMessage"))

        assert await eventually(lambda: incident_for("vllm-gemma4") and incident_for("vllm-other"), 30), "".join(
            serve.lines[-20:]
        )
        assert {p.get("channel") for p in slack.of("chat.postMessage")} == {"#gemma-alerts"}
        assert serve.proc.poll() is None
    finally:
        serve.stop()
    assert not [r for r in serve.records() if "Traceback" in str(r.get("message", ""))]

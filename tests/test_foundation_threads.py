"""Slack thread replies continue a `/gemma ask` conversation: signed Events API deliveries through the real
app (Bolt, slack-sdk, Redis) and the scripted OpenAI-compatible model, once per delivery."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx

from bot.agent import Agent
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.openai_script import OpenAIScript, say
from bot.sandbox.slack_api import SlackStandIn
from bot.sandbox.slack_signing import command_body, signed_headers
from bot.settings import Settings
from bot.web import create_app
from bot.wiring import build_deps
from tests.agent_helpers import MODEL_ID
from tests.conftest import SIGNING_SECRET
from tests.eventually import eventually

pytest_plugins = ["tests.agent_fixtures"]


def _event(channel: str, thread_ts: str, text: str, event_id: str, **extra: Any) -> str:
    return json.dumps(
        {
            "token": "legacy",
            "team_id": "T0001",
            "api_app_id": "A1",
            "type": "event_callback",
            "event_id": event_id,
            "event_time": int(time.time()),
            "event": {
                "type": "message",
                "channel": channel,
                "user": "U1",
                "text": text,
                "ts": f"{time.time():.6f}",
                "thread_ts": thread_ts,
                "channel_type": "channel",
                **extra,
            },
        }
    )


def _json_headers(body: str) -> dict[str, str]:
    return signed_headers(SIGNING_SECRET, body) | {"Content-Type": "application/json"}


async def test_thread_reply_event_continues_the_conversation_once(
    settings: Settings, redis_client: object, slack: SlackStandIn, cloud_run: CloudRunStandIn, script: OpenAIScript
) -> None:
    cloud_run.seed_service("vllm-gemma4", uri=script.base_url)  # type: ignore[attr-defined]
    script.push(say("It is up and serving."), say("Cold starts take several minutes from zero."))
    deps = build_deps(settings.model_copy(update={"vllm_base_url": script.base_url, "vllm_model_id": MODEL_ID}))  # type: ignore[attr-defined]
    deps.agent = Agent(deps, initial_backoff_s=0.01, max_backoff_s=0.05)
    app = create_app(deps)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test") as client:
        body = command_body("ask is the service up?", slack.response_url(), trigger_id="trig-ask")
        assert (
            await client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
        ).status_code == 200
        assert await eventually(lambda: len(slack.of("chat.postMessage")) >= 2)
        header, answer = slack.of("chat.postMessage")[:2]
        thread_ts = answer["thread_ts"]
        assert header.get("thread_ts") in (None, "") and "It is up" in json.dumps(answer["blocks"])

        # A person replies in the thread: one delivery, then Slack's retry of the same event_id.
        event_id = f"Ev{uuid.uuid4().hex[:8]}"
        reply = _event("C1", thread_ts, "how long to wake it?", event_id)
        assert (await client.post("/slack/events", content=reply, headers=_json_headers(reply))).status_code == 200
        retry_headers = _json_headers(reply) | {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
        assert (await client.post("/slack/events", content=reply, headers=retry_headers)).status_code == 200
        # The bot's own messages and edits in the thread are not questions.
        for extra in ({"bot_id": "BBOT"}, {"subtype": "message_changed"}):
            other = _event("C1", thread_ts, "ignored", f"Ev{uuid.uuid4().hex[:8]}", **extra)
            await client.post("/slack/events", content=other, headers=_json_headers(other))
        assert await eventually(lambda: len(slack.of("chat.postMessage")) >= 3)
        await deps.drain()

    posts = slack.of("chat.postMessage")
    assert len(posts) == 3, "the retried delivery or a bot/edit message produced a second answer"
    assert posts[2]["thread_ts"] == thread_ts
    assert "Cold starts take several minutes" in json.dumps(posts[2]["blocks"])
    follow_up = script.chat_requests[-1]["messages"]
    assert [m["role"] for m in follow_up][-3:] == ["user", "assistant", "user"]
    assert follow_up[-1]["content"] == "how long to wake it?"
    assert len(script.chat_requests) == 2
    await deps.redis.aclose()

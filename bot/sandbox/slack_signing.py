"""Slack-signed requests exactly as Slack sends them (v0 HMAC-SHA256 over 'v0:ts:body').

For driving the bot as Slack would: the sandbox, the tests and the benches."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier


def signed_headers(secret: str, body: str, ts: int | None = None) -> dict[str, str]:
    ts = int(time.time()) if ts is None else ts
    sig = SignatureVerifier(secret).generate_signature(timestamp=str(ts), body=body)
    return {
        "X-Slack-Request-Timestamp": str(ts),
        "X-Slack-Signature": sig or "",
        "Content-Type": "application/x-www-form-urlencoded",
    }


def command_body(
    text: str, response_url: str, trigger_id: str = "trig-1", user_id: str = "U1", channel_id: str = "C1"
) -> str:
    return urlencode(
        {
            "token": "legacy",
            "team_id": "T0001",
            "team_domain": "acme",
            "channel_id": channel_id,
            "channel_name": "ops",
            "user_id": user_id,
            "user_name": "alice",
            "command": "/gemma",
            "text": text,
            "api_app_id": "A1",
            "response_url": response_url,
            "trigger_id": trigger_id,
        }
    )


def action_body(
    action_id: str,
    value: str,
    response_url: str,
    user_id: str = "U1",
    channel_id: str = "C1",
    message_ts: str = "1700000001.000100",
    trigger_id: str = "trig-a",
) -> str:
    payload: dict[str, Any] = {
        "type": "block_actions",
        "team": {"id": "T0001"},
        "user": {"id": user_id},
        "api_app_id": "A1",
        "trigger_id": trigger_id,
        "channel": {"id": channel_id},
        "response_url": response_url,
        "message": {"ts": message_ts, "text": ""},
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "value": value,
                "block_id": "b1",
                "action_ts": str(time.time()),
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)})

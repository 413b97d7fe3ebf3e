"""The gate in front of Bolt: verify Slack's signature on the raw bytes first, then check the payload's shape.

Bolt parses a request's body before its own signature check, so unauthenticated garbage (`\\xff\\xfe`, `{not
json`, `payload=%7Bbroken`, a JSON list, a non-numeric timestamp) used to crash inside it. Here nothing is
parsed until the v0 signature over `v0:{timestamp}:{raw body}` matches and the timestamp is within five
minutes (Slack's rule: https://docs.slack.dev/authentication/verifying-requests-from-slack/), checked with
slack_sdk's own SignatureVerifier. Failing that: 401. A signed request whose body is not a payload Bolt can
read: 400 with a short reason. Only then does Bolt see it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

from slack_sdk.signature import Clock, SignatureVerifier

from handlers.http_body import HttpProblem

MAX_SKEW_S = 60 * 5  # Slack: reject requests whose timestamp is more than five minutes from now
_TS = re.compile(r"[0-9]{1,12}", re.ASCII)
_SIG = re.compile(r"v0=[0-9a-f]{64}", re.ASCII)

# Top-level fields Bolt and our listeners read, and the JSON types Slack sends for them
# (https://docs.slack.dev/reference/interaction-payloads, https://docs.slack.dev/apis/events-api).
_OBJ_OR_STR = ("team", "enterprise", "user", "channel")
_OBJ = ("view", "message", "container", "event", "item", "previous_message", "assistant_thread", "function_data")
_LIST_OF_OBJ = ("authorizations", "actions", "response_urls")
_STR = ("type", "text", "command", "user_id", "channel_id", "team_id", "trigger_id", "response_url", "event_id")


def verify(verifier: SignatureVerifier, body: bytes, headers: Mapping[str, str], clock: Clock | None = None) -> None:
    """401 unless the request carries a valid Slack signature over exactly these bytes, made recently."""
    ts = headers.get("x-slack-request-timestamp", "")
    sig = headers.get("x-slack-signature", "")
    if not ts or not sig:
        raise HttpProblem(401, "missing Slack signature headers")
    if not _TS.fullmatch(ts):
        raise HttpProblem(401, "X-Slack-Request-Timestamp is not a Unix time in seconds")
    now = (clock or verifier.clock).now()
    if abs(now - int(ts)) > MAX_SKEW_S:
        raise HttpProblem(401, "stale or future X-Slack-Request-Timestamp (more than 5 minutes off)")
    if not _SIG.fullmatch(sig) or not _valid(verifier, body, ts, sig):
        raise HttpProblem(401, "invalid Slack signature")


def _valid(verifier: SignatureVerifier, body: bytes, ts: str, sig: str) -> bool:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        # slack_sdk signs text (it decodes bytes as UTF-8 first); Slack's scheme is over the raw bytes, so a
        # body that is not UTF-8 is checked the same way here, and if it is signed it gets its 400 later.
        base = b"v0:" + ts.encode() + b":" + body
        mac = hmac.new(verifier.signing_secret.encode(), base, hashlib.sha256).hexdigest()
        return hmac.compare_digest("v0=" + mac, sig)
    return verifier.is_valid(body=text, timestamp=ts, signature=sig)


def _bad(why: str) -> HttpProblem:
    return HttpProblem(400, f"malformed Slack payload: {why}")


def parse(body: bytes, content_type: str) -> dict[str, Any]:
    """The payload as Bolt will read it (same rules as slack_bolt's parse_body), or 400 saying why not."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad("body is not UTF-8") from None
    if not text:
        raise _bad("empty body")
    ctype = content_type.split(";", 1)[0].strip().lower()
    try:
        if ctype == "application/json" or text.startswith("{"):
            data: Any = json.loads(text)
        elif "payload" in text:
            params = dict(parse_qsl(text, keep_blank_values=True))
            if "payload" not in params:
                raise _bad("form body without a payload field")
            data = json.loads(params["payload"])
        else:
            data = dict(parse_qsl(text, keep_blank_values=True))
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise _bad("body is neither a JSON object nor a form Slack sends") from None
    if not isinstance(data, dict):
        raise _bad(f"expected a JSON object, got {type(data).__name__}")
    check_shape(data)
    return data


def _lone_surrogate(data: object) -> bool:
    """Whether any string in the payload (keys included) holds a surrogate code point on its own."""
    stack = [data]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


def check_shape(data: dict[str, Any]) -> None:
    """Raise HttpProblem(400) for a payload Bolt or our listeners cannot read (Slack never sends such): the HTTP
    path calls it from parse, Socket Mode (bot/socket_mode.py) on each envelope."""
    if _lone_surrogate(data):
        # JSON's \ud800 escape decodes to text that is not Unicode; Slack sends none, and Redis, Slack's API
        # and the logs could not encode it
        raise _bad("a string holds a lone surrogate (not valid Unicode)")
    for key in _OBJ_OR_STR:
        v = data.get(key)
        if v is not None and not isinstance(v, str | dict):
            raise _bad(f"field {key!r} must be an object or a string")
        if isinstance(v, dict) and not isinstance(v.get("id", ""), str | None):
            raise _bad(f"field {key}.id must be a string")
    for key in _OBJ:
        v = data.get(key)
        if v is not None and not isinstance(v, dict):
            raise _bad(f"field {key!r} must be an object")
    for key in _LIST_OF_OBJ:
        v = data.get(key)
        if v is not None and not (isinstance(v, list) and all(isinstance(x, dict) for x in v)):
            raise _bad(f"field {key!r} must be a list of objects")
    for key in _STR:
        v = data.get(key)
        if v is not None and not isinstance(v, str):
            raise _bad(f"field {key!r} must be a string")
    for key in ("event", "view"):  # Bolt calls .get on these when the key is there at all
        if key in data and not isinstance(data[key], dict):
            raise _bad(f"field {key!r} must be an object")
    actions = data.get("actions")
    if data.get("type") == "block_actions" and not actions:
        raise _bad("block_actions without actions")
    for a in actions or []:
        for key in ("action_id", "block_id", "type", "value", "action_ts"):
            if a.get(key) is not None and not isinstance(a[key], str):
                raise _bad(f"field actions[].{key} must be a string")
    event = data.get("event")
    if isinstance(event, dict):
        for key in ("type", "user", "channel", "text", "ts", "thread_ts", "bot_id", "subtype"):
            v = event.get(key)
            if v is not None and not isinstance(v, str):
                raise _bad(f"field event.{key} must be a string")
    view = data.get("view")
    if isinstance(view, dict):
        if not isinstance(view.get("private_metadata", ""), str) or not isinstance(view.get("callback_id", ""), str):
            raise _bad("view.private_metadata and view.callback_id must be strings")
        state = view.get("state", {})
        values = state.get("values", {}) if isinstance(state, dict) else None
        if not isinstance(values, dict) or not all(
            isinstance(els, dict) and all(isinstance(el, dict) for el in els.values()) for els in values.values()
        ):
            raise _bad("view.state.values must map block ids to objects of input objects")

"""Seeded hostile request bodies for the bot's HTTP endpoints (the fuzz test and bench/fuzz.py share them).

Each case is (body bytes, headers) for one endpoint: `/slack/events` (signed with the right secret or not,
sometimes with a broken timestamp) and the two alert webhooks (authenticated or not). Bodies mix valid
payloads with mutations: truncation, byte flips, wrong JSON types in known fields, huge and negative
numbers, deep nesting, invalid UTF-8, wrong content types. Same seed, same cases.
"""

from __future__ import annotations

import base64
import json
import random
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

from bot.sandbox.slack_signing import action_body, command_body, signed_headers

Case = tuple[bytes, dict[str, str]]

# Payloads the issue names as having crashed the app, plus their neighbours.
KNOWN_BAD: list[bytes] = [
    b"\xff\xfe",
    b"{not json",
    b"payload=%7Bbroken",
    b"[1,2,3]",
    b'{"team": 5}',
    b'{"type": "event_callback", "event": "x"}',
    b'{"type": "event_callback", "event": {"type": 5}}',
    b'{"user": [1], "channel": 3}',
    b'{"authorizations": [1]}',
    b'{"authorizations": "x"}',
    b'{"view": {"private_metadata": 5}}',
    b'payload={"type":"block_actions","actions":"x"}',
    b"payload=" + quote('{"type":"view_submission","view":{"state":{"values":"x"}}}').encode(),
    b"payload=" + quote('{"type":"block_actions","actions":[{"value":{"a":1}}],"channel":{"id":7}}').encode(),
    b"payload=" + quote('{"type":"block_actions","message":"m","actions":[{}]}').encode(),
    b"payload=" + quote('{"type":"view_submission","view":{"state":{"values":{"b":"x"}}}}').encode(),
    b"payload=" + quote('{"type":"view_submission","view":{"state":{"values":{"b":{"a":"x"}}}}}').encode(),
    b"command=/gemma&text=" + b"%FF" * 4,
    b"command=%2Fgemma&text=status&user_id=U1&response_url=ftp%3A%2F%2Fx",
    b'{"type": "url_verification", "challenge": {"a": 1}}',
    b'{"type": "url_verification"}',
    b"[" * 5000 + b"]" * 5000,
    b"",
    b"null",
    b"1e999999",
    b'"just a string"',
]

_WORDS = ["status", "scale 3", "logs", "ask why", "destroy", "../x", "help", "\u202e", "<!channel>", "x" * 300]
_JSON_VALUES: list[Any] = [None, True, 0, -1, 10**20, -(10**20), 1.5e308, "", "x", [], {}, [1], {"id": 5}]


def _mutate(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
    op = rng.randrange(6)
    if op == 0:  # truncate
        return data[: rng.randrange(len(data))]
    if op == 1:  # flip some bytes
        b = bytearray(data)
        for _ in range(rng.randrange(1, 6)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if op == 2:  # insert junk
        i = rng.randrange(len(data))
        return data[:i] + rng.choice([b"\x00", b"\xff", b"{", b"%", b'"', b"\\u0000", b"&payload="]) + data[i:]
    if op == 3:
        return data * rng.randrange(2, 4)
    if op == 4:
        return rng.choice(KNOWN_BAD)
    return data[::-1]


def _retype(rng: random.Random, obj: Any, depth: int = 0) -> Any:
    """Replace some values (at any depth) with values of other JSON types."""
    if isinstance(obj, dict):
        return {
            k: (rng.choice(_JSON_VALUES) if rng.random() < 0.25 else _retype(rng, v, depth + 1)) for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [_retype(rng, v, depth + 1) for v in obj]
    return obj


def slack_cases(rng: random.Random, secret: str, n: int, response_url: str = "http://127.0.0.1:9/r") -> Iterator[Case]:
    """`n` bodies for /slack/events; about half correctly signed (so they reach the payload checks)."""
    for i in range(n):
        kind = rng.randrange(5)
        if kind == 0:
            body = command_body(rng.choice(_WORDS), response_url, trigger_id=f"fz-{i}").encode()
        elif kind == 1:
            body = action_body(
                rng.choice(["gemma_confirm", "gemma_cancel", "gemma_plan", "x"]), "v", response_url
            ).encode()
            if rng.random() < 0.5:
                inner = json.loads(_form_payload(body))
                body = urlencode({"payload": json.dumps(_retype(rng, inner))}).encode()
        elif kind == 2:
            event = {"type": "event_callback", "event_id": f"Ev{i}", "team_id": "T1",
                     "event": {"type": "message", "channel": "C1", "user": "U1", "text": "hi", "ts": "1.2",
                               "thread_ts": "1.1"}}  # fmt: skip
            body = json.dumps(_retype(rng, event)).encode()
        elif kind == 3:
            body = rng.choice(KNOWN_BAD)
        else:
            body = _mutate(rng, command_body("status", response_url, trigger_id=f"fz-{i}").encode())
        if rng.random() < 0.3:
            body = _mutate(rng, body)
        headers = _slack_headers(rng, secret, body)
        yield body, headers


def _form_payload(body: bytes) -> str:
    from urllib.parse import parse_qs

    return parse_qs(body.decode())["payload"][0]


def _slack_headers(rng: random.Random, secret: str, body: bytes) -> dict[str, str]:
    ctype = rng.choice(["application/x-www-form-urlencoded", "application/json", "text/plain", ""])
    roll = rng.random()
    if roll < 0.5:  # signed right: reaches the payload checks
        text = body.decode("latin-1")  # the signature is over bytes; latin-1 maps them 1:1
        h = signed_headers(secret, text)
        h["X-Slack-Signature"] = "v0=" + _hmac(secret, h["X-Slack-Request-Timestamp"], body)
    elif roll < 0.65:
        h = {"X-Slack-Request-Timestamp": rng.choice(["abc", "", "-1", "1e9", "99999999999999999999", "0x10"]),
             "X-Slack-Signature": "v0=" + "0" * 64}  # fmt: skip
    elif roll < 0.8:
        h = {"X-Slack-Request-Timestamp": str(int(time.time())), "X-Slack-Signature": rng.choice(["", "v0=", "v1=zz"])}
    else:
        h = {}
    if ctype:
        h["Content-Type"] = ctype
    return h


def _hmac(secret: str, ts: str, body: bytes) -> str:
    import hashlib
    import hmac

    return hmac.new(secret.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()


def alert_cases(
    rng: random.Random,
    n: int,
    gcp: dict[str, Any],
    am: dict[str, Any],
    creds: tuple[str, str, str],
    paths: tuple[str, ...] = ("/alerts/gcp", "/alerts/alertmanager"),
) -> Iterator[tuple[str, bytes, dict[str, str]]]:
    """`n` (path, body, headers) for the alert webhooks in `paths`, from example payloads `gcp` and `am`;
    `creds` = (user, password, token). About half authenticated."""
    user, password, token = creds
    for _ in range(n):
        path = rng.choice(paths)
        base = gcp if path == "/alerts/gcp" else am
        kind = rng.randrange(4)
        if kind == 0:
            body = json.dumps(base).encode()
        elif kind == 1:
            body = json.dumps(_retype(rng, json.loads(json.dumps(base)))).encode()
        elif kind == 2:
            body = _mutate(rng, json.dumps(base).encode())
        elif path == "/alerts/gcp":
            p = json.loads(json.dumps(gcp))
            p["incident"]["started_at"] = rng.choice([10**20, -(10**20), -1, 1_700_000_000_000, 2**63, 0, "x"])
            body = json.dumps(p).encode()
        else:
            p = json.loads(json.dumps(am))
            p["alerts"] = p["alerts"] * rng.choice([0, 2, 1001])
            body = json.dumps(p).encode()
        headers = {"Content-Type": rng.choice(["application/json", "text/plain"])}
        roll = rng.random()
        if roll < 0.5:
            if path == "/alerts/gcp":
                headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            else:
                headers["Authorization"] = f"Bearer {token}"
        elif roll < 0.7:
            headers["Authorization"] = rng.choice(
                ["Basic !!!", "Basic " + base64.b64encode(b"\xff:\xfe").decode(), "Bearer", "x"]
            )
        yield path, body, headers

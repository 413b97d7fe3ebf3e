"""A Slack Socket Mode stand-in: `apps.connections.open` plus the WebSocket that carries envelopes and acks.

It attaches to a `SlackStandIn` (same base URL, so the bot's one Web API client reaches both), as Slack serves
`apps.connections.open` beside every other Web API method. What it speaks, as Slack documents it:
- `apps.connections.open` (https://docs.slack.dev/reference/methods/apps.connections.open/): POST with the
  app-level token (xapp-…) in the Authorization header; answers `{"ok": true, "url": "wss://…"}`. Errors are
  Slack's error shape `{"ok": false, "error": "..."}`: `not_authed` (no token), `invalid_auth` (unknown
  token), `not_allowed_token_type` (a bot/user token instead of an app-level one).
- On connect Slack sends `hello` (`num_connections`, `connection_info.app_id`, `debug_info`); then envelopes
  `{"envelope_id", "type": "slash_commands"|"interactive"|"events_api", "payload",
  "accepts_response_payload"}`; the app answers each with `{"envelope_id"[, "payload"]}` (a payload only where
  `accepts_response_payload` is true). Slack asks the app to reconnect with
  `{"type": "disconnect", "reason": "refresh_requested"|"warning"|"link_disabled", "debug_info": {...}}`
  and closes the old socket shortly after (https://docs.slack.dev/apis/events-api/using-socket-mode/).
The client side these shapes must satisfy is slack-sdk's `slack_sdk.socket_mode` (request.py, response.py).

Stand-in choices (not Slack facts): tickets are single-use; an ack that is not JSON, names an unknown or
already-acked envelope, carries a field other than envelope_id/payload, or a payload where none is accepted
is recorded in `protocol_errors` (tests assert it stays empty).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from bot.sandbox.slack_api import SlackStandIn

APP_ID = "A0SANDBOX1"
DISCONNECT_REASONS = frozenset({"warning", "refresh_requested", "link_disabled"})
ENVELOPE_TYPES = frozenset({"slash_commands", "interactive", "events_api"})


@dataclass
class Envelope:
    envelope_id: str
    type: str
    payload: dict[str, Any]
    accepts_response_payload: bool
    ack: dict[str, Any] | None = None  # the app's answer, once it came


@dataclass
class _Conn:
    ws: WebSocket
    loop: asyncio.AbstractEventLoop
    n: int
    closed: asyncio.Event = field(default_factory=asyncio.Event)


class SocketModeStandIn:
    def __init__(self, slack: SlackStandIn, app_token: str = "xapp-1-A0SANDBOX1-1-sandbox") -> None:
        self.slack = slack
        self.app_token = app_token
        self.opens = 0  # successful apps.connections.open calls
        self.connects = 0  # WebSocket connections accepted
        self.envelopes: dict[str, Envelope] = {}
        self.protocol_errors: list[str] = []
        self._tickets: set[str] = set()
        self._conns: list[_Conn] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        # Ahead of the generic /api/{method} route, so this method is answered here.
        slack.app.router.routes[0:0] = [
            Route("/api/apps.connections.open", self._open, methods=["POST"]),
            WebSocketRoute("/link/", self._link),
        ]

    # --- wire ---------------------------------------------------------------------------------------
    async def _open(self, request: Request) -> Response:
        auth = request.headers.get("authorization", "")
        token = auth[len("Bearer ") :].strip() if auth.startswith("Bearer ") else ""
        if not token:
            # The token must be in the header; as a POST parameter it is refused (the method's docs).
            return JSONResponse({"ok": False, "error": "not_authed"})
        if not token.startswith("xapp-"):
            return JSONResponse({"ok": False, "error": "not_allowed_token_type"})
        if token != self.app_token:
            return JSONResponse({"ok": False, "error": "invalid_auth"})
        ticket = uuid.uuid4().hex
        with self._lock:
            self._tickets.add(ticket)
            self.opens += 1
        base = self.slack.base_url.replace("http://", "ws://", 1)
        return JSONResponse({"ok": True, "url": f"{base}/link/?ticket={ticket}&app_id={APP_ID}"})

    async def _link(self, ws: WebSocket) -> None:
        ticket = ws.query_params.get("ticket", "")
        with self._lock:
            valid = ticket in self._tickets
            self._tickets.discard(ticket)
        if not valid:
            await ws.close(code=1008)  # policy violation: no such (or a reused) ticket
            return
        await ws.accept()
        with self._lock:
            self.connects += 1
            conn = _Conn(ws, asyncio.get_running_loop(), self.connects)
            self._conns.append(conn)
            live = len([c for c in self._conns if not c.closed.is_set()])
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": live,
                "debug_info": {"host": "applink-sandbox", "build_number": 1, "approximate_connection_time": 18060},
                "connection_info": {"app_id": APP_ID},
            }
        )
        try:
            while True:
                self._on_ack(await ws.receive_text())
        except WebSocketDisconnect:
            pass
        finally:
            conn.closed.set()

    def _on_ack(self, raw: str) -> None:
        try:
            msg = json.loads(raw)
        except ValueError:
            self.protocol_errors.append(f"not JSON: {raw[:80]!r}")
            return
        if not isinstance(msg, dict) or "envelope_id" not in msg:
            self.protocol_errors.append(f"no envelope_id: {raw[:80]!r}")
            return
        extra = set(msg) - {"envelope_id", "payload"}
        env = self.envelopes.get(str(msg["envelope_id"]))
        if extra:
            self.protocol_errors.append(f"unknown fields {sorted(extra)} in ack")
        elif env is None:
            self.protocol_errors.append(f"ack for unknown envelope {msg['envelope_id']}")
        elif env.ack is not None:
            self.protocol_errors.append(f"envelope {env.envelope_id} acked twice")
        elif "payload" in msg and not env.accepts_response_payload:
            self.protocol_errors.append(f"payload in the ack of {env.type} envelope that accepts none")
        else:
            env.ack = msg

    # --- driving it (thread-safe: called from the test's event loop or thread) ----------------------------
    def live_connections(self) -> int:
        return len([c for c in self._conns if not c.closed.is_set()])

    def _current(self) -> _Conn:
        live = [c for c in self._conns if not c.closed.is_set()]
        if not live:
            raise RuntimeError("no Socket Mode connection is open")
        return live[-1]

    def _run(self, conn: _Conn, message: dict[str, Any]) -> None:
        text = json.dumps(message, ensure_ascii=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: a text frame is UTF-8, so only JSON's \u escape carries it
            text = json.dumps(message)
        asyncio.run_coroutine_threadsafe(conn.ws.send_text(text), conn.loop).result(timeout=5)

    def send(self, type: str, payload: dict[str, Any], *, accepts_response_payload: bool | None = None) -> str:
        """Deliver one envelope on the newest connection; returns its envelope_id."""
        if type not in ENVELOPE_TYPES:
            raise ValueError(f"unknown envelope type {type}")
        if accepts_response_payload is None:
            # Slack lets slash commands and some interactions answer in the ack; events never.
            accepts_response_payload = type != "events_api"
        eid = f"env-{next(self._ids):04d}-{uuid.uuid4().hex[:8]}"
        env = Envelope(eid, type, payload, accepts_response_payload)
        self.envelopes[eid] = env
        message: dict[str, Any] = {
            "envelope_id": eid,
            "type": type,
            "payload": payload,
            "accepts_response_payload": accepts_response_payload,
        }
        if type == "events_api":
            message["retry_attempt"] = 0
            message["retry_reason"] = ""
        self._run(self._current(), message)
        return eid

    def send_raw(self, frame: str) -> None:
        """Put any text frame on the socket (a test's fault injection: what a broken proxy or a future
        envelope shape would deliver); it is not recorded as an envelope and expects no ack."""
        conn = self._current()
        asyncio.run_coroutine_threadsafe(conn.ws.send_text(frame), conn.loop).result(timeout=5)

    def disconnect(self, reason: str = "refresh_requested", *, close: bool = True) -> None:
        """Ask the app to reconnect, as Slack does; then (like Slack, after a grace) close the old socket."""
        if reason not in DISCONNECT_REASONS:
            raise ValueError(f"unknown disconnect reason {reason}")
        conn = self._current()
        self._run(conn, {"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-sandbox"}})
        if close:
            self.close(conn)

    def close(self, conn: _Conn | None = None) -> None:
        """Drop a connection without a word (a network cut)."""
        conn = conn or self._current()
        asyncio.run_coroutine_threadsafe(conn.ws.close(code=1001), conn.loop).result(timeout=5)
        conn.closed.set()

    def acked(self, envelope_id: str) -> dict[str, Any] | None:
        return self.envelopes[envelope_id].ack

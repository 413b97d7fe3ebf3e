"""Socket Mode: the same Bolt app, reached over an outbound WebSocket instead of POST /slack/events.

For teams that cannot expose an HTTP endpoint to Slack. With SLACK_APP_TOKEN (xapp-…) set, `serve` opens a
Socket Mode connection with slack-bolt's asyncio handler (slack_bolt.adapter.socket_mode.async_handler, the
aiohttp-based one: https://docs.slack.dev/tools/bolt-python/concepts/socket-mode/), which shares the app's
Web API client (and so its base URL, retries and pooled session). Every listener in bot/slack_app.py runs
unchanged: Bolt dispatches an envelope's payload as it would an HTTP request and the ack goes back on the
socket. slack-sdk's client handles Slack's `disconnect` messages (refresh_requested, warning, link_disabled)
and dropped sockets by calling apps.connections.open again and reconnecting.

The HTTP app still runs (Cloud Run wants a port; health, metrics and alert webhooks live there).

slack-sdk's aiohttp Socket Mode client opens its aiohttp session in its constructor, which needs a running
event loop; `serve` wires the app in a worker thread (bot/serve_shell.py), so the handler is made in `start()`,
on the loop, not when the app is built. `status()` feeds /readyz: not connected is not ready, with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import aiohttp
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from bot.settings import Settings
from handlers.http_body import HttpProblem
from handlers.slack_request import check_shape
from skills.logs.redact import redact
from skills.retrying import RetryPolicy, Sleep, retry_call

log = logging.getLogger(__name__)

# apps.connections.open's errors (https://docs.slack.dev/reference/methods/apps.connections.open/), as advice.
_HINTS = {
    "not_authed": "no app-level token was sent: set SLACK_APP_TOKEN",
    "invalid_auth": "Slack does not know this app-level token: copy it again from Basic Information",
    "not_allowed_token_type": "SLACK_APP_TOKEN must be an app-level token (xapp-…), not the bot token",
    "missing_scope": "the app-level token needs the connections:write scope",
}


class _OneLine(logging.LoggerAdapter):  # type: ignore[type-arg]
    """slack-sdk's Socket Mode logger, with its `logger.exception(...)` calls -- a frame that is not JSON, an
    envelope whose payload Bolt cannot read -- said as one WARNING line, redacted and cut, without the
    traceback: the sender's fault, the connection goes on, and a traceback per bad frame only floods the log."""

    @property
    def level(self) -> int:
        # slack-bolt reads `client.logger.level` after each ack (adapter/socket_mode/async_internals.py
        # send_async_response) to decide whether to time the response; a LoggerAdapter has no such attribute.
        return self.logger.getEffectiveLevel()

    def exception(self, msg: object, *args: object, exc_info: object = True, **kwargs: object) -> None:
        text = redact(str(msg) % args if args else str(msg))
        self.logger.warning("Slack Socket Mode: %s", text[:300])


class _CheckedHandler(AsyncSocketModeHandler):
    """slack-bolt's handler, with the shape check the HTTP path makes (handlers/slack_request.py) before Bolt
    reads an envelope: a payload Slack would never send is acked empty (so it is not redelivered) and said in one
    WARNING line, instead of a listener's traceback and no ack at all."""

    async def handle(self, client: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        try:
            if not isinstance(req.payload, dict):
                raise HttpProblem(400, f"malformed Slack payload: expected an object, got {type(req.payload).__name__}")
            check_shape(req.payload)
        except HttpProblem as p:
            log.warning("Slack Socket Mode: %s envelope dropped: %s", req.type, p.message)
            await client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
            return
        await super().handle(client, req)


class NotConnected(Exception):
    """Slack did not open a Socket Mode connection; the message says why and what to do."""


class SocketMode:
    """Owns the Socket Mode connection for the process's lifetime (started and stopped by the ASGI lifespan)."""

    def __init__(
        self, bolt: AsyncApp, app_token: str, *, ping_interval: float = 10.0, sleep: Sleep = asyncio.sleep
    ) -> None:
        # slack-sdk narrates every reconnect at INFO; keep its warnings and errors, say the rest ourselves.
        sdk_log = logging.getLogger("slack_sdk.socket_mode")
        if sdk_log.level == logging.NOTSET:
            sdk_log.setLevel(logging.WARNING)
        self._bolt, self._app_token, self._ping_interval = bolt, app_token, ping_interval
        self._logger = _OneLine(sdk_log, {})
        self.handler: _CheckedHandler | None = None  # made on the event loop, in start()
        self._sleep = sleep
        self._retry: asyncio.Task[None] | None = None
        self.problem: str | None = "not started"

    def status(self) -> tuple[bool, str]:
        """(ready, what /readyz shows): "connected", or why not."""
        return (True, "connected") if self.problem is None else (False, f"not connected: {self.problem}")

    async def start(self) -> None:
        """Connect now if Slack lets us; otherwise say why in one line and keep trying in the background."""
        self.handler = _CheckedHandler(
            self._bolt,
            app_token=self._app_token,
            web_client=self._bolt.client,  # the app's own client: one base URL, one session, one set of retries
            logger=self._logger,  # type: ignore[arg-type]  # an adapter: the Logger methods slack-sdk calls
            ping_interval=self._ping_interval,
        )
        try:
            await self._connect()
        except NotConnected as exc:
            log.error("Slack Socket Mode: %s", exc)
            self._retry = asyncio.get_running_loop().create_task(self._keep_trying())
            self._retry.add_done_callback(_said)

    async def _connect(self) -> None:
        assert self.handler is not None
        client = self.handler.client
        try:
            resp = await client.web_client.apps_connections_open(app_token=client.app_token)
        except SlackApiError as exc:
            err = str(exc.response.get("error", "unknown"))
            self.problem = f"apps.connections.open failed ({err}): {_HINTS.get(err, 'see Slack')}"
            raise NotConnected(self.problem) from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            self.problem = f"cannot reach Slack's API ({type(exc).__name__})"
            raise NotConnected(self.problem) from None
        client.wss_uri = str(resp["url"])
        await self.handler.connect_async()  # from here slack-sdk reconnects by itself
        self.problem = None
        log.info("Slack Socket Mode connected (no public URL needed)")

    async def _keep_trying(self) -> None:
        """The shared retry policy, never giving up: 5 s, doubling to 5 min, one WARNING line per failure."""
        policy = RetryPolicy(
            what="Slack Socket Mode",
            transient=lambda exc: isinstance(exc, NotConnected),
            initial_s=5.0,
            max_s=300.0,
            jitter_s=1.0,
            sleep=self._sleep,
            log=log,
            describe=str,
        )
        await self._sleep(5.0)  # start() has just tried
        await retry_call(policy, self._connect)

    async def stop(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retry
        if self.handler is not None:
            await self.handler.close_async()
        self.problem = "stopped"


def _said(task: asyncio.Task[None]) -> None:
    """The reconnect loop ends only connected or stopped; anything else is said now, not at garbage collection."""
    if not task.cancelled() and task.exception() is not None:
        log.error("Slack Socket Mode: reconnecting stopped", exc_info=task.exception())


def socket_mode_for(settings: Settings, bolt: AsyncApp) -> SocketMode | None:
    """A Socket Mode connection when SLACK_APP_TOKEN is set; None for HTTP mode."""
    if settings.slack_app_token is None:
        return None
    return SocketMode(bolt, settings.slack_app_token.get_secret_value())

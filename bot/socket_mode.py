"""Socket Mode: the same Bolt app, reached over an outbound WebSocket instead of POST /slack/events.

For teams that cannot expose an HTTP endpoint to Slack. With SLACK_APP_TOKEN (xapp-…) set, `serve` opens a
Socket Mode connection with slack-bolt's asyncio handler (slack_bolt.adapter.socket_mode.async_handler, the
aiohttp-based one: https://docs.slack.dev/tools/bolt-python/concepts/socket-mode/), which shares the app's
Web API client (and so its base URL, retries and pooled session). Every listener in bot/slack_app.py runs
unchanged: Bolt dispatches an envelope's payload as it would an HTTP request and the ack goes back on the
socket. slack-sdk's client handles Slack's `disconnect` messages (refresh_requested, warning, link_disabled)
and dropped sockets by calling apps.connections.open again and reconnecting.

The HTTP app still runs (Cloud Run wants a port; health, metrics and alert webhooks live there).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import aiohttp
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError

from bot.settings import Settings

log = logging.getLogger(__name__)

# apps.connections.open's errors (https://docs.slack.dev/reference/methods/apps.connections.open/), as advice.
_HINTS = {
    "not_authed": "no app-level token was sent: set SLACK_APP_TOKEN",
    "invalid_auth": "Slack does not know this app-level token: copy it again from Basic Information",
    "not_allowed_token_type": "SLACK_APP_TOKEN must be an app-level token (xapp-…), not the bot token",
    "missing_scope": "the app-level token needs the connections:write scope",
}


class SocketMode:
    """Owns the Socket Mode connection for the process's lifetime (started and stopped by the ASGI lifespan)."""

    def __init__(self, bolt: AsyncApp, app_token: str, *, ping_interval: float = 10.0) -> None:
        # slack-sdk narrates every reconnect at INFO; keep its warnings and errors, say the rest ourselves.
        sdk_log = logging.getLogger("slack_sdk.socket_mode")
        if sdk_log.level == logging.NOTSET:
            sdk_log.setLevel(logging.WARNING)
        self.handler = AsyncSocketModeHandler(
            bolt,
            app_token=app_token,
            web_client=bolt.client,  # the app's own client: one base URL, one session, one set of retries
            logger=sdk_log,
            ping_interval=ping_interval,
        )
        self._retry: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Connect now if Slack lets us; otherwise say why in one line and keep trying in the background."""
        if not await self._connect():
            self._retry = asyncio.get_running_loop().create_task(self._keep_trying())

    async def _connect(self) -> bool:
        client = self.handler.client
        try:
            resp = await client.web_client.apps_connections_open(app_token=client.app_token)
        except SlackApiError as exc:
            err = str(exc.response.get("error", "unknown"))
            log.error("Slack Socket Mode: apps.connections.open failed (%s): %s", err, _HINTS.get(err, "see Slack"))
            return False
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.error("Slack Socket Mode: cannot reach Slack's API (%s); retrying", type(exc).__name__)
            return False
        client.wss_uri = str(resp["url"])
        await self.handler.connect_async()  # from here slack-sdk reconnects by itself
        log.info("Slack Socket Mode connected (no public URL needed)")
        return True

    async def _keep_trying(self) -> None:
        delay = 5.0
        while True:
            await asyncio.sleep(delay)
            if await self._connect():
                return
            delay = min(delay * 2, 300.0)

    async def stop(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retry
        await self.handler.close_async()


def socket_mode_for(settings: Settings, bolt: AsyncApp) -> SocketMode | None:
    """A Socket Mode connection when SLACK_APP_TOKEN is set; None for HTTP mode."""
    if settings.slack_app_token is None:
        return None
    return SocketMode(bolt, settings.slack_app_token.get_secret_value())

"""`serve` asks Slack who it is (auth.test) at start, so a wrong or revoked token is one clear log line at
start-up instead of a silent bot; and Bolt's start-up notice about the token is kept out of the logs.

auth.test: https://docs.slack.dev/reference/methods/auth.test/ (errors such as invalid_auth, not_authed,
account_inactive, token_revoked, token_expired).
"""

from __future__ import annotations

import logging

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

log = logging.getLogger(__name__)

_HINTS = {
    "invalid_auth": "Slack does not know this token: copy the Bot User OAuth Token (xoxb-…) again",
    "not_authed": "no token was sent: set SLACK_BOT_TOKEN",
    "account_inactive": "the app was uninstalled or its bot user deactivated: reinstall the app",
    "token_revoked": "the token was revoked: reinstall the app and copy the new token",
    "token_expired": "the token expired (token rotation is on): turn rotation off or refresh the token",
}


class _DropTokenNotice(logging.Filter):
    """Bolt re-reads SLACK_BOT_TOKEN from the environment and warns that it ignores it because we hand it a
    client (which already carries the same token, stripped). True and harmless, but noise in every start."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "`token` will be unused" not in record.getMessage()


def quiet_bolt() -> None:
    logger = logging.getLogger("slack_bolt.AsyncApp")
    if not any(isinstance(f, _DropTokenNotice) for f in logger.filters):
        logger.addFilter(_DropTokenNotice())


async def check_slack_token(client: AsyncWebClient) -> bool:
    """One log line: who the bot is in which workspace, or why Slack refused the token."""
    try:
        resp = await client.auth_test()
    except SlackApiError as exc:
        err = str(exc.response.get("error", "unknown"))
        log.error("Slack refused SLACK_BOT_TOKEN at start (auth.test: %s): %s", err, _HINTS.get(err, "see Slack"))
        return False
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        log.error("Slack's API is unreachable at %s (%s); commands will fail", client.base_url, type(exc).__name__)
        return False
    log.info(
        "Slack: signed in as @%s in %s (%s)", resp.get("user", "?"), resp.get("team", "?"), resp.get("team_id", "?")
    )
    return True

"""A surface-neutral reply: handlers build one, renderers turn it into Block Kit or plain text.

Keeping this small means every command renders the same in Slack and in the console, and golden tests of
the Slack JSON cover all commands through one renderer.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from skills.logs.redact import redact


class Button(BaseModel):
    label: str
    action_id: str
    value: str = ""
    style: Literal["primary", "danger"] | None = None


class FileOut(BaseModel):
    """A file for the thread (a long digest, a CSV, a PNG chart)."""

    filename: str
    title: str = ""
    content: bytes


class Section(BaseModel):
    # Untrusted: the renderer escapes &, < and > in all of these (emphasis such as *bold*, `code`, :emoji:
    # survives escaping; mentions and links do not unless listed in Reply.mentions / Reply.links).
    heading: str | None = None
    text: str | None = None
    fields: list[tuple[str, str]] = Field(default_factory=list)
    code: str | None = None  # preformatted block


_USER_ID = re.compile(r"^[UW][A-Z0-9]{1,20}$")
_SAFE_URL = re.compile(r"^https?://[^\s<>|]+$")


class Reply(BaseModel):
    """A message. Every text field (title, sections, context) is untrusted and escaped by the Slack renderer
    (handlers/render_slack.py), so model output, log lines, alert fields and echoed input can be put anywhere.
    The only markup is what the trusted fields list: `mentions` (Slack user ids from Slack's own payload,
    written <@ID> in the text) and `links` ((url, label) pairs, written <url|label> in the text)."""

    title: str
    sections: list[Section] = Field(default_factory=list)
    buttons: list[Button] = Field(default_factory=list)
    context: str | None = None  # small footer: data age, timings
    ephemeral: bool = False
    files: list[FileOut] = Field(default_factory=list)
    mentions: list[str] = Field(default_factory=list)  # trusted: user ids whose <@ID> stays a mention
    links: list[tuple[str, str]] = Field(default_factory=list)  # trusted: (url, label) whose <url|label> stays

    def add(self, **kwargs: Any) -> Reply:
        self.sections.append(Section(**kwargs))
        return self

    def trusted_mentions(self) -> list[str]:
        return [u for u in self.mentions if _USER_ID.match(u)]

    def trusted_links(self) -> list[tuple[str, str]]:
        return [(u, label) for u, label in self.links if _safe_link(u, label)]

    def mention(self, user_id: str) -> str:
        """`<@ID>` for the text, and the id listed as trusted so the renderer keeps it a mention. An identity that
        is no Slack user id (the canary's automatic rollback, `CANARY_ROLLBACK_IDENTITY`; an MCP stdio caller;
        the console) is named as `@name`, plain text: as `<@name>` Slack would show the escaped markup."""
        if not _USER_ID.match(user_id):
            return f"@{user_id}"
        if user_id not in self.mentions:
            self.mentions.append(user_id)
        return f"<@{user_id}>"

    def link(self, url: str, label: str) -> str:
        """`<url|label>` when the url is https on a host we trust (TRUSTED_LINK_HOSTS); any other address is
        shown as inline code after the label -- visible for what it is, never behind a label that vouches
        for it (Slack does not turn text inside code into a link)."""
        if not _safe_link(url, label):
            shown = url.replace("`", "").strip()[:300]
            return f"{label}: `{shown}`" if shown else label
        if (url, label) not in self.links:
            self.links.append((url, label))
        return f"<{url}|{label}>"


# The hosts whose links we render under our own labels: alert URLs come from the sender, so only Google Cloud's
# console (where Cloud Monitoring's incident URLs point: "url" in the notification schema,
# https://cloud.google.com/monitoring/support/notification-options#schema-webhook) is linked.
TRUSTED_LINK_HOSTS = frozenset({"console.cloud.google.com"})


def _safe_link(url: str, label: str) -> bool:
    if not _SAFE_URL.match(url) or set("<>|&") & set(label):
        return False
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    return (
        parts.scheme == "https"
        and parts.username is None
        and port in (None, 443)
        and (parts.hostname or "") in TRUSTED_LINK_HOSTS
        and "@" not in parts.netloc
    )


# Action ids shared across features. A proposed action (from diagnosis, the agent or an alert) is a
# `PLAN_ACTION` button whose value names the action and its params; clicking it opens the normal
# plan -> confirm flow, never the write itself.
PLAN_ACTION = "gemma_plan"
CONFIRM_ACTION = "gemma_confirm"
CANCEL_ACTION = "gemma_cancel"


def plan_button(action: str, params: dict[str, Any], label: str | None = None) -> Button:
    value = json.dumps({"action": action, "params": params}, separators=(",", ":"), sort_keys=True)
    return Button(label=label or f"Plan: {action}", action_id=PLAN_ACTION, value=value)


def error_reply(message: str, hint: str = "", mentions: tuple[str, ...] = ()) -> Reply:
    """An error for the person who asked (ephemeral), redacted: errors from clouds and models quote input.
    `mentions`: the user ids the message names (UserFacingError.mentions); all other markup is escaped."""
    r = Reply(title=":warning: " + redact(message), ephemeral=True, mentions=list(mentions))
    if hint:
        r.add(text=redact(hint))
    return r

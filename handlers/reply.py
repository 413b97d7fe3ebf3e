"""A surface-neutral reply: handlers build one, renderers turn it into Block Kit or plain text.

Keeping this small means every command renders the same in Slack and in the console, and golden tests of
the Slack JSON cover all commands through one renderer.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from skills.redact import redact


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
    heading: str | None = None
    text: str | None = None  # Slack mrkdwn subset: *bold*, `code`, <url|label>
    fields: list[tuple[str, str]] = Field(default_factory=list)
    code: str | None = None  # preformatted block


class Reply(BaseModel):
    title: str
    sections: list[Section] = Field(default_factory=list)
    buttons: list[Button] = Field(default_factory=list)
    context: str | None = None  # small footer: data age, timings
    ephemeral: bool = False
    files: list[FileOut] = Field(default_factory=list)

    def add(self, **kwargs: Any) -> Reply:
        self.sections.append(Section(**kwargs))
        return self


# Action ids shared across features. A proposed action (from diagnosis, the agent or an alert) is a
# `PLAN_ACTION` button whose value names the action and its params; clicking it opens the normal
# plan -> confirm flow, never the write itself.
PLAN_ACTION = "gemma_plan"
CONFIRM_ACTION = "gemma_confirm"
CANCEL_ACTION = "gemma_cancel"


def plan_button(action: str, params: dict[str, Any], label: str | None = None) -> Button:
    value = json.dumps({"action": action, "params": params}, separators=(",", ":"), sort_keys=True)
    return Button(label=label or f"Plan: {action}", action_id=PLAN_ACTION, value=value)


def error_reply(message: str, hint: str = "") -> Reply:
    """An error for the person who asked (ephemeral), redacted: errors from clouds and models quote input."""
    r = Reply(title=":warning: " + redact(message), ephemeral=True)
    if hint:
        r.add(text=redact(hint))
    return r

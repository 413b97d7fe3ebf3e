"""What a handler gets: the wired dependencies, who asked, where, and a responder for the surface."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from handlers.reply import FileOut, Reply

if TYPE_CHECKING:
    from handlers.deps import HandlerDeps


class Responder(Protocol):
    """The chat surface (Slack or the console). Message refs are Slack `ts` strings (synthetic in the console)."""

    # Where posts go: in Slack, the channel id once a post has answered (a '#name' is accepted for posting,
    # but edits need the id, so store this one, not the name you started with).
    channel: str

    async def reply(self, reply: Reply) -> None:
        """The answer to the command itself (Slack: via the response URL)."""
        ...

    async def post(self, reply: Reply, thread_ts: str | None = None) -> str:
        """A channel message (or a thread reply); returns its ts so it can be edited in place."""
        ...

    async def update(self, ts: str, reply: Reply) -> None: ...

    async def upload(self, file: FileOut, thread_ts: str | None = None) -> None: ...

    async def open_modal(self, view: dict) -> None:
        """Open a modal (Slack only; the console asks on stdin instead)."""
        ...


@dataclass
class CommandContext:
    deps: HandlerDeps
    responder: Responder
    user_id: str
    channel_id: str
    args: list[str] = field(default_factory=list)
    raw_text: str = ""
    trigger_id: str = ""
    opts: argparse.Namespace = field(default_factory=argparse.Namespace)  # `args` parsed by the command's parser
    # A Slack slash command: its answer, unless ephemeral, is read by everyone in `channel_id` (named
    # `channel_name` by Slack). False in the console and over MCP, where only the asker reads it.
    in_slack: bool = False
    channel_name: str = ""


@dataclass
class ActionContext:
    """A button click or a modal submission."""

    deps: HandlerDeps
    responder: Responder
    user_id: str
    channel_id: str
    action_id: str
    value: str
    message_ts: str = ""
    thread_ts: str = ""
    trigger_id: str = ""
    form: dict[str, str] = field(default_factory=dict)  # modal inputs by block id

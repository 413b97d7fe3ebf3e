"""The chat surface incidents are told on (Slack's alerts channel, or the console): the port the incident pipeline
defines for what it needs and the surfaces implement (handlers/incident_chat.py). It lives beside the pipeline, not in
skills/ports.py, because it speaks the pipeline's own types (Incident, Event): the ground floor names no domain type."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from skills.incidents.model import Event, Incident


@dataclass(frozen=True)
class Posted:
    """A message the chat service accepted: its `ts`, and the channel id it answered with (edits need the id,
    while a post may name the channel '#name')."""

    ts: str
    channel: str


class ChatRefused(Exception):
    """The chat service answered with an error: the message was not posted, so posting it again cannot make a
    duplicate (unlike a lost connection, after which nobody knows)."""


class Rendered(Protocol):
    """A message a surface rendered (an investigation's findings or plan), kept as JSON until it is posted."""

    def model_dump_json(self) -> str: ...


@dataclass(frozen=True)
class DeadNotice:
    """An alert (or an incident's header) given up after `attempts`: said in the alerts channel."""

    what: str  # "*<alert name>* on `<service>`", or the queue entry
    error: str  # redacted
    attempts: int
    stream: str  # where it is kept
    entry: str


class IncidentChat(Protocol):
    """Where incident threads are told. The surface renders every message from the domain state it is given;
    the incident pipeline (skills/incidents) never builds a message itself. A refusal raises ChatRefused; any
    other failure leaves it unknown whether the message was posted."""

    async def post_header(self, channel: str, inc: Incident) -> Posted: ...

    async def edit_header(self, channel: str, ts: str, inc: Incident) -> None: ...

    async def post_lines(self, channel: str, thread_ts: str, events: Sequence[Event], service: str) -> str:
        """One thread message for the events since the last one; its ts."""
        ...

    async def post_rendered(self, channel: str, thread_ts: str, message_json: str) -> str:
        """A stored Rendered message (Rendered.model_dump_json) under the thread; its ts."""
        ...

    async def post_storm(
        self, channel: str, incs: Sequence[Incident], threads: builtins.set[str], since: datetime
    ) -> Posted:
        """The storm summary: every incident of the storm; `threads` are those whose own thread is open."""
        ...

    async def edit_storm(
        self, channel: str, ts: str, incs: Sequence[Incident], threads: builtins.set[str], since: datetime
    ) -> None: ...

    async def post_dead(self, channel: str, thread_ts: str | None, notice: DeadNotice) -> None: ...

"""The IncidentChat port (skills/incidents/chat.py) on a chat surface: each incident message rendered here
(handlers/incident_render.py) and posted through the surface's Responder (Slack's ChannelResponder, or the
console's). The incident pipeline (skills/incidents) hands over domain state only."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from slack_sdk.errors import SlackApiError

from handlers.context import Responder
from handlers.incident_render import header_reply, lines_reply, storm_reply
from handlers.reply import Reply
from skills.incidents.chat import ChatRefused, DeadNotice, Posted
from skills.incidents.model import Event, Incident

ResponderFor = Callable[[str], Responder]  # channel -> responder


class RenderedIncidentChat:
    def __init__(self, responder_for: ResponderFor, known_service: str) -> None:
        self.responder_for = responder_for
        self.known_service = known_service

    async def _post(self, channel: str, reply: Reply, thread_ts: str | None = None) -> Posted:
        slack = self.responder_for(channel)
        try:
            ts = await slack.post(reply, thread_ts=thread_ts)
        except SlackApiError as exc:  # Slack answered with an error: nothing was posted
            raise ChatRefused(str(exc)) from exc
        return Posted(ts=ts, channel=slack.channel)

    async def _update(self, channel: str, ts: str, reply: Reply) -> None:
        try:
            await self.responder_for(channel).update(ts, reply)
        except SlackApiError as exc:
            raise ChatRefused(str(exc)) from exc

    async def post_header(self, channel: str, inc: Incident) -> Posted:
        return await self._post(channel, header_reply(inc, self.known_service))

    async def edit_header(self, channel: str, ts: str, inc: Incident) -> None:
        await self._update(channel, ts, header_reply(inc, self.known_service))

    async def post_lines(self, channel: str, thread_ts: str, events: Sequence[Event], service: str) -> str:
        return (await self._post(channel, lines_reply(events, service), thread_ts)).ts

    async def post_rendered(self, channel: str, thread_ts: str, message_json: str) -> str:
        return (await self._post(channel, Reply.model_validate_json(message_json), thread_ts)).ts

    async def post_storm(self, channel: str, incs: Sequence[Incident], threads: set[str], since: datetime) -> Posted:
        return await self._post(channel, storm_reply(incs, threads, channel, since))

    async def edit_storm(
        self, channel: str, ts: str, incs: Sequence[Incident], threads: set[str], since: datetime
    ) -> None:
        await self._update(channel, ts, storm_reply(incs, threads, channel, since))

    async def post_dead(self, channel: str, thread_ts: str | None, notice: DeadNotice) -> None:
        reply = Reply(title=f":skull: An alert could not be processed after {notice.attempts} attempts: {notice.what}")
        reply.add(text=f"Last error: `{notice.error}`")
        reply.context = f"kept in the dead-letter stream {notice.stream} (entry {notice.entry})"
        await self._post(channel, reply, thread_ts)

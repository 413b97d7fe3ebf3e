"""Conversations with the agent in Slack threads: `/gemma ask` starts one; replies in the thread continue it.

The lead wires Slack `message` events (thread replies from people, not bots) to `on_thread_reply`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from handlers.remediation_render import action_buttons
from handlers.reply import Reply
from skills.diagnosis.remediation import ProposedAction
from skills.errors import UserFacingError
from skills.logs.redact import redact

if TYPE_CHECKING:
    from handlers.context import Responder
    from handlers.deps import HandlerDeps

MAX_QUESTION_CHARS = 4000
NOT_CONFIGURED = ("The model agent is not configured.", "Set VLLM_BASE_URL or deploy the model first.")


def answer_reply(text: str, proposed: list[ProposedAction]) -> Reply:
    # Model text as it is: the Slack renderer escapes it (no <!channel> pings or disguised links).
    reply = Reply(title=":robot_face: Gemma").add(text=redact(text))
    reply.buttons.extend(action_buttons(proposed))
    if proposed:
        reply.context = "Proposed changes run only after the plan -> confirm flow."
    return reply


async def answer_in_thread(deps: HandlerDeps, responder: Responder, thread_ts: str, question: str) -> None:
    """Answer `question` in the thread with the conversation so far, and remember the exchange."""
    question = redact(question)  # before it is stored in Redis or sent to the model
    if deps.agent is None:
        raise UserFacingError("The model agent is not configured.", "Set VLLM_BASE_URL or deploy the model first.")
    store = deps.agent.conversations
    history = await store.get(thread_ts) or []

    async def progress(text: str) -> None:
        await responder.post(Reply(title=text), thread_ts=thread_ts)

    try:
        answer = await deps.agent.ask(history, question[:MAX_QUESTION_CHARS], progress=progress)
    except UserFacingError as exc:
        msg = Reply(title=f":warning: {exc.message}")
        if exc.hint:
            msg.add(text=exc.hint)
        await responder.post(msg, thread_ts=thread_ts)
        return
    # Remember the exchange before showing it: a reply typed the moment the answer appears must find it.
    await store.append(thread_ts, question[:MAX_QUESTION_CHARS], answer.text)
    await responder.post(answer_reply(answer.text, answer.proposed), thread_ts=thread_ts)


async def on_thread_reply(
    deps: HandlerDeps, responder: Responder, channel_id: str, thread_ts: str, user_id: str, text: str
) -> None:
    """A message in a thread: answer it if the thread is a conversation with the bot, else ignore it."""
    if deps.agent is None or not text.strip():
        return
    if await deps.agent.conversations.get(thread_ts) is None:
        return  # not our thread, or the conversation expired
    await answer_in_thread(deps, responder, thread_ts, text.strip())

"""Conversation history for `/gemma ask` threads, in Redis with a TTL: user questions and the bot's answers
(not tool traffic), trimmed to a token budget so a long thread never outgrows the model's context."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from bot.agent.budget import HISTORY_TOKENS, trim_history
from skills.ports import Store

if TYPE_CHECKING:
    from bot.settings import Settings


class ConversationStore:
    def __init__(self, store: Store, settings: Settings) -> None:
        self._store = store
        self._settings = settings

    def _key(self, thread_ts: str) -> str:
        return str(self._settings.key("conv", thread_ts))

    async def start(self, thread_ts: str) -> None:
        """Mark a thread as a conversation with the bot (replies in it are answered)."""
        await self._store.set(self._key(thread_ts), "[]", ex=self._settings.conversation_ttl_s, nx=True)

    async def get(self, thread_ts: str) -> list[dict[str, str]] | None:
        """The history, or None when the thread is not (or no longer) a conversation with the bot."""
        raw = await self._store.get(self._key(thread_ts))
        if raw is None:
            return None
        try:
            turns = json.loads(raw)
        except ValueError:
            return []
        return [t for t in turns if isinstance(t, dict) and t.get("role") in ("user", "assistant")]

    async def append(self, thread_ts: str, question: str, answer: str) -> None:
        history = await self.get(thread_ts) or []
        history += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
        kept = trim_history(history, HISTORY_TOKENS)
        await self._store.set(self._key(thread_ts), json.dumps(kept), ex=self._settings.conversation_ttl_s)

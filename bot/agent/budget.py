"""Token arithmetic for the loop: cheap estimates, cutting oversized tool results, trimming history.

Estimates are skills/tokens.py's (the one estimator the log digest uses too); exact counts would need a
/tokenize round-trip per message, too slow for a per-step guard.
"""

from __future__ import annotations

import json
from typing import Any

from skills.tokens import estimate_tokens

CHARS_PER_TOKEN = 4  # prose; dense text (digits, JSON) costs more, which `truncate` measures rather than assumes
# Conversation history kept for `/gemma ask` threads (question/answer pairs, not tool traffic).
HISTORY_TOKENS = 4000


__all__ = ["HISTORY_TOKENS", "estimate_tokens", "message_tokens", "trim_history", "truncate"]


def message_tokens(messages: list[dict[str, Any]]) -> int:
    total = 0
    for m in messages:
        total += 4 + estimate_tokens(str(m.get("content") or ""))
        if m.get("tool_calls"):
            total += estimate_tokens(json.dumps(m["tool_calls"], separators=(",", ":")))
    return total


def truncate(text: str, max_tokens: int, narrow_hint: str) -> str:
    """Cut `text` to about max_tokens, keeping whole lines, with a marker telling the model how to narrow."""
    if estimate_tokens(text) <= max_tokens:
        return text
    room = max(0, max_tokens - 60)  # leave room for the marker
    head = text[: room * CHARS_PER_TOKEN]
    while head and estimate_tokens(head) > room:  # dense text: shrink in proportion until it fits
        head = head[: len(head) * room // estimate_tokens(head)]
    cut = head.rfind("\n")
    if cut > len(head) // 2:
        head = head[:cut]
    marker = (
        f"\n[TRUNCATED: the result was about {estimate_tokens(text)} tokens; only the first "
        f"{estimate_tokens(head)} are shown. To see more, narrow the query: {narrow_hint}]"
    )
    return head + marker


def trim_history(history: list[dict[str, Any]], max_tokens: int = HISTORY_TOKENS) -> list[dict[str, Any]]:
    """Drop the oldest turns until the history fits; the newest message is always kept."""
    kept: list[dict[str, Any]] = []
    used = 0
    for m in reversed(history):
        cost = message_tokens([m])
        if kept and used + cost > max_tokens:
            break
        kept.append(m)
        used += cost
    kept.reverse()
    # A history must not start with an orphan assistant answer.
    while len(kept) > 1 and kept[0].get("role") != "user":
        kept.pop(0)
    return kept

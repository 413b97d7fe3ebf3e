"""Text cut to fit a message: at a word boundary, with an ellipsis, never mid-word without saying so."""

from __future__ import annotations

ELLIPSIS = "…"


def shorten(text: str, limit: int) -> str:
    """`text` if it fits in `limit` characters, else its longest start that ends at a word boundary, plus "…"
    (the whole is at most `limit`). A single word longer than the room left (a URL, a path) is cut inside it:
    the ellipsis still says that something is missing."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return ELLIPSIS[:limit]
    room = text[: limit - 1]
    cut = max(room.rfind(" "), room.rfind("\n"), room.rfind("\t"))
    if cut >= limit // 2 and not text[limit - 1].isspace():  # a boundary not too far back
        room = room[:cut]
    return room.rstrip(" \t\n,;:-") + ELLIPSIS

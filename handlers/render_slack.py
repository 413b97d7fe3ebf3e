"""Reply -> Slack Block Kit. Respects Block Kit limits so a long reply never makes Slack reject the post."""

from __future__ import annotations

from typing import Any

from .reply import Reply

_TEXT_MAX = 2900  # section text limit is 3000 chars
_FIELD_MAX = 1900  # a field's text limit is 2000 chars
_MAX_FIELDS = 10
_MAX_BLOCKS = 50


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _mrkdwn(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text}


def to_blocks(reply: Reply) -> tuple[str, list[dict[str, Any]]]:
    """Return (fallback text, blocks)."""
    blocks: list[dict[str, Any]] = [{"type": "section", "text": _mrkdwn(_clip(f"*{reply.title}*", _TEXT_MAX))}]
    for s in reply.sections:
        if s.heading:
            blocks.append({"type": "section", "text": _mrkdwn(_clip(f"*{s.heading}*", _TEXT_MAX))})
        if s.text:
            blocks.append({"type": "section", "text": _mrkdwn(_clip(s.text, _TEXT_MAX))})
        for i in range(0, len(s.fields), _MAX_FIELDS):
            chunk = s.fields[i : i + _MAX_FIELDS]
            fields = [_mrkdwn(_clip(f"*{k}*\n{v}", _FIELD_MAX)) for k, v in chunk]
            blocks.append({"type": "section", "fields": fields})
        if s.code:
            blocks.append({"type": "section", "text": _mrkdwn("```" + _clip(s.code, _TEXT_MAX - 6) + "```")})
    if reply.buttons:
        elements = []
        for b in reply.buttons[:25]:
            el: dict[str, Any] = {
                "type": "button",
                "text": {"type": "plain_text", "text": _clip(b.label, 75)},
                "action_id": b.action_id,
                "value": _clip(b.value, 2000),
            }
            if b.style:
                el["style"] = b.style
            elements.append(el)
        # action_ids must be unique within a block: one actions block per button keeps that true.
        for el in elements:
            blocks.append({"type": "actions", "elements": [el]})
    if reply.context:
        blocks.append({"type": "context", "elements": [_mrkdwn(_clip(reply.context, _TEXT_MAX))]})
    if len(blocks) > _MAX_BLOCKS:
        blocks = [*blocks[: _MAX_BLOCKS - 1], {"type": "context", "elements": [_mrkdwn("(reply cut: too long)")]}]
    return reply.title, blocks

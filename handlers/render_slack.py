"""Reply -> Slack Block Kit: the one place where text becomes mrkdwn.

Every text of a Reply is escaped here (Slack's control characters &, < and > as &amp; &lt; &gt;:
https://api.slack.com/reference/surfaces/formatting#escaping), so model output, log lines, alert fields and
echoed input never become a <!channel> ping, a mention or a disguised link, whatever surface built the Reply.
Only the mentions and links the Reply lists as trusted are put back as markup. Respects Block Kit limits so a
long reply never makes Slack reject the post.
"""

from __future__ import annotations

from typing import Any

from handlers.reply import FileOut, Reply
from skills.markdown import one_line, plain_code
from skills.text import shorten

_TEXT_MAX = 2900  # section text limit is 3000 chars
_FIELD_MAX = 1900  # a field's text limit is 2000 chars
_MAX_FIELDS = 10
_MAX_BLOCKS = 50
_MAX_BUTTONS = 25  # ours: leaves room for content under the 50-block cap
_VALUE_MAX = 2000  # a button's value: https://api.slack.com/reference/block-kit/block-elements#button


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _mrkdwn(text: str) -> dict[str, Any]:
    # verbatim: Slack would otherwise turn a bare URL in outside text (an alert summary, a log line) into a link
    # and link-ify channel names; our own <url|label> markup is still processed ("When set to true, Slack will
    # continue to process all markdown formatting and manual parsing strings":
    # https://docs.slack.dev/reference/block-kit/composition-objects/text-object).
    return {"type": "mrkdwn", "text": text, "verbatim": True}


# Bidirectional controls make text display in another order than it reads (a "Trojan Source" trick: an alert
# name "ok \u202egnp.exe" shows as "ok exe.png"): embeddings and overrides U+202A-U+202E, isolates
# U+2066-U+2069, the marks U+200E/U+200F and U+061C (Unicode Standard Annex #9, "Explicit Directional
# Formatting Characters"). Nothing we post needs them; they are dropped.
_BIDI = str.maketrans(dict.fromkeys([*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]))


def strip_bidi(text: str) -> str:
    return text.translate(_BIDI)


def file_for_slack(f: FileOut) -> FileOut:
    """A file for the thread without bidi controls: its name, its title, and its content when that is UTF-8
    text (a log digest or a postmortem draft carries log lines and alert fields); binary content (a chart)
    is left as it is."""
    try:
        content = strip_bidi(f.content.decode("utf-8")).encode()
    except UnicodeDecodeError:
        content = f.content
    return FileOut(filename=strip_bidi(f.filename), title=strip_bidi(f.title), content=content)


def _in_code_block(text: str) -> str:
    """Text for inside a ``` block: three backticks in it (a log line, an alert name) would close the block and
    show the rest as markup; a zero-width space between them keeps them in (Slack has no escape inside code)."""
    return text.replace("```", "`\u200b`\u200b`")


def escape(text: str) -> str:
    """Slack's three control characters as entities: the text shows as typed and is never markup; bidi
    controls dropped."""
    return strip_bidi(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_MARKS = frozenset("*_~`")


def inert(text: str, limit: int) -> str:
    """Outside text (a policy name, a service label, a note) for one line of mrkdwn: on one line, so a line break
    cannot add a row, and inside a code span when it holds Slack's emphasis or code marks (* _ ~ `), which mrkdwn
    cannot escape: Slack formats nothing inside a code span (`plain_code` turns backticks into ')."""
    line = shorten(one_line(text), limit) or "—"
    return plain_code(line) if _MARKS & set(line) else line


def inert_bold(text: str, limit: int) -> str:
    """`inert`, bold when it is plain text (a code span is marked enough, and bold around it is more markup)."""
    shown = inert(text, limit)
    return shown if shown.startswith("`") else f"*{shown}*"


class _Safe:
    """Escapes a Reply's text, then restores the markup its trusted fields list (and nothing else)."""

    def __init__(self, reply: Reply) -> None:
        self.restore: list[tuple[str, str]] = [(f"&lt;@{u}&gt;", f"<@{u}>") for u in reply.trusted_mentions()]
        self.restore += [
            (f"&lt;{escape(url)}|{escape(label)}&gt;", f"<{escape(url)}|{label}>")
            for url, label in reply.trusted_links()
        ]

    def __call__(self, text: str, limit: int) -> str:
        out = escape(text)
        for esc, markup in self.restore:
            out = out.replace(esc, markup)
        # Clip after escaping (entities count towards Slack's limits), never inside an entity or markup.
        if len(out) <= limit:
            return out
        cut = out[: limit - 1]
        amp, lt = cut.rfind("&"), cut.rfind("<")
        if amp > cut.rfind(";"):
            cut = cut[:amp]
        if lt > cut.rfind(">"):
            cut = cut[:lt]
        return cut + "…"


def to_blocks(reply: Reply) -> tuple[str, list[dict[str, Any]]]:
    """Return (fallback text, blocks)."""
    safe = _Safe(reply)
    blocks: list[dict[str, Any]] = [{"type": "section", "text": _mrkdwn(safe(f"*{reply.title}*", _TEXT_MAX))}]
    for s in reply.sections:
        if s.heading:
            blocks.append({"type": "section", "text": _mrkdwn(safe(f"*{s.heading}*", _TEXT_MAX))})
        if s.text:
            blocks.append({"type": "section", "text": _mrkdwn(safe(s.text, _TEXT_MAX))})
        for i in range(0, len(s.fields), _MAX_FIELDS):
            chunk = s.fields[i : i + _MAX_FIELDS]
            fields = [_mrkdwn(safe(f"*{k}*\n{v}", _FIELD_MAX)) for k, v in chunk]
            blocks.append({"type": "section", "fields": fields})
        if s.code:
            blocks.append(
                {"type": "section", "text": _mrkdwn("```" + safe(_in_code_block(s.code), _TEXT_MAX - 6) + "```")}
            )
    actions, dropped = _action_blocks(reply)
    tail: list[dict[str, Any]] = []
    if dropped:
        tail.append({"type": "context", "elements": [_mrkdwn(f"({dropped} button(s) left out: Slack's limits)")]})
    if reply.context:
        tail.append({"type": "context", "elements": [_mrkdwn(safe(reply.context, _TEXT_MAX))]})
    room = _MAX_BLOCKS - len(actions) - len(tail)
    if len(blocks) > room:
        # Cut the content, never the buttons: a plan without its Confirm button cannot be confirmed.
        blocks = [*blocks[: room - 1], {"type": "context", "elements": [_mrkdwn("(reply cut: too long)")]}]
    blocks = [*blocks, *actions, *tail]
    return safe(reply.title, 3000), blocks


def _action_blocks(reply: Reply) -> tuple[list[dict[str, Any]], int]:
    """One actions block per button (action_ids must be unique within a block), and how many were left out.

    A value is never clipped (clipped JSON is no JSON): a button over Slack's 2,000-character value limit
    is left out and counted (plan buttons carry a short id: handlers/button_payloads.py)."""
    out: list[dict[str, Any]] = []
    dropped = 0
    for b in reply.buttons:
        if len(b.value) > _VALUE_MAX or len(out) >= _MAX_BUTTONS:
            dropped += 1
            continue
        el: dict[str, Any] = {
            "type": "button",
            "text": {"type": "plain_text", "text": _clip(strip_bidi(b.label), 75)},
            "action_id": b.action_id,
            "value": b.value,
        }
        if b.style:
            el["style"] = b.style
        out.append({"type": "actions", "elements": [el]})
    return out, dropped

"""Reply -> plain text for the console (and for message fallbacks)."""

from __future__ import annotations

import re
from collections.abc import Callable

from handlers.reply import Reply

_LINK = re.compile(r"<([^|>]+)\|([^>]+)>")
_EMOJI = re.compile(r":([a-z_]+):")
_LEADING_EMOJI = re.compile(r"^:([a-z_]+): ?")
# Slack renders these shortcodes; a terminal shows the same meaning as a short symbol (unknown ones vanish).
_SYMBOLS = {
    "warning": "!",
    "x": "✗",
    "white_check_mark": "✓",
    "red_circle": "●",
    "large_yellow_circle": "●",
    "large_green_circle": "●",
    "large_orange_circle": "●",
    "white_circle": "○",
    "zzz": "z",
    "hourglass": "…",
    "hourglass_flowing_sand": "…",
    "rotating_light": "!!",
    "no_entry": "✗",
    "no_entry_sign": "✗",
    "checkered_flag": "✓",
    "skull": "✗",
}


def _symbol(m: re.Match[str]) -> str:
    return _SYMBOLS.get(m.group(1), "")


def _plain(s: str) -> str:
    s = _LINK.sub(r"\2 (\1)", s)
    # A leading shortcode with no symbol must not leave a leading space behind.
    s = _LEADING_EMOJI.sub(lambda m: f"{_SYMBOLS[m.group(1)]} " if m.group(1) in _SYMBOLS else "", s)
    return _EMOJI.sub(_symbol, s)


def to_text(reply: Reply, markup: Callable[[str], str] | None = None) -> str:
    """`markup`: what a surface does to each line of prose (the console strips Slack's mrkdwn); a code section is
    never given to it: log lines and commands are shown as they are (`__init__.py` stays `__init__.py`)."""

    def plain(s: str) -> str:
        s = _plain(s)
        return "\n".join(markup(line) for line in s.split("\n")) if markup else s

    out = [plain(reply.title)]
    for s in reply.sections:
        if s.heading:
            out.append("")
            out.append(f"== {plain(s.heading)}")
        if s.text:
            out.append(plain(s.text))
        width = max((len(k) for k, _ in s.fields), default=0)
        for k, v in s.fields:
            out.append(f"  {k.ljust(width)}  {plain(v)}")
        if s.code:
            out.extend("    " + line for line in s.code.splitlines())
    for b in reply.buttons:
        out.append(f"  [{b.label}]  ({b.action_id} {b.value})")
    for f in reply.files:
        out.append(f"  (file: {f.filename}, {len(f.content)} bytes)")
    if reply.context:
        out.append(plain(reply.context))
    return "\n".join(out)

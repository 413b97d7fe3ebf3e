"""Reply -> plain text for the console (and for message fallbacks)."""

from __future__ import annotations

import re

from .reply import Reply

_LINK = re.compile(r"<([^|>]+)\|([^>]+)>")


def _plain(s: str) -> str:
    return _LINK.sub(r"\2 (\1)", s)


def to_text(reply: Reply) -> str:
    out = [_plain(reply.title)]
    for s in reply.sections:
        if s.heading:
            out.append("")
            out.append(f"== {_plain(s.heading)}")
        if s.text:
            out.append(_plain(s.text))
        width = max((len(k) for k, _ in s.fields), default=0)
        for k, v in s.fields:
            out.append(f"  {k.ljust(width)}  {_plain(v)}")
        if s.code:
            out.extend("    " + line for line in s.code.splitlines())
    for b in reply.buttons:
        out.append(f"  [{b.label}]  ({b.action_id} {b.value})")
    for f in reply.files:
        out.append(f"  (file: {f.filename}, {len(f.content)} bytes)")
    if reply.context:
        out.append(_plain(reply.context))
    return "\n".join(out)

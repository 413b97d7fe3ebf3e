"""Group log lines into templates ("PacketResponder <*> for block <*> terminating").

A small online grouper in the spirit of Drain: mask obvious variables (numbers, IPs, hex ids, block ids),
split into tokens, then look a line up by (token count, first constant token) and merge it into the most
similar template there if enough positions agree. Measured against drain3 on Loghub by bench/log_grouping.py.
"""

from __future__ import annotations

import re

WILDCARD = "<*>"

# One shared set of variable masks for every system (no per-system tuning).
_MASKS = [
    re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b"),  # IPv4[:port]
    re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),  # UUID
    re.compile(r"\bblk_-?\d+\b"),  # HDFS block ids
    re.compile(r"\b0x[0-9a-fA-F]+\b"),
    re.compile(r"(?<![\w.])\d+(?:[-/:.]\d+)+(?![\w])"),  # dates, times, versions: 11-20, 14:00:01, 2.62
    re.compile(r"(?<![\w.-])-?\d+(?![\w.])"),  # numbers standing alone (not 31B, not gemma-4)
]
_MASK = re.compile("|".join(f"(?:{rx.pattern})" for rx in _MASKS))  # one pass instead of five
_SPLIT = re.compile(r"\s+")
# A word-only difference ("shutdown" vs "startup") is a different event unless the line has this many
# agreeing tokens around it and few such differences (then it is a variable such as a user name).
MIN_ANCHORS = 4


def mask(text: str) -> str:
    return _MASK.sub(WILDCARD, text)


def _const(tok: str) -> str:
    return "" if WILDCARD in tok or any(c.isdigit() for c in tok) else tok


class TemplateMiner:
    """Online grouping: `add(line)` returns a group id; `template(gid)` the group's current template."""

    def __init__(self, similarity: float = 0.5) -> None:
        # (token count, first, second) -> candidate groups
        self.similarity = similarity
        self._templates: list[list[str]] = []
        self._index: dict[tuple[int, str, str], list[int]] = {}
        self._exact: dict[str, int] = {}
        self._tok_cache: dict[str, str] = {}

    def _tokens(self, text: str) -> list[str]:
        """Whitespace tokens with variables masked; per-token cache, since most tokens repeat."""
        cache = self._tok_cache
        out = []
        for tok in text.split():
            m = cache.get(tok)
            if m is None:
                m = _MASK.sub(WILDCARD, tok)
                if len(cache) < 200_000:
                    cache[tok] = m
            out.append(m)
        return out

    def add(self, text: str) -> int:
        tokens = self._tokens(text)
        masked = " ".join(tokens)
        hit = self._exact.get(masked)
        if hit is not None:
            return hit
        # Like Drain's prefix tree: length and the first two constant-looking tokens must agree.
        key = (len(tokens), _const(tokens[0]) if tokens else "", _const(tokens[1]) if len(tokens) > 1 else "")
        bucket = self._index.setdefault(key, [])
        best, best_score = -1, -1.0
        n = max(1, len(tokens))
        for gid in bucket:
            tpl = self._templates[gid]
            same = words = 0
            for a, b in zip(tpl, tokens, strict=True):
                if a == b or a == WILDCARD:
                    same += 1
                elif _const(a) and _const(b):
                    words += 1
            if words and (n - words < MIN_ANCHORS or words > max(1, n // 4)):
                continue
            score = same / n
            if score > best_score:
                best, best_score = gid, score
        if best >= 0 and best_score >= self.similarity:
            tpl = self._templates[best]
            self._templates[best] = [a if a == b else WILDCARD for a, b in zip(tpl, tokens, strict=True)]
            gid = best
        else:
            gid = len(self._templates)
            self._templates.append(tokens)
            bucket.append(gid)
        self._exact[masked] = gid
        return gid

    def template(self, gid: int) -> str:
        return " ".join(self._templates[gid])

    def __len__(self) -> int:
        return len(self._templates)

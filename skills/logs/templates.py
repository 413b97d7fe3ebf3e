"""Group log lines into templates ("PacketResponder <*> for block <*> terminating").

A small online grouper in the spirit of Drain: mask variables, split into tokens, then look a line up by
(token count, first constant tokens) and merge it into the most similar template there if enough positions
agree. Measured against drain3 on Loghub by bench/log_grouping.py, on the 8 systems in the repository and on
the other Loghub systems (kept out of it, so that they measure how well one configuration generalises).

Variables are not always whitespace-separated tokens, so masking looks inside tokens for the usual shapes:
`host:port`, `key=value`, paths, dotted names (hosts, packages, loggers), ids mixing letters and digits
(`node-12`, `wl0`, `jA9J1dQ7016560`), numbers with their unit (`2048 MB`, `<1 sec`) and bracketed numeric
annotations (`(1.98 KB)`). A word value (`user=root`, `for root`) is a variable once VARIANTS groups differ only
there; fewer values are different events (`VM Started` / `VM Stopped`). One configuration for every system;
no per-system rules.
"""

from __future__ import annotations

import re

WILDCARD = "<*>"

# Whole-token shapes that are always variables (checked on the token stripped of edge punctuation).
_VAR_TOKEN = re.compile(
    r"""(?x)
      (?:[\w-]+\.)+[\w-]+:\d+                      # host:port, host.name:port
    | \w[\w-]*(?:\.[\w-]+)+\.[a-z]+                # host names, dotted names ending lower-case (not Java classes)
    | (?:[\w.~-]*/){2,}[\w.~-]*                    # paths: /var/lib/x, a/b/c (two slashes or more)
    """
)
_EDGE = "()[]{}<>,;:'\"."
# Day and month names are parts of dates inside the text (variables), not words of the event.
_DATE_WORDS = frozenset("Mon Tue Wed Thu Fri Sat Sun Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split())
# Masks applied inside a token (one combined pass, first alternative wins at each position).
_MASKS = [
    r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b",  # IPv4[:port]
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",  # UUID
    r"\b0x[0-9a-fA-F]+\b",
    r"(?<![\w.])\d+(?:[-/:.]\d+)+(?![\w])",  # dates, times, versions: 11-20, 14:00:01, 2.62
    # words holding a digit: numbers, ids (blk_-1, node-12), but not names ending in one digit (eth1, SOCKS5)
    r"(?<![\w-])(?![A-Za-z]+\d(?![\w-]))[\w-]*\d[\w-]*",
]
_MASK = re.compile("|".join(f"(?:{rx})" for rx in _MASKS))
# A number followed by its unit is one variable ("2048 MB" -> "<*>"), as is a comparison ("<1 sec").
_UNITS = {"b", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "bytes", "ms", "us", "s", "sec", "secs", "seconds", "min"}
# A word-only difference ("shutdown" vs "startup") is a different event unless this many groups differ
# only there (then it is a variable such as a user name) and the line has this many other tokens.
VARIANTS = 5
MIN_ANCHORS = 3


def mask_token(tok: str) -> str:
    core = tok.strip(_EDGE)
    if core in _DATE_WORDS or (
        ("." in core or "/" in core or ":" in core) and _VAR_TOKEN.fullmatch(core)  # cheap test first
    ):
        i = tok.find(core)
        return tok[:i] + WILDCARD + tok[i + len(core) :]
    return _MASK.sub(WILDCARD, tok)


def mask(text: str) -> str:
    return " ".join(mask_token(t) for t in text.split())


def _const(tok: str) -> str:
    return "" if WILDCARD in tok else tok


def _is_var(tok: str) -> bool:
    return WILDCARD in tok and tok.strip(_VAR_EDGE) == "*"


_VAR_EDGE = _EDGE + "<>="


class TemplateMiner:
    """Online grouping: `add(line)` returns a group id; `group(gid)` the id it ended up in (groups that turn
    out to be variants of one event are merged later); `template(gid)` that group's template."""

    def __init__(self, similarity: float = 0.5) -> None:
        self.similarity = similarity
        self._templates: list[list[str]] = []
        self._parent: list[int] = []
        self._index: dict[tuple[int, str, str], list[int]] = {}
        self._exact: dict[str, int] = {}
        self._tok_cache: dict[str, tuple[str, bool, bool]] = {}

    def _tokens(self, text: str) -> list[str]:
        """Tokens with variables masked; per-token cache, since most tokens repeat."""
        cache = self._tok_cache
        out: list[str] = []
        prev_var = False
        for tok in text.split():
            hit = cache.get(tok)
            if hit is None:
                m = mask_token(tok)
                var = _is_var(m)
                # "2048 MB", "2034 bytes (1.98 KB)", "<*> <*>", "<*> ()": one variable with what follows it
                hit = (m, var, var or m.lower().strip(_EDGE) in _UNITS or not m.strip(_EDGE))
                if len(cache) < 200_000:
                    cache[tok] = hit
            if prev_var and hit[2]:
                continue
            out.append(hit[0])
            prev_var = hit[1]
        return out

    def group(self, gid: int) -> int:
        while self._parent[gid] != gid:
            self._parent[gid] = gid = self._parent[self._parent[gid]]
        return gid

    def add(self, text: str) -> int:
        tokens = self._tokens(text)
        masked = " ".join(tokens)
        hit = self._exact.get(masked)
        if hit is not None:
            return self.group(hit)
        # Like Drain's prefix tree: length and the first two constant-looking tokens must agree.
        key = (len(tokens), _const(tokens[0]) if tokens else "", _const(tokens[1]) if len(tokens) > 1 else "")
        bucket = self._index.setdefault(key, [])
        best, best_score = -1, -1.0
        n = max(1, len(tokens))
        for gid in bucket:
            tpl = self._templates[gid]
            same = 0
            for a, b in zip(tpl, tokens, strict=True):
                if a == b or a == WILDCARD:
                    same += 1
                elif _const(a) and _const(b):
                    break  # a word differs: another event, unless many groups differ there (see _note_variant)
            else:
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
            self._parent.append(gid)
            bucket.append(gid)
            gid = self._note_variant(key, gid)
        self._exact[masked] = gid
        return gid

    def _note_variant(self, key: tuple[int, str, str], gid: int) -> int:
        """A word that takes many values at one position of otherwise equal lines is a variable (a user name);
        a few values are different events (Started / Stopped). Merge once VARIANTS groups differ there."""
        tpl = self._templates[gid]
        if len(tpl) - 1 < MIN_ANCHORS:
            return gid
        at: dict[int, list[int]] = {}
        for other in self._index[key]:
            if other == gid:
                continue
            pos = -1
            for i, (a, b) in enumerate(zip(tpl, self._templates[other], strict=True)):
                if a == b or a == WILDCARD or b == WILDCARD:
                    continue
                if pos >= 0 or not (_const(a) and _const(b)):
                    break
                pos = i
            else:
                if pos >= 0:
                    at.setdefault(pos, []).append(other)
        for group in at.values():
            if len(group) + 1 >= VARIANTS:
                for other in group:
                    self._parent[other] = gid
                    self._templates[gid] = [
                        x if x == y else WILDCARD
                        for x, y in zip(self._templates[gid], self._templates[other], strict=True)
                    ]
                    self._index[key].remove(other)
                break
        return gid

    def template(self, gid: int) -> str:
        return " ".join(self._templates[self.group(gid)])

    def __len__(self) -> int:
        return sum(1 for i, p in enumerate(self._parent) if i == p)

"""A strict parser and evaluator for the part of the Cloud Logging query language the bot uses.

Grammar (https://cloud.google.com/logging/docs/view/logging-query-language): comparisons `FIELD OP VALUE`
(OP one of = != > < >= <= :), joined by AND / OR (upper case), negated by NOT or a leading `-`, grouped in
parentheses; adjacent terms (a newline between them) are an implicit AND. What the real API would refuse
(an unbalanced parenthesis, an unterminated string, an operator with no value, a timestamp that does not
parse, an unknown severity) raises FilterError, which the stand-in answers with 400 INVALID_ARGUMENT.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from skills.timestamps import parse_timestamp

SEVERITIES = ["DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY"]
_RANK = {s: i for i, s in enumerate(SEVERITIES)}
_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<open>\()|(?P<close>\))|(?P<op>>=|<=|!=|=|>|<|:)'
    r"|(?P<word>[A-Za-z0-9_.\-+/%*]+)|(?P<bad>\S))"
)

Predicate = Callable[[dict[str, Any]], bool]


class FilterError(ValueError):
    pass


@dataclass
class _Tok:
    kind: str
    text: str


def _tokens(flt: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    while pos < len(flt):
        m = _TOKEN.match(flt, pos)
        if m is None or m.end() == pos:
            break
        pos = m.end()
        kind = m.lastgroup or ""
        if kind == "bad":
            if m.group("bad") == '"':
                raise FilterError("unterminated string in the filter")
            raise FilterError(f"unexpected character {m.group('bad')!r} in the filter")
        out.append(_Tok(kind, m.group(kind)))
    return out


def parse_ts(value: str) -> datetime:
    try:
        return parse_timestamp(value)
    except ValueError:
        raise FilterError(f"invalid timestamp {value!r}") from None


def _field(entry: dict[str, Any], path: str) -> Any:
    cur: Any = entry
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


class _Parser:
    def __init__(self, flt: str) -> None:
        self.toks = _tokens(flt)
        self.i = 0

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise FilterError("the filter ends where a value was expected")
        self.i += 1
        return tok

    def parse(self) -> Predicate:
        if not self.toks:
            return lambda e: True
        pred = self.expr()
        if self.peek() is not None:
            raise FilterError(f"unexpected {self.take().text!r} in the filter")
        return pred

    def expr(self) -> Predicate:  # OR binds loosest
        terms = [self.conj()]
        while (t := self.peek()) is not None and t.kind == "word" and t.text == "OR":
            self.take()
            terms.append(self.conj())
        return terms[0] if len(terms) == 1 else _any(terms)

    def conj(self) -> Predicate:  # explicit AND or juxtaposition
        terms = [self.unary()]
        while (t := self.peek()) is not None and t.kind != "close" and not (t.kind == "word" and t.text == "OR"):
            if t.kind == "word" and t.text == "AND":
                self.take()
            terms.append(self.unary())
        return terms[0] if len(terms) == 1 else _all(terms)

    def unary(self) -> Predicate:
        t = self.take()
        if (t.kind == "word" and t.text == "NOT") or (t.kind == "word" and t.text == "-"):
            inner = self.unary()
            return lambda e: not inner(e)
        if t.kind == "open":
            inner = self.expr()
            if self.take().kind != "close":
                raise FilterError("unbalanced parenthesis in the filter")
            return inner
        if t.kind == "close":
            raise FilterError("unbalanced parenthesis in the filter")
        if t.kind in ("word", "str") and (nxt := self.peek()) is not None and nxt.kind == "op":
            if t.kind != "word":
                raise FilterError(f"a field name was expected, not {t.text!r}")
            op = self.take().text
            value = self.take()
            if value.kind not in ("word", "str"):
                raise FilterError(f"a value was expected after {t.text}{op}")
            return _compare(t.text, op, value.text[1:-1] if value.kind == "str" else value.text)
        if t.kind in ("word", "str"):  # a bare term searches all fields
            needle = t.text.strip('"')
            return lambda e: needle in str(e)
        raise FilterError(f"unexpected {t.text!r} in the filter")


def _any(terms: list[Predicate]) -> Predicate:
    return lambda e: any(p(e) for p in terms)


def _all(terms: list[Predicate]) -> Predicate:
    return lambda e: all(p(e) for p in terms)


def _compare(path: str, op: str, raw: str) -> Predicate:
    conv: Callable[[Any], Any]
    if path == "timestamp":
        bound: Any = parse_ts(raw)
        conv = lambda v: parse_ts(v) if isinstance(v, str) else None  # noqa: E731
    elif path == "severity":
        if raw.upper() not in _RANK:
            raise FilterError(f"unknown severity {raw!r}")
        bound = _RANK[raw.upper()]
        conv = lambda v: _RANK.get(str(v or "DEFAULT").upper(), 0)  # noqa: E731
    elif re.fullmatch(r"-?\d+(\.\d+)?", raw):
        bound = float(raw)
        conv = lambda v: float(v) if isinstance(v, int | float) or (isinstance(v, str) and v.isdigit()) else None  # noqa: E731
    else:
        bound = raw
        conv = lambda v: None if v is None else str(v)  # noqa: E731

    def pred(e: dict[str, Any]) -> bool:
        v = conv(_field(e, path))
        if v is None:
            return op == "!="
        if op == ":":
            return str(bound) in str(v)
        return {
            "=": v == bound,
            "!=": v != bound,
            ">": v > bound,
            "<": v < bound,
            ">=": v >= bound,
            "<=": v <= bound,
        }[op]

    return pred


def compile_filter(flt: str) -> Predicate:
    """A predicate over LogEntry JSON for `flt`, or FilterError where the real API answers 400."""
    return _Parser(flt).parse()

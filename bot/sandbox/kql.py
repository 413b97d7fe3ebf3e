"""A strict evaluator of the small part of KQL (Kusto Query Language) the ACA logs adapter sends, for the Log
Analytics stand-in (bot/sandbox/log_analytics_api.py).

Accepted: `Table` then `| where`, `| project`, `| order by` / `| sort by` (asc/desc), `| take` / `| limit`; a where
condition is comparisons joined by `and`: `col == lit`, `col >= lit`, `col <= lit`, `col between (lit .. lit)`;
literals are strings ('...' or "..." with backslash escapes, KQL's string literal rules), `datetime(ISO 8601)` and
whole numbers. Anything else is refused as Log Analytics refuses a query, 400 BadArgumentError with an inner
SyntaxError or SemanticError (shapes as Log Analytics answered in MicrosoftDocs/feedback#1792,
Azure/azure-cli-extensions#3002, CDCgov/prime-reportstream#11773, MicrosoftDocs/azure-docs#18012):
- an unknown table or column: SemanticError SEM0100 "'<operator>' operator: Failed to resolve table or column
  expression named 'X'" / "... column or scalar expression named 'X'" (those threads' wording);
- a value compared with a column of another type: SemanticError (the sandbox's words, Kusto's sense);
- what does not parse, or an operator this evaluator does not implement (summarize, extend, union, contains, or,
  ...): SyntaxError. Real Log Analytics would run the latter; the sandbox refuses it so that an adapter change that
  needs more KQL fails here first instead of passing against a lax stand-in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

_TOKEN = re.compile(
    r"""\s*(?:
    (?P<dt>datetime\(\s*(?P<dtv>[0-9T:.\-+Z ]+?)\s*\))
    |(?P<str>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")
    |(?P<num>\d+)(?![A-Za-z_])
    |(?P<id>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<op>==|>=|<=|\.\.|[|(),])
    )""",
    re.VERBOSE,
)


class KqlError(Exception):
    """Log Analytics' refusal: `kind` SyntaxError or SemanticError, with the innermost code and message."""

    def __init__(self, kind: str, code: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.code, self.message = kind, code, message

    def body(self) -> dict[str, Any]:
        outer = "A semantic error occurred." if self.kind == "SemanticError" else "Syntax Error"
        return {
            "error": {
                "message": "The request had some invalid properties",
                "code": "BadArgumentError",
                "innererror": {
                    "code": self.kind,
                    "message": outer,
                    "innererror": {"code": self.code, "message": self.message},
                },
            }
        }


@dataclass
class Tok:
    kind: str  # dt, str, num, id, op
    value: Any
    text: str


def _unescape(lit: str) -> str:
    body = lit[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def tokens(query: str) -> list[Tok]:
    out: list[Tok] = []
    pos = 0
    query = query.rstrip()
    while pos < len(query):
        m = _TOKEN.match(query, pos)
        if m is None or m.end() == pos:
            rest = query[pos:].strip()
            raise KqlError("SyntaxError", "SYN0002", f"Query could not be parsed at '{rest[:20]}'")
        pos = m.end()
        if m.group("dt"):
            try:
                at = datetime.fromisoformat(m.group("dtv").strip().replace("Z", "+00:00"))
            except ValueError:
                raise KqlError(
                    "SyntaxError", "SYN0002", f"Failed to parse datetime literal: '{m.group('dt')}'"
                ) from None
            out.append(Tok("dt", at if at.tzinfo else at.replace(tzinfo=UTC), m.group("dt")))
        elif m.group("str"):
            out.append(Tok("str", _unescape(m.group("str")), m.group("str")))
        elif m.group("num"):
            out.append(Tok("num", int(m.group("num")), m.group("num")))
        elif m.group("id"):
            out.append(Tok("id", m.group("id"), m.group("id")))
        else:
            out.append(Tok("op", m.group("op"), m.group("op")))
    return out


class _Reader:
    def __init__(self, toks: list[Tok]) -> None:
        self.toks, self.i = toks, 0

    def peek(self) -> Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def next(self, what: str) -> Tok:
        t = self.peek()
        if t is None:
            raise KqlError("SyntaxError", "SYN0002", f"Query could not be parsed: {what} expected at the end")
        self.i += 1
        return t

    def expect(self, kind: str, value: Any = None) -> Tok:
        t = self.next(repr(value) if value is not None else kind)
        if t.kind != kind or (value is not None and t.value != value):
            raise KqlError("SyntaxError", "SYN0002", f"Query could not be parsed at '{t.text}'")
        return t


# column type per value: what Log Analytics calls them in a result's columns
def kql_type(value: Any) -> str:
    if isinstance(value, datetime):
        return "datetime"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "long"
    if isinstance(value, float):
        return "real"
    return "string"


def evaluate(query: str, tables: dict[str, tuple[list[tuple[str, str]], list[dict[str, Any]]]]) -> dict[str, Any]:
    """Run `query` over `tables` (name -> ([(column, type)], rows as dicts)); the answer's table, as the query API's
    PrimaryResult: {"name", "columns": [{"name", "type"}], "rows"}, row values as Python values."""
    r = _Reader(tokens(query))
    name = r.expect("id").value
    if name not in tables:
        raise KqlError(
            "SemanticError", "SEM0100", f"'table' operator: Failed to resolve table or column expression named '{name}'"
        )
    columns, rows = tables[name]
    schema = dict(columns)
    order = [c for c, _ in columns]
    rows = list(rows)
    while r.peek() is not None:
        r.expect("op", "|")
        op = r.next("an operator")
        word = op.value if op.kind == "id" else op.text
        if word == "where":
            conds = [_comparison(r, schema)]
            while r.peek() is not None and r.peek().kind == "id" and r.peek().value == "and":  # type: ignore[union-attr]
                r.next("and")
                conds.append(_comparison(r, schema))
            rows = [row for row in rows if all(c(row) for c in conds)]
        elif word == "project":
            picked = [_column(r, schema, "project")]
            while r.peek() is not None and r.peek().text == ",":  # type: ignore[union-attr]
                r.next(",")
                picked.append(_column(r, schema, "project"))
            schema = {c: schema[c] for c in picked}
            order = picked
            rows = [{c: row.get(c) for c in picked} for row in rows]
        elif word in ("order", "sort"):
            r.expect("id", "by")
            col = _column(r, schema, word)
            desc = True  # KQL's default order is descending
            t = r.peek()
            if t is not None and t.kind == "id" and t.value in ("asc", "desc"):
                desc = r.next("asc/desc").value == "desc"
            present = [x for x in rows if x.get(col) is not None]
            rows = sorted(present, key=lambda x: x[col], reverse=desc) + [x for x in rows if x.get(col) is None]
        elif word in ("take", "limit"):
            rows = rows[: r.expect("num").value]
        else:
            raise KqlError(
                "SyntaxError",
                "SYN0002",
                f"Query could not be parsed at '{op.text}' (the sandbox evaluates only "
                "where, project, order by, sort by, take and limit)",
            )
    return {
        "name": "PrimaryResult",
        "columns": [{"name": c, "type": schema[c]} for c in order],
        "rows": [[row.get(c) for c in order] for row in rows],
    }


def _column(r: _Reader, schema: dict[str, str], operator: str) -> str:
    t = r.expect("id")
    if t.value not in schema:
        raise KqlError(
            "SemanticError",
            "SEM0100",
            f"'{operator}' operator: Failed to resolve column or scalar expression named '{t.value}'",
        )
    return str(t.value)


def _literal(r: _Reader, column: str, ctype: str) -> Any:
    t = r.next("a value")
    if t.kind not in ("dt", "str", "num"):
        raise KqlError("SyntaxError", "SYN0002", f"Query could not be parsed at '{t.text}'")
    vtype = {"dt": "datetime", "str": "string", "num": "long"}[t.kind]
    if vtype != ctype:
        raise KqlError(
            "SemanticError",
            "SEM0025",
            f"'where' operator: Cannot compare values of types {ctype} and {vtype} (column '{column}').",
        )
    return t.value


def _comparison(r: _Reader, schema: dict[str, str]) -> Any:
    col = _column(r, schema, "where")
    ctype = schema[col]
    op = r.next("a comparison")
    if op.kind == "op" and op.value in ("==", ">=", "<="):
        value = _literal(r, col, ctype)
        if op.value == "==":
            return lambda row: row.get(col) == value
        if op.value == ">=":
            return lambda row: row.get(col) is not None and row[col] >= value
        return lambda row: row.get(col) is not None and row[col] <= value
    if op.kind == "id" and op.value == "between":
        r.expect("op", "(")
        low = _literal(r, col, ctype)
        r.expect("op", "..")
        high = _literal(r, col, ctype)
        r.expect("op", ")")
        return lambda row: row.get(col) is not None and low <= row[col] <= high
    raise KqlError(
        "SyntaxError",
        "SYN0002",
        f"Query could not be parsed at '{op.text}' (the sandbox evaluates ==, >=, <=, between)",
    )

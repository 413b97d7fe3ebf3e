"""The mutants bench/mutation.py runs: plausible one-line bugs, made from a module's syntax tree.

Each operator is one kind of slip a reviewer could miss:
  compare     `==` <-> `!=`, `<` <-> `<=`, `>` <-> `>=`, `in` <-> `not in`, `is` <-> `is not`
  boolop      `and` <-> `or`
  not         `not x` -> `x`
  const       True <-> False, an int n -> n + 1, a float x -> 2x, a short string -> "" ("" -> "XX")
  arith       `+` <-> `-`, `*` <-> `/`, `//` -> `/` (also in `+=` and the like)
  return      `return x` -> `return None`
  drop-call   a call made for its effect (`await self._ack(id)`, `log_line(...)`) is not made
  unwrap      a call nested in another call's arguments is skipped: `unquote(unquote(s))` -> `unquote(s)`
  drop-entry  one entry of a table is gone: an item of a list, set, dict or constant tuple, or one literal
              argument of a module-level call such as `rx("a", "b")`
mutmut (which this replaced) has no operator that drops a call or a table entry, and mutates nothing outside
functions; here module- and class-level tables are mutated like function bodies.

Left alone: docstrings, imports, annotations, decorators, `if TYPE_CHECKING:` blocks, `__all__`, calls to the
logger (the wording of our own log lines is checked where it matters, by tests that read them), strings longer
than SHORT_STRING (prose, not keys or states), the parts of f-strings, and any line marked `# pragma: no mutate`.

A mutant is a text edit of the module: the span of one node is replaced, so the rest of the file (its comments,
its layout) is untouched and the edit reads as a one-line diff. Its key names where it is and what it does, not a
line number, so the list of known-equivalent mutants survives edits elsewhere in the file.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace

SHORT_STRING = 24

_COMPARE_SWAP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_ARITH_SWAP: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
}
_LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical"}
_LOGGER_NAMES = {"log", "logger", "_log", "_logger", "logging"}


@dataclass(frozen=True)
class Mutant:
    path: str  # the module, relative to the checkout
    qualname: str  # the function or class it sits in; "<module>" for module-level code
    line: int
    op: str
    before: str  # the source text replaced
    after: str  # what replaces it
    start: int  # character offsets of the replaced span in the module's source
    end: int
    nth: int = 0  # several identical edits in one function: the nth of them

    @property
    def key(self) -> str:
        nth = f" #{self.nth}" if self.nth else ""
        return f"{self.path}:{self.qualname}:{self.op}: {_one_line(self.before)} -> {_one_line(self.after)}{nth}"

    def apply(self, source: str) -> str:
        return source[: self.start] + self.after + source[self.end :]

    def diff(self) -> str:
        """The edit as a one-line diff, the way a reviewer would read it."""
        where = f"{self.path}:{self.line}"
        return f"{where}  - {_one_line(self.before)}\n{' ' * len(where)}  + {_one_line(self.after)}"


def _one_line(text: str, limit: int = 110) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class _Offsets:
    """ast positions (1-based line, UTF-8 byte column) to character offsets in the source."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for ln in self.lines:
            self.starts.append(self.starts[-1] + len(ln))

    def at(self, line: int, col: int) -> int:
        text = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        return self.starts[line - 1] + len(text.encode("utf-8")[:col].decode("utf-8", errors="replace"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.at(node.lineno, node.col_offset),  # type: ignore[attr-defined]
            self.at(node.end_lineno, node.end_col_offset),  # type: ignore[attr-defined]
        )


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _is_log_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    owner = node.func.value
    return node.func.attr in _LOG_METHODS and isinstance(owner, ast.Name) and owner.id in _LOGGER_NAMES


class _Collector(ast.NodeVisitor):
    def __init__(self, path: str, source: str) -> None:
        self.path = path
        self.source = source
        self.pos = _Offsets(source)
        self.stack: list[str] = []
        self.in_function = 0
        self.table = 0  # inside the value of a module- or class-level assignment
        self.out: list[Mutant] = []

    # --- recording -----------------------------------------------------------------------------------
    @property
    def qualname(self) -> str:
        return ".".join(self.stack) or "<module>"

    def _skip_line(self, line: int) -> bool:
        return "pragma: no mutate" in self.pos.lines[line - 1] if line - 1 < len(self.pos.lines) else False

    def _add(self, node: ast.AST, op: str, after: str, span: tuple[int, int] | None = None) -> None:
        line = node.lineno  # type: ignore[attr-defined]
        if self._skip_line(line):
            return
        start, end = span or self.pos.span(node)
        before = self.source[start:end]
        if before == after:
            return
        self.out.append(Mutant(self.path, self.qualname, line, op, before, after, start, end))

    def _replace_node(self, node: ast.AST, op: str, new: ast.AST) -> None:
        self._add(node, op, ast.unparse(new))

    # --- scopes ----------------------------------------------------------------------------------------
    def _body(self, body: list[ast.stmt]) -> None:
        for i, stmt in enumerate(body):
            if i == 0 and _is_docstring(stmt):
                continue
            self.visit(stmt)

    def visit_Module(self, node: ast.Module) -> None:
        self._body(node.body)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.stack.append(node.name)
        self.in_function += 1
        saved, self.table = self.table, 0
        for d in [*node.args.defaults, *node.args.kw_defaults]:
            if d is not None:
                self.visit(d)
        self._body(node.body)
        self.table = saved
        self.in_function -= 1
        self.stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.stack.append(node.name)
        self._body(node.body)
        self.stack.pop()

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit(node.body)

    def visit_Import(self, node: ast.Import) -> None:
        return

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        return

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
        if name == "TYPE_CHECKING":
            return
        self.generic_visit(node)

    def _assign_value(self, value: ast.expr | None) -> None:
        if value is None:
            return
        if self.in_function:
            self.visit(value)
            return
        self.table += 1
        self.visit(value)
        self.table -= 1

    def visit_Assign(self, node: ast.Assign) -> None:
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return
        for t in node.targets:  # subscripts in targets (`d[k] = v`) hold expressions worth mutating
            if isinstance(t, ast.Subscript):
                self.visit(t.slice)
        self._assign_value(node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._assign_value(node.value)  # never the annotation

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        swap = _ARITH_SWAP.get(type(node.op))
        if swap is not None and self.in_function:
            self._replace_node(node, "arith", ast.AugAssign(target=node.target, op=swap(), value=node.value))
        self.visit(node.value)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if isinstance(node.type, ast.Tuple):
            self._drop_entries(node.type, node.type.elts)
        self._body(node.body)

    # --- statements ------------------------------------------------------------------------------------
    def visit_Expr(self, node: ast.Expr) -> None:
        call = node.value.value if isinstance(node.value, ast.Await) else node.value
        if isinstance(call, ast.Call):
            if _is_log_call(call):
                return
            if self.in_function:
                self._add(node, "drop-call", "pass")
        self.visit(node.value)

    def visit_Return(self, node: ast.Return) -> None:
        v = node.value
        if v is not None and not (isinstance(v, ast.Constant) and v.value is None):
            self._add(v, "return", "None")
            self.visit(v)

    # --- expressions -----------------------------------------------------------------------------------
    def visit_Compare(self, node: ast.Compare) -> None:
        if len(node.ops) == 1 and type(node.ops[0]) in _COMPARE_SWAP:
            swapped = _COMPARE_SWAP[type(node.ops[0])]()
            self._replace_node(
                node, "compare", ast.Compare(left=node.left, ops=[swapped], comparators=node.comparators)
            )
        if len(node.ops) == 1 and isinstance(node.ops[0], ast.In | ast.NotIn):
            coll = node.comparators[0]
            if isinstance(coll, ast.Tuple | ast.List | ast.Set):
                self._drop_entries(coll, coll.elts)
                for e in coll.elts:
                    self.visit(e)
                self.visit(node.left)
                return
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        other: ast.boolop = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        self._replace_node(node, "boolop", ast.BoolOp(op=other, values=node.values))
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not):
            start, end = self.pos.span(node.operand)
            self._add(node, "not", "(" + self.source[start:end] + ")")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        swap = _ARITH_SWAP.get(type(node.op))
        if swap is not None and not _is_string_format(node):
            self._replace_node(node, "arith", ast.BinOp(left=node.left, op=swap(), right=node.right))
        self.generic_visit(node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        for v in node.values:  # the expressions inside, not the literal parts
            if isinstance(v, ast.FormattedValue):
                self.visit(v.value)

    def visit_Constant(self, node: ast.Constant) -> None:
        v = node.value
        if isinstance(v, bool):
            self._add(node, "const", repr(not v))
        elif isinstance(v, int):
            self._add(node, "const", repr(v + 1))
        elif isinstance(v, float):
            self._add(node, "const", repr(v * 2 if v else 1.0))
        elif isinstance(v, str) and len(v) <= SHORT_STRING:
            self._add(node, "const", '"XX"' if v == "" else '""')

    def visit_Call(self, node: ast.Call) -> None:
        if _is_log_call(node):
            return
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if isinstance(arg, ast.Call) and arg.args and not isinstance(arg.args[0], ast.Starred):
                start, end = self.pos.span(arg.args[0])
                self._add(arg, "unwrap", "(" + self.source[start:end] + ")")
        if self.table and not self.in_function and len(node.args) >= 2:
            if all(isinstance(a, ast.Constant | ast.JoinedStr) for a in node.args):
                self._drop_entries(node, node.args)
        self.generic_visit(node)

    def visit_List(self, node: ast.List) -> None:
        if isinstance(node.ctx, ast.Load):
            self._drop_entries(node, node.elts)
        self.generic_visit(node)

    def visit_Set(self, node: ast.Set) -> None:
        self._drop_entries(node, node.elts)
        self.generic_visit(node)

    def visit_Tuple(self, node: ast.Tuple) -> None:
        # Only a table's tuple: a tuple in code is usually a fixed shape (a return pair), where a missing item
        # is a crash, not a slip.
        if isinstance(node.ctx, ast.Load) and self.table and not self.in_function:
            self._drop_entries(node, node.elts)
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        items: list[ast.AST] = []
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:  # `**other`: not an entry of this table
                return self.generic_visit(node)
            items.append(_Pair(k, v))
        self._drop_entries(node, items)
        self.generic_visit(node)

    def _drop_entries(self, owner: ast.AST, elts: list[ast.AST] | list[ast.expr]) -> None:
        """One mutant per entry of a table of two or more: the entry and its separator removed as text."""
        if len(elts) < 2:
            return
        spans = [self.pos.span(e) for e in elts]
        for i, (e, (s, t)) in enumerate(zip(elts, spans, strict=True)):
            if i + 1 < len(spans):
                start, end = s, spans[i + 1][0]  # up to the next entry: its comma, space and comments go too
            else:
                start, end = spans[i - 1][1], t  # the last: from the end of the one before
            line = e.lineno  # type: ignore[attr-defined]
            if self._skip_line(line):
                continue
            self.out.append(
                Mutant(self.path, self.qualname, line, "drop-entry", self.source[start:end], "", start, end)
            )


class _Pair(ast.AST):
    """A dict's key and value, spanning both, as one entry."""

    def __init__(self, key: ast.expr, value: ast.expr) -> None:
        super().__init__()
        self.lineno = key.lineno
        self.col_offset = key.col_offset
        self.end_lineno = value.end_lineno
        self.end_col_offset = value.end_col_offset


def _is_string_format(node: ast.BinOp) -> bool:
    return isinstance(node.op, ast.Mod) or (
        isinstance(node.left, ast.Constant | ast.JoinedStr) and isinstance(getattr(node.left, "value", ""), str)
    )


def mutants_of(path: str, source: str, only: tuple[str, ...] = ()) -> list[Mutant]:
    """Every mutant of one module that still compiles; `only` keeps those inside the named functions or classes
    ("Class", "Class.method", "function")."""
    collector = _Collector(path, source)
    collector.visit(ast.parse(source))
    out: list[Mutant] = []
    seen: dict[str, int] = {}
    for m in sorted(collector.out, key=lambda m: (m.start, m.end, m.op, m.after)):
        if only and not any(m.qualname == q or m.qualname.startswith(q + ".") for q in only):
            continue
        try:
            compile(m.apply(source), path, "exec", dont_inherit=True)
        except SyntaxError:
            continue
        n = seen.get(m.key, 0)
        seen[m.key] = n + 1
        out.append(m if n == 0 else replace(m, nth=n))
    return out

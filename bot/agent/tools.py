"""The tool registry: each tool is a name, a description, a pydantic argument model (-> JSON schema), whether
it modifies anything, and an async callable returning text. Tools that modify are never run by the loop."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

ToolFn = Callable[[Any], Awaitable[str]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args: type[BaseModel]
    run: ToolFn | None  # None for tools that modify: they are proposals, never executed here
    modifies: bool = False
    narrow_hint: str = "ask for less (a shorter window, a higher severity, a filter)"

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": compact_schema(self.args),
            },
        }


def compact_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema without pydantic's 'title' noise (tokens the model does not need)."""
    return _strip_titles(model.model_json_schema())


def _strip_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_titles(v) for k, v in node.items() if k != "title" or not isinstance(v, str)}
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


class ToolRegistry:
    def __init__(self, tools: list[Tool]) -> None:
        names = [t.name for t in tools]
        if len(names) != len(set(names)):
            raise ValueError(f"duplicate tool names: {names}")
        self._tools = {t.name: t for t in tools}
        # Built once, in a fixed order: the tool block is part of the prompt prefix vLLM caches.
        self._schemas = [t.schema() for t in tools]

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        return self._schemas

    def lean_schemas(self) -> list[dict[str, Any]]:
        """The tool list for a small context window: the read-only tools only (changes are proposed in the
        final plan's proposed_actions, whose params the analyze prompt lists; a call to a change tool still
        records a proposal), first sentence of each description, no per-field prose."""
        return [_lean(s) for s, t in zip(self._schemas, self._tools.values(), strict=True) if not t.modifies]

    def __len__(self) -> int:
        return len(self._tools)


def _lean(node: Any, top: bool = True) -> Any:
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "description" and isinstance(v, str):
                if not top:
                    continue
                v = v.split(". ")[0].rstrip(".") + "."
            out[k] = _lean(v, top=top and k in ("function",))
        return out
    if isinstance(node, list):
        return [_lean(v, top=False) for v in node]
    return node

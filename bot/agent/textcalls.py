"""Recover tool calls a model wrote as text instead of structured `tool_calls`.

Small self-hosted models (or a server started without a tool-call parser) often put the call in the text:
- Gemma 4's native form `<|tool_call>call:NAME{key:<|"|>text<|"|>,n:3,ok:true,xs:[1,2],o:{k:v}}<tool_call|>`
  (strings quoted with the `<|"|>` token, bare keys, several `call:` blocks, end tag sometimes missing);
- a JSON object in a ```json code block: {"name": ..., "arguments": {...}} (or "parameters"), or a list.
Reasoning blocks (`<|channel>thought ...<channel|>`, `<think>...</think>`) are removed: never shown to users.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_START, _END, _Q = "<|tool_call>", "<tool_call|>", '<|"|>'
_REASONING = re.compile(r"<\|channel\>.*?(?:<channel\|>|$)|<think>.*?(?:</think>|$)", re.DOTALL)
_FENCE = re.compile(r"```(?:json|tool_call|tool_code)?\s*\n?(.*?)```", re.DOTALL)
_CALL_KEYS = {"name", "arguments", "parameters", "args"}


@dataclass
class TextCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str = ""  # non-empty: the arguments could not be parsed (told to the model so it can correct)


def strip_reasoning(text: str) -> str:
    return _REASONING.sub("", text or "").strip()


def parse_text_calls(text: str) -> tuple[list[TextCall], str]:
    """Tool calls found in `text`, and the text left once calls and reasoning are removed."""
    text = strip_reasoning(text)
    calls, rest = _gemma_calls(text)
    if calls:
        return calls, rest
    return _json_calls(text)


# --- Gemma native form -------------------------------------------------------------------------------------

# The start tag is optional: with special tokens skipped in the output only `call:NAME{...}` may remain.
_CALL = re.compile(r"(?:<\|tool_call>)?\s*call:\s*([A-Za-z_][\w.-]*)\s*(?=\{)")


def _gemma_calls(text: str) -> tuple[list[TextCall], str]:
    calls: list[TextCall] = []
    rest: list[str] = []
    pos = 0
    while m := _CALL.search(text, pos):
        rest.append(text[pos : m.start()])
        name = m.group(1)
        try:
            args, i = _Parser(text, m.end()).object_at()
            calls.append(TextCall(name=name, arguments=args))
        except ValueError as exc:
            calls.append(TextCall(name=name, error=f"could not parse the arguments: {exc}"))
            end = text.find(_END, m.end())
            i = len(text) if end < 0 else end
        while i < len(text) and text[i] in " \n\t\r,":
            i += 1
        if text.startswith(_END, i):
            i += len(_END)
        pos = i
    rest.append(text[pos:])
    return calls, "".join(rest).replace(_START, "").replace(_END, "").strip()


class _Parser:
    """Recursive descent over Gemma's argument syntax: JSON plus bare keys and <|"|>-quoted strings."""

    def __init__(self, text: str, pos: int) -> None:
        self.s = text
        self.i = pos

    def _ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \n\t\r":
            self.i += 1

    def object_at(self) -> tuple[dict[str, Any], int]:
        self._ws()
        if not self.s.startswith("{", self.i):
            raise ValueError("expected '{' after the tool name")
        return self._object(), self.i

    def _object(self) -> dict[str, Any]:
        self.i += 1
        out: dict[str, Any] = {}
        self._ws()
        if self.s.startswith("}", self.i):
            self.i += 1
            return out
        while True:
            self._ws()
            key = self._key()
            self._ws()
            if not self.s.startswith(":", self.i):
                raise ValueError(f"expected ':' after key {key!r}")
            self.i += 1
            out[key] = self._value()
            self._ws()
            if self.s.startswith(",", self.i):
                self.i += 1
            elif self.s.startswith("}", self.i):
                self.i += 1
                return out
            else:
                raise ValueError(f"expected ',' or '}}' after the value of {key!r}")

    def _key(self) -> str:
        if self.s.startswith(_Q, self.i) or self.s.startswith('"', self.i):
            return str(self._string())
        m = re.compile(r"[A-Za-z_][\w.-]*").match(self.s, self.i)
        if not m:
            raise ValueError(f"expected a key at offset {self.i}")
        self.i = m.end()
        return m.group(0)

    def _value(self) -> Any:
        self._ws()
        s, i = self.s, self.i
        if s.startswith(_Q, i) or s.startswith('"', i):
            return self._string()
        if s.startswith("{", i):
            return self._object()
        if s.startswith("[", i):
            self.i += 1
            items: list[Any] = []
            self._ws()
            if self.s.startswith("]", self.i):
                self.i += 1
                return items
            while True:
                items.append(self._value())
                self._ws()
                if self.s.startswith(",", self.i):
                    self.i += 1
                elif self.s.startswith("]", self.i):
                    self.i += 1
                    return items
                else:
                    raise ValueError("expected ',' or ']' in a list")
        m = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?|true|false|null|True|False|None").match(s, i)
        if not m or (m.end() < len(s) and s[m.end()] not in ",}] \n\t"):
            return self._bare()
        self.i = m.end()
        word = m.group(0)
        consts = {"true": True, "True": True, "false": False, "False": False, "null": None, "None": None}
        if word in consts:
            return consts[word]
        return float(word) if m.group(1) or m.group(2) else int(word)

    def _bare(self) -> str:
        # A string whose <|"|> quotes were dropped (special tokens skipped): read to the next , } or ].
        m = re.compile(r"[^,}\]]+").match(self.s, self.i)
        if not m or not m.group(0).strip():
            raise ValueError(f"unexpected value at offset {self.i}: {self.s[self.i : self.i + 20]!r}")
        self.i = m.end()
        return m.group(0).strip()

    def _string(self) -> str:
        if self.s.startswith(_Q, self.i):
            end = self.s.find(_Q, self.i + len(_Q))
            if end < 0:
                raise ValueError('unterminated <|"|> string')
            value = self.s[self.i + len(_Q) : end]
            self.i = end + len(_Q)
            return value
        # A JSON string: let json decode the escapes.
        decoder = json.JSONDecoder()
        value, self.i = decoder.raw_decode(self.s, self.i)
        return str(value)


# --- JSON in a code block ----------------------------------------------------------------------------------


def _json_calls(text: str) -> tuple[list[TextCall], str]:
    calls: list[TextCall] = []
    rest = text
    for m in _FENCE.finditer(text):
        try:
            data = json.loads(m.group(1))
        except ValueError:
            continue
        found = [_as_call(d) for d in (data if isinstance(data, list) else [data])]
        if found and all(c is not None for c in found):
            calls.extend(c for c in found if c is not None)
            rest = rest.replace(m.group(0), "")
    return calls, rest.strip()


def _as_call(obj: Any) -> TextCall | None:
    if not isinstance(obj, dict):
        return None
    for wrapper in ("tool_call", "function", "function_call"):
        if isinstance(obj.get(wrapper), dict) and len(obj) <= 3:
            obj = obj[wrapper]
            break
    if not isinstance(obj.get("name"), str) or not set(obj) <= _CALL_KEYS | {"type", "id"}:
        return None
    args = obj.get("arguments", obj.get("parameters", obj.get("args", {})))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return TextCall(name=obj["name"], error="the arguments string is not valid JSON")
    if not isinstance(args, dict):
        return TextCall(name=obj["name"], error="arguments must be a JSON object")
    return TextCall(name=obj["name"], arguments=args)

"""Recover tool calls a model wrote as text instead of structured `tool_calls`.

Small self-hosted models (or a server started without a tool-call parser) often put the call in the text:
- Gemma 4's native form `<|tool_call>call:NAME{key:<|"|>text<|"|>,n:3,ok:true,xs:[1,2],o:{k:v}}<tool_call|>`
  (strings quoted with the `<|"|>` token, bare keys, several `call:` blocks, end tag sometimes missing, special
  tokens sometimes stripped by the server: then a value keeps its `,` and `}` or the call is unparseable);
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
# Parity target: vLLM's `gemma4` tool parser (vllm/tool_parsers/gemma4_tool_parser.py) and its tests
# (tests/tool_parsers/test_gemma4_tool_parser.py, vllm-project/vllm @ 027004de), whose whole-text cases are
# ported in tests/test_agent_textcalls_vllm.py. Where the text differs from what vLLM expects (a missing end
# tag, special tokens stripped by the server), we recover more, but never by guessing where a value ends.

# Tag fragments a model or server may leave around a call: <|tool_call>, <tool_call|>, <tool_call>, </tool_call>.
_TAG = re.compile(r"</?\|?tool_call\|?>")
# The start tag is optional: with special tokens skipped in the output only `call:NAME{...}` may remain.
_CALL = re.compile(r"(?:</?\|?tool_call\|?>)?\s*call:\s*([A-Za-z_][\w.-]*)\s*(?=\{)")
_KEY = re.compile(r"[A-Za-z_][\w.-]*")
_NEXT_KEY = re.compile(r"\s*(?:<\|\"\|>)?[A-Za-z_][\w.-]*(?:<\|\"\|>)?\s*:")
_CALL_OVER = re.compile(r"\s*(?:$|</?\|?tool_call\|?>|call:|\})")  # what may follow the `}` ending a call
_LIST_OVER = re.compile(r"\s*(?:$|[,}\]])")
_NUMBER = re.compile(r"-?\d+(\.\d*)?([eE][-+]?\d+)?")  # "108." is 108.0, as vLLM reads it
_WORDS = {"true": True, "True": True, "false": False, "False": False}  # null/none/nil: any case, as vLLM
_NULLS = {"null", "none", "nil"}


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
            end = _TAG.search(text, m.end())
            i = len(text) if end is None else end.start()
        while i < len(text) and text[i] in " \n\t\r,":
            i += 1
        if end_tag := _TAG.match(text, i):
            i = end_tag.end()
        pos = i
    rest.append(text[pos:])
    return calls, _TAG.sub("", "".join(rest)).strip()


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
            out[key] = self._value(in_list=False)
            self._ws()
            if self.i >= len(self.s):
                return out  # the reply stopped before the closing brace (no end tag either)
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
        m = _KEY.match(self.s, self.i)
        if not m:
            raise ValueError(f"expected a key at offset {self.i}")
        self.i = m.end()
        return m.group(0)

    def _value(self, in_list: bool) -> Any:
        self._ws()
        s, i = self.s, self.i
        if s.startswith(_Q, i) or s.startswith('"', i):
            return self._string()
        if s.startswith("{", i):
            return self._object()
        if s.startswith("[", i):
            return self._list()
        if i >= len(s) or s[i] in ",}" or (in_list and s[i] == "]"):
            return ""  # `key:` with nothing after it is an empty value (vLLM: {"key": ""})
        for m in (_NUMBER.match(s, i), re.compile(r"true|false|True|False|(?i:null|none|nil)").match(s, i)):
            if m and (m.end() == len(s) or s[m.end()] in ",}] \n\t\r"):
                self.i = m.end()
                word = m.group(0)
                if word.lower() in _NULLS:
                    return None
                if word in _WORDS:
                    return _WORDS[word]
                return float(word) if m.group(1) is not None or m.group(2) else int(word)
        return self._bare(in_list)

    def _list(self) -> list[Any]:
        self.i += 1
        items: list[Any] = []
        self._ws()
        if self.s.startswith("]", self.i):
            self.i += 1
            return items
        while True:
            items.append(self._value(in_list=True))
            self._ws()
            if self.s.startswith(",", self.i):
                self.i += 1
            elif self.s.startswith("]", self.i):
                self.i += 1
                return items
            else:
                raise ValueError("expected ',' or ']' in a list")

    def _bare(self, in_list: bool) -> str:
        """A string whose <|"|> quotes were dropped (special tokens skipped by the server). It ends only where
        the text goes on as arguments do: `, key:` or a `}` that ends the call. A `,` or `}` anywhere else
        belongs to the value; if no such end exists the call is reported as unparseable, never cut short."""
        s, start = self.s, self.i
        j = start
        while j < len(s):
            c = s[j]
            if c == "," and (_NEXT_KEY.match(s, j + 1) or (in_list and not _NEXT_KEY.match(s, j + 1))):
                break
            if c == "}" and (_CALL_OVER.match(s, j + 1) or self._comma_key(j + 1)):
                break
            if c == "]" and in_list and _LIST_OVER.match(s, j + 1):
                break
            if _TAG.match(s, j):
                break
            j += 1
        if j >= len(s) or _TAG.match(s, j):
            raise ValueError(f"the value at offset {start} has no quotes and no clear end: {s[start : start + 30]!r}")
        value = s[start:j].strip()
        self.i = j
        return value

    def _comma_key(self, j: int) -> bool:
        m = re.compile(r"\s*,").match(self.s, j)
        return bool(m and _NEXT_KEY.match(self.s, m.end()))

    def _string(self) -> str:
        if self.s.startswith(_Q, self.i):
            start = self.i + len(_Q)
            end = self.s.find(_Q, start)
            if end >= 0:
                self.i = end + len(_Q)
                return self.s[start:end]
            # Unterminated: like vLLM, the value is everything after the delimiter, up to the end of the call.
            tag = _TAG.search(self.s, start)
            stop = len(self.s) if tag is None else tag.start()
            value = self.s[start:stop].rstrip()
            if value.endswith("}"):
                value = value[:-1]
            self.i = start + len(value)
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

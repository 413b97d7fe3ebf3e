"""Outside text can never become one of Gemma 4's control tokens.

vLLM renders the chat template into one string and tokenizes it; Hugging Face tokenizers match added tokens
(`<|turn>`, `<turn|>`, `<|tool_call>`, `<|"|>`, ...) on the raw text, wherever they occur. A log line, an alert
summary, a question or a tool result that carries `<|turn>system` would therefore reach the model as a real turn
marker, and a forged `<|tool_call>` as a real tool call. vLLM's chat API has no per-message switch for this, so
the bot escapes every occurrence before a request leaves it.

The escape puts U+200B ZERO WIDTH SPACE right after the `<`. An added token only matches its exact character
sequence, so `<` + U+200B + `|turn>` matches none; the tokenizer encodes it as ordinary pieces (U+200B as a
vocabulary piece or as UTF-8 byte pieces, either way text), the words still read the same to a person and to the
model, and the change is one character per occurrence. Zero-width rather than a look-alike (`＜`, `‹`): a
look-alike changes what a person copying the text gets, and some are themselves pieces of other models' special
tokens (DeepSeek's use U+FF5C). U+200B is not whitespace to Python, so the template's `trim` keeps it; the
test (tests/test_control_tokens.py) matches added tokens both on the raw text and after a SentencePiece-style
space-replacing normaliser. The escape also covers the family's shape (`<|name>`, `<name|>`, `<|name|>`), so a control
token added by a later Gemma 4 tokenizer is escaped too. The token list and its sources:
skills/data/gemma4_control_tokens.yaml.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

BREAK = "\u200b"


@lru_cache(maxsize=1)
def control_tokens() -> tuple[str, ...]:
    """Every listed control-token string (skills/data/gemma4_control_tokens.yaml), longest first."""
    text = resources.files("skills").joinpath("data/gemma4_control_tokens.yaml").read_text(encoding="utf-8")
    tokens = yaml.safe_load(text)["tokens"]
    return tuple(sorted({str(t) for t in tokens.values()}, key=lambda t: (-len(t), t)))


@lru_cache(maxsize=1)
def _pattern() -> re.Pattern[str]:
    listed = "|".join(re.escape(t) for t in control_tokens())
    # The family's shapes: a pipe inside the angle brackets on either side (`<|x>`, `<x|>`, `<|x|>`, `<|"|>`).
    shapes = r'<\|[\w"]{1,40}\|?>|<[\w"]{1,40}\|>'
    return re.compile(f"{listed}|{shapes}")


def neutralise(text: str) -> str:
    """`text` with every control-token string broken by a zero-width space after its `<` (idempotent)."""
    if "<" not in text:
        return text
    return _pattern().sub(lambda m: "<" + BREAK + m.group(0)[1:], text)


def _content(value: Any) -> Any:
    if isinstance(value, str):
        return neutralise(value)
    if isinstance(value, list):  # content parts: [{"type": "text", "text": ...}, ...]
        return [
            {**p, "text": neutralise(p["text"])} if isinstance(p, dict) and isinstance(p.get("text"), str) else p
            for p in value
        ]
    return value


def neutralise_messages(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages as they may be sent: every text in them (contents, tool-call arguments, names) escaped.
    The inputs are not modified."""
    out: list[dict[str, Any]] = []
    for m in messages:
        msg = dict(m)
        if "content" in msg:
            msg["content"] = _content(msg["content"])
        if isinstance(msg.get("name"), str):
            msg["name"] = neutralise(msg["name"])
        if msg.get("tool_calls"):
            calls = []
            for c in msg["tool_calls"]:
                fn = c.get("function") if isinstance(c, dict) else None
                if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                    c = {**c, "function": {**fn, "arguments": neutralise(fn["arguments"])}}
                calls.append(c)
            msg["tool_calls"] = calls
        out.append(msg)
    return out

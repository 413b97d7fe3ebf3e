"""Prompt texts live here as Markdown files, loaded by name (no prompt strings buried in code)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

_DIR = Path(__file__).parent


@cache
def load(name: str) -> str:
    """The text of prompts/<name>.md (cached: prompts are read once per process)."""
    path = _DIR / f"{name}.md"
    if path.parent != _DIR or not path.is_file():
        raise FileNotFoundError(f"no prompt named {name!r} in {_DIR}")
    return path.read_text(encoding="utf-8").strip()

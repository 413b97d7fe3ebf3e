"""What an MCP tool answers (bot/mcp_tools.py runs the tools, bot/mcp_plans.py follows the plans they propose):
structured content and a short text beside it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolResult:
    structured: dict[str, Any]
    text: str

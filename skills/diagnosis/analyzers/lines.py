"""Reading a log line's message under the prefixes people's logs carry, and telling start-up from serving.

Prefixes seen in the field corpora (tests/data/field_logs*): docker compose's `service-1  | `, torch
distributed's `[rank0]: `, vLLM's own `ERROR 05-27 11:47:57 [core.py:396] ` and the older engine's
`ERROR 03-26 05:25:01 engine.py:389] ` (no brackets; vllm/logger.py's format before the V1 engine). The
process prefix `(EngineCore_DP0 pid=1)` is already gone (skills/logs/condense.py strip_prefix).
"""

from __future__ import annotations

import re

from skills.diagnosis.analyzers.base import Line, LogView

_COMPOSE = re.compile(r"^[\w.-]+\s+\|\s?")
_RANK = re.compile(r"^\[rank\d+\]:\s?")
_VLLM = re.compile(
    r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"(?:\[[^\]]{1,80}\]|[\w./-]{1,80}\.py:\d+\])\s?"
)
_PROC = re.compile(r"^\((?:[\w.-]+ )*?(?:rank=\d+ )?pid=\d+\)\s?")

# The server reports ready, or is serving: uvicorn's "Application startup complete." / "Uvicorn running on",
# Cloud Run's "STARTUP ... probe succeeded", vLLM's periodic stats (vllm/v1/metrics/loggers.py "Avg prompt
# throughput"), a request it added (v1/engine/async_llm.py "Added request") or an HTTP request answered.
READY = re.compile(
    r"Application startup complete|Uvicorn running on|STARTUP \w+ probe succeeded|Avg prompt throughput|"
    r"Added request|\"(?:POST|GET) /v1/\S* HTTP/[\d.]+\" \d{3}"
)


def unprefixed(line: Line | str) -> str:
    """The message without compose / rank / process / vLLM logger prefixes, its indentation kept (a traceback's
    frame and code lines are indented under their prefix)."""
    text = line.text if isinstance(line, Line) else line
    for rx in (_COMPOSE, _RANK, _PROC, _VLLM):
        text = rx.sub("", text, count=1)
    return text


def body(line: Line | str) -> str:
    """The message without compose / rank / process / vLLM logger prefixes."""
    return unprefixed(line).strip()


def ready_at(view: LogView) -> int | None:
    """Index of the first line showing the server ready or serving; None when the log never gets there."""
    return next((line.idx for line in view.lines if READY.search(line.text)), None)


def before_ready(view: LogView) -> list[Line]:
    end = ready_at(view)
    return view.lines if end is None else view.lines[:end]

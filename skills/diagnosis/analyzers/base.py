"""What every analyzer works on: the redacted lines of a log, the vLLM config they reveal, and a registry.

An analyzer is a function `(LogView) -> Finding | None` registered with `@analyzer(kind)`. It matches
patterns (several vLLM / PyTorch / Cloud Run wordings each), cites the matching lines as evidence and
proposes a remediation with concrete parameters. Lines are data: nothing in them is ever executed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from skills.logs.condense import effective_severity, strip_prefix
from skills.logs.redact_entries import redact_entries
from skills.ports import LogEntry, ServiceInfo

if TYPE_CHECKING:
    from skills.diagnosis.findings import Finding

MAX_EVIDENCE = 3
MAX_EVIDENCE_CHARS = 500

# A request echoed into the log (vLLM --enable-log-requests) carries user text: never match on it.
_ECHO = re.compile(r"Received request \S+: prompt:|Added request \S+.*prompt|prompt_token_ids: \[")

_CONFIG_KEYS = {
    "max_model_len": r"max_model_len|max_seq_len|max-model-len",
    "gpu_memory_utilization": r"gpu_memory_utilization|gpu-memory-utilization",
    "kv_cache_dtype": r"kv_cache_dtype|kv-cache-dtype",
    "enforce_eager": r"enforce_eager|enforce-eager",
    "cpu_offload_gb": r"cpu_offload_gb|cpu-offload-gb",
    "max_num_seqs": r"max_num_seqs|max-num-seqs",
    "dtype": r"(?<![_a-z])dtype",
    "model": r"(?<![_a-z])model",
    "tool_call_parser": r"tool_call_parser",
}
_CONFIG_LINE = re.compile(r"non-default args:|with config:|Namespace\(|engine args:|vllm serve ")
_CONFIG_RX = {
    k: re.compile(r"['\"]?(?:" + v + r")['\"]?\s*[:=]\s*['\"]?([^'\",)\s}]+)") for k, v in _CONFIG_KEYS.items()
}


@dataclass
class Line:
    idx: int
    ts: datetime | None
    severity: str
    text: str  # redacted, vLLM process prefix removed
    log_name: str = ""
    revision: str = ""
    http_status: int | None = None

    def evidence(self) -> str:
        t = self.text if len(self.text) <= MAX_EVIDENCE_CHARS else self.text[: MAX_EVIDENCE_CHARS - 1] + "…"
        return t


@dataclass
class LogView:
    lines: list[Line]
    configs: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    service: ServiceInfo | None = None

    @classmethod
    def build(cls, entries: list[LogEntry], service: ServiceInfo | None = None) -> LogView:
        lines: list[Line] = []
        configs: list[tuple[int, dict[str, Any]]] = []
        for e in redact_entries(entries):  # first, on the raw entries: a key block is masked whole
            for raw in e.text.splitlines() or [""]:
                text = strip_prefix(raw.rstrip())
                if not text.strip() or _ECHO.search(text):
                    continue
                line = Line(
                    idx=len(lines),
                    ts=e.timestamp,
                    severity=effective_severity(e.severity, text),
                    text=text[:4000],
                    log_name=e.log_name,
                    revision=e.revision,
                    http_status=e.http_status,
                )
                lines.append(line)
                if _CONFIG_LINE.search(text):
                    cfg = parse_config(text)
                    if cfg:
                        configs.append((line.idx, cfg))
        return cls(lines=lines, configs=configs, service=service)

    def grep(self, *patterns: re.Pattern[str]) -> list[tuple[Line, re.Match[str]]]:
        out = []
        for line in self.lines:
            for rx in patterns:
                m = rx.search(line.text)
                if m:
                    out.append((line, m))
                    break
        return out

    def config_at(self, idx: int) -> dict[str, Any]:
        """The vLLM config in force at line `idx`: the last config lines before it, merged."""
        cfg: dict[str, Any] = {}
        for at, c in self.configs:
            if at > idx:
                break
            cfg.update(c)
        return cfg

    def after(self, idx: int, rx: re.Pattern[str]) -> bool:
        return any(rx.search(line.text) for line in self.lines[idx + 1 :])

    def near(self, idx: int, rx: re.Pattern[str], before: int = 15, after: int = 3) -> bool:
        lo, hi = max(0, idx - before), min(len(self.lines), idx + after + 1)
        return any(rx.search(line.text) for line in self.lines[lo:hi])


def _value(raw: str) -> Any:
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(raw)
        except ValueError:
            pass
    return raw


def parse_config(text: str) -> dict[str, Any]:
    """vLLM settings from its startup lines (non-default args dict, engine config, argparse Namespace)."""
    cfg: dict[str, Any] = {}
    for key, rx in _CONFIG_RX.items():
        m = rx.search(text)
        if m:
            cfg[key] = _value(m.group(1))
    return cfg


def evidence_of(hits: Iterable[tuple[Line, Any]], limit: int = MAX_EVIDENCE) -> list[str]:
    out: list[str] = []
    for line, _ in hits:
        ev = line.evidence()
        if ev not in out:
            out.append(ev)
        if len(out) >= limit:
            break
    return out


def first_seen(hits: list[tuple[Line, Any]]) -> str:
    for line, _ in hits:
        if line.ts is not None:
            return line.ts.isoformat()
    return ""


def rx(*patterns: str, flags: int = 0) -> list[re.Pattern[str]]:
    return [re.compile(p, flags) for p in patterns]


Analyzer = Callable[[LogView], "Finding | None"]
REGISTRY: dict[str, Analyzer] = {}


def analyzer(kind: str) -> Callable[[Analyzer], Analyzer]:
    def deco(fn: Analyzer) -> Analyzer:
        if kind in REGISTRY:
            raise RuntimeError(f"analyzer {kind!r} registered twice")
        REGISTRY[kind] = fn
        return fn

    return deco

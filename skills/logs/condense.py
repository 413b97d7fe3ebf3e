"""Condense logs into a digest that fits a small model's context: templates, counts, first/last seen.

Tens of thousands of INFO lines around three lines that matter become: every error template (never
dropped), the warnings, the startup sequence in order, then the rest rare-first until the token budget is
spent, and a closing line that says what was left out. Multi-line Python tracebacks (Cloud Run logs each
line as its own entry) are folded back into one event first. Entries are redacted before anything else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import BaseModel, Field

from skills.logs.redact import redact
from skills.logs.redact_entries import redact_entries
from skills.logs.templates import TemplateMiner
from skills.ports import LogEntry
from skills.tokens import estimate_tokens

SEVERITY_LEVELS = {
    "DEFAULT": 0,
    "DEBUG": 100,
    "INFO": 200,
    "NOTICE": 300,
    "WARNING": 400,
    "ERROR": 500,
    "CRITICAL": 600,
    "ALERT": 700,
    "EMERGENCY": 800,
}
_LEVEL_ALIASES = {"WARN": "WARNING", "FATAL": "CRITICAL", "ERR": "ERROR", "TRACE": "DEBUG"}

# vLLM multiprocess prefixes: "(EngineCore_DP0 pid=123) ", "(APIServer pid=1) ", "(VllmWorker rank=0 pid=7) "
_PROC_PREFIX = re.compile(r"^\((?:[\w.-]+ )*?(?:rank=\d+ )?pid=\d+\)\s?")
_TEXT_LEVEL = re.compile(r"^\s*\[?(DEBUG|INFO|NOTICE|WARNING|WARN|ERROR|ERR|CRITICAL|FATAL)\b")
# "INFO 11-20 14:00:01 [core.py:77] " : level, date, time and source line; the group keeps the severity.
_VLLM_PREFIX = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]{1,80}\] ")
_TRACEBACK_START = "Traceback (most recent call last):"
_CHAINED = (
    "During handling of the above exception",
    "The above exception was the direct cause",
)
_EXC_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Fault)\b:?")
_STARTUP = re.compile(
    r"Starting new instance|API server version|non-default args|Initializing a V\d LLM engine|"
    r"Starting to load model|Loading (?:safetensors )?checkpoint shards: 100%|Model loading took|"
    r"Available KV cache memory|KV cache size|Maximum concurrency|Capturing CUDA graph|"
    r"Graph capturing finished|"
    r"init engine .* took|Starting vLLM API server|Application startup complete|Uvicorn running|"
    r"Container called exit|probe (?:failed|succeeded)|Ready condition",
    re.IGNORECASE,
)


def level(severity: str) -> int:
    s = severity.upper()
    return SEVERITY_LEVELS.get(_LEVEL_ALIASES.get(s, s), 0)


def strip_prefix(text: str) -> str:
    return _PROC_PREFIX.sub("", text, count=1)


def effective_severity(entry_severity: str, text: str) -> str:
    """A level written in the line wins (vLLM writes INFO lines to stderr); else the entry's; else guessed."""
    m = _TEXT_LEVEL.match(text)
    if m:
        s = m.group(1).upper()
        return _LEVEL_ALIASES.get(s, s)
    sev = entry_severity.upper() if entry_severity else "DEFAULT"
    if sev != "DEFAULT":
        return _LEVEL_ALIASES.get(sev, sev)
    if text.startswith(_TRACEBACK_START) or _EXC_LINE.match(text):
        return "ERROR"
    return "DEFAULT"


@dataclass
class Event:
    """One log event: a line, or a whole traceback folded back together."""

    timestamp: datetime | None
    severity: str
    lines: list[str]
    log_name: str = ""
    revision: str = ""
    http_status: int | None = None
    traceback: bool = False

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def head(self) -> str:
        """The line that names the event: a traceback's final exception line, else the first line."""
        if self.traceback:
            for line in reversed(self.lines):
                if _EXC_LINE.match(line):
                    return line
            return self.lines[-1]
        return self.lines[0]


def _continues(line: str, ev: Event) -> bool:
    if not ev.traceback:
        return False
    if not line.strip() or line[0] in " \t" or line.startswith(_CHAINED) or line.startswith(_TRACEBACK_START):
        return True
    # The exception line closes the traceback; it belongs to it when it directly follows a frame.
    last = ev.lines[-1]
    return bool(_EXC_LINE.match(line)) and (last[:1] in " \t" or last.startswith(_CHAINED))


def fold(entries: list[LogEntry]) -> list[Event]:
    """Entries -> events, folding tracebacks (consecutive lines of the same stream and revision)."""
    events: list[Event] = []
    open_tb: dict[tuple[str, str], Event] = {}
    for e in entries:
        for raw in e.text.splitlines() or [""]:
            line = strip_prefix(raw.rstrip())
            stream = (e.log_name, e.revision)
            ev = open_tb.get(stream)
            if ev is not None and _continues(line, ev):
                ev.lines.append(line)
                if level(e.severity) > level(ev.severity):
                    ev.severity = e.severity.upper()
                continue
            open_tb.pop(stream, None)
            if not line.strip():
                continue
            ev = Event(
                timestamp=e.timestamp,
                severity=effective_severity(e.severity, line),
                lines=[line],
                log_name=e.log_name,
                revision=e.revision,
                http_status=e.http_status,
                traceback=line.startswith(_TRACEBACK_START),
            )
            if ev.traceback:
                ev.severity = "ERROR" if level(ev.severity) < level("ERROR") else ev.severity
                open_tb[stream] = ev
            events.append(ev)
    return events


class TemplateGroup(BaseModel):
    template: str
    count: int
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    example: str  # redacted
    severity: str
    startup: bool = False


class DigestStats(BaseModel):
    lines_in: int = 0
    events: int = 0
    templates: int = 0
    tokens: int = 0
    omitted: int = 0  # templates left out of the text to fit the budget
    omitted_lines: int = 0
    malformed: int = 0
    truncated: str = ""


class Digest(BaseModel):
    text: str
    groups: list[TemplateGroup] = Field(default_factory=list)
    stats: DigestStats


@dataclass
class _Acc:
    template: str
    count: int = 0
    first: datetime | None = None
    last: datetime | None = None
    example: Event | None = None
    severity: str = "DEFAULT"
    order: int = 0
    startup: bool = False
    extra: list[str] = field(default_factory=list)


def group_events(events: list[Event]) -> list[TemplateGroup]:
    miner = TemplateMiner()
    accs: dict[int, _Acc] = {}
    for i, ev in enumerate(events):
        head = _VLLM_PREFIX.sub("", ev.head, count=1)
        gid = miner.add(("Traceback: " if ev.traceback else "") + head[:2000])
        acc = accs.get(gid)
        if acc is None:
            acc = accs[gid] = _Acc(template="", order=i, startup=bool(_STARTUP.search(head[:500])))
        acc.count += 1
        if ev.timestamp is not None:
            acc.first = ev.timestamp if acc.first is None else min(acc.first, ev.timestamp)
            acc.last = ev.timestamp if acc.last is None else max(acc.last, ev.timestamp)
        if acc.example is None or level(ev.severity) > level(acc.severity):
            acc.example = ev
        if level(ev.severity) > level(acc.severity):
            acc.severity = ev.severity
    groups = []
    for gid, acc in sorted(_merged(miner, accs).items(), key=lambda kv: kv[1].order):
        ex = acc.example
        assert ex is not None
        groups.append(
            TemplateGroup(
                template=redact(miner.template(gid))[:600],
                count=acc.count,
                first_seen=acc.first,
                last_seen=acc.last,
                example=redact(_example_text(ex)),
                severity=acc.severity if acc.severity != "DEFAULT" else "DEFAULT",
                startup=acc.startup,
            )
        )
    return groups


def _merged(miner: TemplateMiner, accs: dict[int, _Acc]) -> dict[int, _Acc]:
    """Fold groups the miner merged after their lines arrived (variants of one event) into one."""
    out: dict[int, _Acc] = {}
    for gid, acc in sorted(accs.items(), key=lambda kv: kv[1].order):
        root = miner.group(gid)
        into = out.get(root)
        if into is None:
            out[root] = acc
            continue
        into.count += acc.count
        into.startup = into.startup or acc.startup
        into.first = min((t for t in (into.first, acc.first) if t is not None), default=None)
        into.last = max((t for t in (into.last, acc.last) if t is not None), default=None)
        if level(acc.severity) > level(into.severity):
            into.severity, into.example = acc.severity, acc.example
    return out


def _example_text(ev: Event) -> str:
    if not ev.traceback or len(ev.lines) <= 8:
        return "\n".join(line[:1000] for line in ev.lines)
    # A long traceback: its first frames and its end are what a reader needs.
    return "\n".join([*(x[:300] for x in ev.lines[:3]), "  ...", *(x[:1000] for x in ev.lines[-4:])])


def _ts(t: datetime | None) -> str:
    return t.strftime("%H:%M:%S") if t else "--"


def _render(g: TemplateGroup, with_example: bool) -> str:
    seen = _ts(g.first_seen) if g.count == 1 else f"{_ts(g.first_seen)}..{_ts(g.last_seen)}"
    sev = g.severity if g.severity != "DEFAULT" else "-"
    if g.count == 1 and "\n" not in g.example:
        return f"[{sev} x1 {seen}] {g.example[:400]}"  # one line: the line itself reads better than a template
    out = f"[{sev} x{g.count} {seen}] {g.template}"
    if with_example and g.example and g.example != g.template:
        ex = g.example if "\n" in g.example else g.example[:400]
        out += "\n    e.g. " + ex.replace("\n", "\n    ")
    return out


def condense(entries: list[LogEntry], token_budget: int = 3000, keep: list[str] | None = None) -> Digest:
    """Group, order and fit `entries` into about `token_budget` tokens; no error template is ever dropped.

    Redaction runs first, on each entry's raw text: before lines are split and folded, and before the
    grouper masks digits (which would otherwise cut a token into pieces no rule recognises).
    `keep`: lines that must appear verbatim (the diagnosis' evidence, already redacted): a group shows one
    example, so a quoted line merged into a group, or cut from a long traceback, is added on its own."""
    entries = redact_entries(entries)
    events = fold(entries)
    groups = group_events(events)
    lines_in = sum(max(1, e.text.count("\n") + 1) for e in entries)
    errors = [g for g in groups if level(g.severity) >= level("ERROR")]
    warnings = [g for g in groups if level("WARNING") <= level(g.severity) < level("ERROR")]
    rest = [g for g in groups if level(g.severity) < level("WARNING")]
    startup = [g for g in rest if g.startup]
    other = [g for g in rest if not g.startup]
    errors.sort(key=lambda g: (-level(g.severity), g.count))
    warnings.sort(key=lambda g: g.count)
    other.sort(key=lambda g: g.count)
    # startup keeps first-seen order (the groups list is already in order of first appearance)

    span = [g.first_seen for g in groups if g.first_seen] + [g.last_seen for g in groups if g.last_seen]
    window = f", {min(span):%Y-%m-%d %H:%M:%S}..{max(span):%H:%M:%S} UTC" if span else ""
    header = f"{lines_in} lines -> {len(events)} events, {len(groups)} templates{window}"

    parts: list[str] = [header]
    used = estimate_tokens(header)
    # Errors always go in: with their examples when they fit, else template lines only.
    error_lines = [_render(g, True) for g in errors]
    if used + estimate_tokens("\n".join(error_lines)) > token_budget * 0.8:
        error_lines = [_render(g, False)[:400] for g in errors]
    if error_lines:
        parts.append("== Errors (all kept) ==")
        parts.extend(error_lines)
        used += estimate_tokens("\n".join(parts[-len(error_lines) - 1 :]))

    # Lines the diagnosis quotes are what the model must see to follow it: never hidden by a merge.
    quoted = [line for line in dict.fromkeys(keep or []) if line and line not in "\n".join(parts)]
    if quoted:
        parts.append("== Lines the findings quote (verbatim) ==")
        parts.extend(quoted)
        used += estimate_tokens("\n".join(quoted)) + 8

    omitted: list[TemplateGroup] = []
    reserve = 40  # for the closing "left out" line
    for title, section in (
        ("Warnings", warnings),
        ("Startup sequence", startup),
        ("Other, rarest first", other),
    ):
        kept: list[str] = []
        for g in section:
            line = _render(g, title == "Warnings")
            cost = estimate_tokens(line) + 1
            if used + cost > token_budget - reserve:
                omitted.append(g)
                continue
            kept.append(line)
            used += cost
        if kept:
            parts.append(f"== {title} ==")
            parts.extend(kept)
            used += 4
    if omitted:
        n_lines = sum(g.count for g in omitted)
        parts.append(
            f"Left out to fit {token_budget} tokens: {len(omitted)} templates ({n_lines} lines), "
            "none of them errors (ask for a narrower --since/--severity to see them)."
        )
    text = "\n".join(parts)
    stats = DigestStats(
        lines_in=lines_in,
        events=len(events),
        templates=len(groups),
        tokens=estimate_tokens(text),
        omitted=len(omitted),
        omitted_lines=sum(g.count for g in omitted),
    )
    return Digest(text=text, groups=groups, stats=stats)

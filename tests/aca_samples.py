"""The ACA failure samples (tests/data/aca_logs*, sources in each manifest.yaml) as the ACA adapter would hand them
to the diagnosis, and their score.

bot/adapters/aca_logs.py makes a system event's text "<Reason>: <Log>" with its severity from the event's Type
(Normal INFO, Warning WARNING, Error ERROR). The samples keep each source's own shape, so they are read the same
way: a JSON event from `az containerapp logs show --type system` (Reason/Type/Msg, or the workspace's Reason_s/
Type_s/Log_s), a "time | replica | Reason | message" row, a portal paste (time, Reason, message on three lines); any
other line (an ARM error, a console line, a sentence quoting one) is one entry as written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from skills.diagnosis.diagnose import diagnose
from skills.ports import LogEntry

DATA = Path(__file__).parent / "data"
TUNING = DATA / "aca_logs"
HELDOUT = DATA / "aca_logs_heldout"
SYSTEM = "ContainerAppSystemLogs_CL"
_TYPES = {"normal": "INFO", "info": "INFO", "warning": "WARNING", "error": "ERROR"}
_ROW = re.compile(r"^\s*\d{4}-\d\d-\d\dT[\d:]+Z\s*\|\s*[^|]*\|\s*([A-Z]\w+)\s*\|\s*(.+)$")
_REASON = re.compile(r"^[A-Z][a-z]+(?:[A-Z][a-z]*)+$")  # a bare event Reason: ReplicaUnhealthy, StoppingContainer
_DATE = re.compile(r"^\d{1,2}/\d\d/\d{4}, [\d:.]+$")


def _event(d: dict[str, Any]) -> LogEntry:
    reason = d.get("Reason") or d.get("Reason_s") or ""
    text = str(d.get("Msg") or d.get("Log") or d.get("Log_s") or "")
    kind = str(d.get("Type") or d.get("Type_s") or "")
    return LogEntry(
        text=f"{reason}: {text}" if reason else text,
        severity=_TYPES.get(kind.lower(), "DEFAULT"),
        log_name=SYSTEM,
        revision=str(d.get("RevisionName") or ""),
    )


def entries(path: Path) -> list[LogEntry]:
    raw = path.read_text(encoding="utf-8")
    try:
        whole = json.loads(raw)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        return [_event(whole)]
    out: list[LogEntry] = []
    lines = [ln for ln in raw.splitlines() if ln.strip() and not _DATE.match(ln.strip())]
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("{"):
            try:
                out.append(_event(json.loads(line)))
                i += 1
                continue
            except ValueError:
                pass
        if (m := _ROW.match(line)) is not None:
            out.append(LogEntry(text=f"{m.group(1)}: {m.group(2).strip()}", log_name=SYSTEM))
        elif _REASON.match(line) and i + 1 < len(lines):
            out.append(LogEntry(text=f"{line}: {lines[i + 1].strip()}", log_name=SYSTEM))
            i += 1
        else:
            out.append(LogEntry(text=lines[i]))
        i += 1
    return out


@dataclass
class Sample:
    file: str
    source: str
    cls: str
    root_causes: list[str]
    uncovered: bool = False
    consequences: list[str] = field(default_factory=list)


def samples(folder: Path) -> list[Sample]:
    data = yaml.safe_load((folder / "manifest.yaml").read_text())
    return [
        Sample(
            file=s["file"],
            source=s["source"],
            cls=s["class"],
            root_causes=list(s.get("root_causes") or []),
            uncovered=bool(s.get("uncovered")),
            consequences=list(s.get("consequences") or []),
        )
        for s in data["samples"]
    ]


def kinds(folder: Path, sample: Sample) -> list[str]:
    return diagnose(entries(folder / sample.file), token_budget=800).root_kinds()


def score(folder: Path) -> tuple[int, int, list[str]]:
    """Exact matches of the headline kinds, the count, and each miss said."""
    hits, misses = 0, []
    items = samples(folder)
    for s in items:
        got = kinds(folder, s)
        if sorted(got) == sorted(s.root_causes):
            hits += 1
        else:
            misses.append(f"{s.file}: want {s.root_causes}, got {got}")
    return hits, len(items), misses


if __name__ == "__main__":  # python -m tests.aca_samples [heldout]: the tuning set unless asked
    import sys

    for folder in (HELDOUT,) if sys.argv[1:] == ["heldout"] else (TUNING,):
        ok, n, missed = score(folder)
        print(f"{folder.name}: {ok}/{n}")
        for m in missed:
            print("  miss", m)

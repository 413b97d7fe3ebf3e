"""What the model is shown of the lines that matter: decisive lines through condensation (issue 32).

A log's decisive lines are the lines the analyzers quote as evidence (`Finding.evidence`): the lines a reader,
or the model, needs to see to reach the diagnosis. They are marked per log in the corpus manifests
(`"decisive"`, written by `mark_decisive`), so that the measure does not move when an analyzer changes.
`survival` condenses a log the way the product does (`condense`, redaction first) and checks that every
decisive line appears verbatim in the digest text, next to the compression the digest gives (lines and
tokens in / out). A merge that hides a decisive line is a bug even when grouping accuracy rises.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from skills.diagnosis.diagnose import diagnose
from skills.logs.condense import condense
from skills.logs.input_format import decode_log_bytes
from skills.logs.redact_entries import redact_entries
from skills.ports import LogEntry
from skills.tokens import estimate_tokens

CORPUS_SETS = (
    "field_logs",
    "field_logs_heldout",
    "field_logs_tuning",
    "field_logs_heldout2",
    "field_logs_issue52_tuning",
    "field_logs_issue52_heldout",
)


class Survival(BaseModel):
    file: str
    lines_in: int
    lines_out: int
    tokens_in: int
    tokens_out: int
    decisive: int
    survived: int  # in the digest the product shows (diagnose: condense told the findings' evidence)
    survived_blind: int  # in a digest made without the findings (condense alone: grouping and budget only)
    missing: list[str] = Field(default_factory=list)


def corpus_entries(path: Path) -> list[LogEntry]:
    """A corpus file as the diagnosis reads it: every non-blank line one entry (as corpus_eval does)."""
    text = decode_log_bytes(path.read_bytes())
    return [LogEntry(text=line) for line in text.splitlines() if line.strip()]


def decisive_lines(entries: list[LogEntry]) -> list[str]:
    """The lines the analyzers quote for this log (redacted, as they quote them), each once, in order."""
    seen: dict[str, None] = {}
    for f in diagnose(entries).findings:
        for line in f.evidence:
            seen.setdefault(line, None)
    return list(seen)


def survival(entries: list[LogEntry], decisive: list[str], name: str = "", token_budget: int = 3000) -> Survival:
    """Which decisive lines appear verbatim in the digest the product shows (diagnose's, whose condense is
    told the findings' evidence) and in one condense makes alone; compression of the product's digest."""
    shown = diagnose(entries, token_budget=token_budget)
    blind = condense(entries, token_budget)
    text_in = "\n".join(e.text for e in redact_entries(entries))
    missing = [d for d in decisive if d not in shown.digest_text]
    return Survival(
        file=name,
        lines_in=shown.digest.lines_in,
        lines_out=shown.digest_text.count("\n") + 1,
        tokens_in=estimate_tokens(text_in),
        tokens_out=estimate_tokens(shown.digest_text),
        decisive=len(decisive),
        survived=len(decisive) - len(missing),
        survived_blind=sum(1 for d in decisive if d in blind.text),
        missing=missing,
    )


def mark_decisive(folder: Path) -> int:
    """Write each log's decisive lines into the folder's manifest (`"decisive"`); returns how many logs."""
    path = folder / "manifest.json"
    text = path.read_text(encoding="utf-8")
    manifest = json.loads(text)
    for item in manifest["logs"]:
        item["decisive"] = decisive_lines(corpus_entries(folder / item["file"]))
    # The manifests' own layout (one-space indent, ASCII escapes, their final newline or none) is kept, so
    # that the change reads as the added lists only.
    end = "\n" if text.endswith("\n") else ""
    path.write_text(json.dumps(manifest, indent=1) + end, encoding="utf-8")
    return len(manifest["logs"])


def corpus_survival(folder: Path, token_budget: int = 3000) -> list[Survival]:
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    return [
        survival(corpus_entries(folder / item["file"]), item.get("decisive", []), item["file"], token_budget)
        for item in manifest["logs"]
    ]

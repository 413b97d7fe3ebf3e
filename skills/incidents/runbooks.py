"""Runbooks: one Markdown file per finding kind (`<kind>.md`) in a folder, linked from findings and read by the
agent's read-only `read_runbook` tool. The folder is `RUNBOOKS_DIR` when set; otherwise `runbooks/` in the working
directory (the container image copies it to /app/runbooks), else the repository's own `runbooks/`."""

from __future__ import annotations

from pathlib import Path

from skills.diagnosis.analyzers import KINDS
from skills.errors import InvalidInput

REPO_RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"
MAX_CHARS = 20_000  # a runbook is a page, not a book: larger files are cut (and say so)


def runbooks_dir(configured: str | None) -> Path:
    if configured:
        return Path(configured)
    here = Path.cwd() / "runbooks"
    return here if here.is_dir() else REPO_RUNBOOKS


def runbook_ref(kind: str) -> str:
    """How a finding names its runbook (the same in Slack, the console and the agent's view)."""
    return f"runbooks/{kind}.md"


def read_runbook(kind: str, configured: str | None = None) -> str:
    """The runbook of a finding kind; InvalidInput for a kind the bot does not know or a missing file."""
    if kind not in KINDS:
        raise InvalidInput(f"No finding kind `{kind[:60]}`.", "Kinds: " + ", ".join(KINDS))
    path = runbooks_dir(configured) / f"{kind}.md"  # kind is one of KINDS: no path from input reaches the disk
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        raise InvalidInput(f"No runbook for `{kind}` in {path.parent}.", "Add runbooks/<kind>.md.") from None
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS] + f"\n… (cut at {MAX_CHARS} characters)"
    return text

"""Score the deterministic diagnosis against a labelled corpus of real logs (tests/data/field_logs).

The corpus manifest lists, per log file, the root-cause kinds the diagnosis must headline and the
consequence kinds it must show as caused by one of them; empty lists mark a log that must give no finding.
`score_corpus(folder)` runs `diagnose` on every file and returns the figures the bench prints and the
acceptance test checks: exact-match rate on root causes, recall per kind, consequences placed correctly,
and findings on healthy logs (false positives).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel, Field

from skills.diagnosis.diagnose import diagnose
from skills.diagnosis.findings import Diagnosis
from skills.logs.input_format import decode_log_bytes
from skills.ports import LogEntry


class LogResult(BaseModel):
    file: str
    expected_roots: list[str]
    expected_consequences: list[str]
    roots: list[str]  # findings with no cause, as the diagnosis gave them
    consequences: list[str]  # "kind<-cause" for findings shown as consequences
    exact: bool
    consequences_ok: bool


class CorpusScore(BaseModel):
    logs: int = 0
    labelled: int = 0  # logs with at least one expected root cause
    healthy: int = 0
    exact: int = 0
    consequences_expected: int = 0
    consequences_ok: int = 0
    healthy_findings: int = 0  # findings raised on healthy logs (false positives)
    healthy_logs_flagged: int = 0
    uncovered: int = 0  # failures no kind covers (`"uncovered": true`): the diagnosis must not guess a cause
    uncovered_flagged: int = 0
    recall: dict[str, tuple[int, int]] = Field(default_factory=dict)  # kind -> (found, expected)
    results: list[LogResult] = Field(default_factory=list)

    @property
    def exact_rate(self) -> float:
        return self.exact / self.logs if self.logs else 0.0

    def misses(self) -> list[LogResult]:
        return [r for r in self.results if not r.exact or not r.consequences_ok]


def _roots_and_consequences(d: Diagnosis) -> tuple[list[str], list[str]]:
    roots, cons = [], []
    for f in d.findings:
        cause = getattr(f, "caused_by", None)
        if cause:
            cons.append(f"{f.kind}<-{cause}")
        else:
            roots.append(f.kind)
    return sorted(set(roots)), sorted(set(cons))


def diagnose_file(path: Path) -> Diagnosis:
    """The corpus is text as users pasted it: every line is a log line (a pasted fragment of JSON is text here,
    not a Cloud Logging entry to parse)."""
    text = decode_log_bytes(path.read_bytes())
    return diagnose([LogEntry(text=line) for line in text.splitlines() if line.strip()])


def score_corpus(folder: Path) -> CorpusScore:
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    score = CorpusScore()
    found: dict[str, int] = defaultdict(int)
    expected: dict[str, int] = defaultdict(int)
    for item in manifest["logs"]:
        d = diagnose_file(folder / item["file"])
        roots, cons = _roots_and_consequences(d)
        want_roots = sorted(set(item["root_causes"]))
        want_cons = sorted(set(item["consequences"]))
        # A consequence is placed right when it is shown with one of the expected root causes as its cause.
        placed = {c.split("<-")[0] for c in cons if c.split("<-")[1] in want_roots}
        cons_ok = placed >= set(want_cons) and {c.split("<-")[0] for c in cons} <= set(want_cons)
        exact = roots == want_roots
        score.logs += 1
        score.exact += exact
        if want_cons:
            score.consequences_expected += 1
            score.consequences_ok += cons_ok
        if item.get("uncovered"):
            score.uncovered += 1
            score.uncovered_flagged += bool(roots)
        elif not want_roots:
            score.healthy += 1
            score.healthy_findings += len(d.findings)
            score.healthy_logs_flagged += bool(d.findings)
        else:
            score.labelled += 1
        for k in want_roots:
            expected[k] += 1
            found[k] += k in roots
        score.results.append(
            LogResult(
                file=item["file"],
                expected_roots=want_roots,
                expected_consequences=want_cons,
                roots=roots,
                consequences=cons,
                exact=exact,
                consequences_ok=cons_ok,
            )
        )
    score.recall = {k: (found[k], expected[k]) for k in sorted(expected)}
    return score


def render(score: CorpusScore) -> str:
    lines = [
        f"logs: {score.logs} ({score.labelled} with a root cause, {score.healthy} healthy"
        + (f", {score.uncovered} failures no kind covers" if score.uncovered else "")
        + ")",
        f"exact match on root causes: {score.exact}/{score.logs} = {score.exact_rate:.1%}",
        f"consequences placed under their cause: {score.consequences_ok}/{score.consequences_expected}",
        f"false positives on healthy logs: {score.healthy_findings} findings "
        f"({score.healthy_logs_flagged}/{score.healthy} logs flagged)",
    ]
    if score.uncovered:
        lines.append(f"uncovered failures given a root cause anyway: {score.uncovered_flagged}/{score.uncovered}")
    lines += [
        "recall per kind:",
    ]
    lines += [f"  {k:32s} {f}/{n}" for k, (f, n) in score.recall.items()]
    misses = score.misses()
    if misses:
        lines.append("misses:")
        for r in misses:
            lines.append(
                f"  {r.file}: expected {r.expected_roots}"
                + (f" + {r.expected_consequences}" if r.expected_consequences else "")
                + f", got {r.roots}"
                + (f" + {r.consequences}" if r.consequences else "")
            )
    return "\n".join(lines)

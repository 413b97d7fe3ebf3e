"""Decisive lines through condensation, and the compression the digest gives (issue 32).

    python bench/condense_survival.py            # the real-logs corpus (tests/data/field_logs*) + Loghub raw logs
    python bench/condense_survival.py --mark     # (re)write each corpus log's decisive lines into its manifest

Over every log of the real-logs corpus: the share of its decisive lines (the lines the analyzers quote, marked
per log as "decisive" in the corpus manifests) that appear verbatim in the digest the product shows after
redaction (diagnose's digest: condense is told the findings' evidence), and, as "blind", in the digest that
condense makes without the findings (grouping and budget alone), with the compression the product's digest
gives: lines in / lines out and tokens in / tokens out (tokens by skills/tokens.estimate_tokens, the estimate
the budget uses). The busy healthy logs of the corpus are summed on their own: condensing them is the point
of the digest, so their compression must not fall. The corpus' busy logs are short excerpts; Loghub's
2,000-line raw logs (tests/data/loghub/*/*_2k.log, busy logs of other systems) are condensed too, as longer
busy logs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from skills.diagnosis.condense_eval import (  # noqa: E402
    CORPUS_SETS,
    Survival,
    corpus_survival,
    mark_decisive,
    survival,
)
from skills.ports import LogEntry  # noqa: E402

# Healthy logs of the corpus that show a serving engine at work (requests, throughput lines), by their notes.
BUSY_HEALTHY = (
    "healthy_club3090_93_dflash_busy.log",
    "healthy_vllm8719_a100_busy_systemd.log",
    "healthy_vllm19680_busy_single_line.log",
    "healthy_ttvllm55_busy_16_running.log",
    "healthy_vllm8031_burst_all_200.log",
    "healthy_vllm16361_v1_requests.log",
)


def _sum(rows: list[Survival]) -> str:
    li, lo = sum(r.lines_in for r in rows), sum(r.lines_out for r in rows)
    ti, to = sum(r.tokens_in for r in rows), sum(r.tokens_out for r in rows)
    return f"lines {li} -> {lo} (x{li / lo:.2f}), tokens {ti} -> {to} (x{ti / to:.2f})"


def main(argv: list[str]) -> int:
    folders = [REPO / "tests" / "data" / name for name in CORPUS_SETS]
    if "--mark" in argv:
        for folder in folders:
            print(f"{folder.name}: decisive lines marked for {mark_decisive(folder)} logs")
        return 0
    rows: list[Survival] = []
    for folder in folders:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        if not all("decisive" in item for item in manifest["logs"]):
            print(f"{folder.name}: decisive lines not marked (run with --mark)", file=sys.stderr)
            return 2
        got = corpus_survival(folder)
        rows += got
        d, s, b = sum(r.decisive for r in got), sum(r.survived for r in got), sum(r.survived_blind for r in got)
        print(f"{folder.name:<20} logs {len(got):>3}  decisive lines kept verbatim {s}/{d} (blind {b})  {_sum(got)}")
    d, s, b = sum(r.decisive for r in rows), sum(r.survived for r in rows), sum(r.survived_blind for r in rows)
    print(f"condense alone (not told the findings): {b}/{d} = {b / d:.1%} of decisive lines kept verbatim")
    per_log = [r.survived / r.decisive for r in rows if r.decisive]
    print(
        f"{'corpus':<20} logs {len(rows):>3}  decisive lines kept verbatim {s}/{d} = {s / d:.1%}"
        f" (per log, mean {sum(per_log) / len(per_log):.1%}; logs losing one: "
        f"{sum(1 for r in rows if r.survived < r.decisive)})  {_sum(rows)}"
    )
    busy = [r for r in rows if r.file in BUSY_HEALTHY]
    print(f"{'busy healthy':<20} logs {len(busy):>3}  {_sum(busy)}")
    for r in rows:
        for line in r.missing:
            print(f"  lost in {r.file}: {line[:160]}")
    loghub = []
    for log in sorted((REPO / "tests" / "data" / "loghub").glob("*/*_2k.log")):
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
        loghub.append(survival([LogEntry(text=x) for x in lines if x.strip()], [], log.parent.name))
    print("Loghub raw 2k logs (busy logs of other systems), condensed to the default 3000-token budget:")
    for r in loghub:
        print(f"  {r.file:<12} {_sum([r])}")
    print(f"  {'all':<12} {_sum(loghub)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))

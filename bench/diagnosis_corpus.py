"""How the deterministic diagnosis does on real users' logs (the labelled corpus of issue 15).

    python bench/diagnosis_corpus.py [CORPUS_DIR ...]

With no argument it scores every labelled set in tests/data, each on its own: the frozen corpus the rules were
tuned on (field_logs), the first held-out batch (field_logs_heldout), and issue 31's new logs, its tuning half
(field_logs_tuning) and its held-out half (field_logs_heldout2), and issue 52's (field_logs_issue52_tuning and
field_logs_issue52_heldout: logs written by a Windows shell, SIGTERM during start-up, quantized kernel tiles, frames
under vllm/compilation that compiled nothing). For each set it prints the exact-match rate on
root-cause kinds, recall per kind, consequences placed under their cause, false positives on healthy logs, failures
no kind covers that were given a cause anyway, and every log the diagnosis gets wrong.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from skills.diagnosis.condense_eval import CORPUS_SETS  # noqa: E402
from skills.diagnosis.corpus_eval import render, score_corpus  # noqa: E402


def main(argv: list[str]) -> int:
    folders = [Path(a) for a in argv[1:]] or [REPO / "tests" / "data" / name for name in CORPUS_SETS]
    for folder in folders:
        print(f"== {folder.name}")
        print(render(score_corpus(folder)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))

"""How the deterministic diagnosis does on real users' logs (the labelled corpus of issue 15).

    python bench/diagnosis_corpus.py [CORPUS_DIR]      (default: tests/data/field_logs)

Prints the exact-match rate on root-cause kinds, recall per kind, consequences placed under their cause,
false positives on healthy logs, and every log the diagnosis gets wrong.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from skills.diagnosis.corpus_eval import render, score_corpus  # noqa: E402


def main(argv: list[str]) -> int:
    folder = Path(argv[1]) if len(argv) > 1 else REPO / "tests" / "data" / "field_logs"
    print(render(score_corpus(folder)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))

"""Decisive lines survive condensation (issue 32): every line the analyzers quote for a real log (marked per log
as "decisive" in the corpus manifests) appears verbatim in the digest the product shows, after redaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from skills.diagnosis.condense_eval import CORPUS_SETS, corpus_survival
from skills.logs.condense import condense
from skills.ports import LogEntry

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("corpus", CORPUS_SETS)
def test_every_decisive_line_of_the_real_logs_is_shown_verbatim(corpus: str) -> None:
    rows = corpus_survival(DATA / corpus)
    assert sum(r.decisive for r in rows) > 0
    assert [(r.file, r.missing) for r in rows if r.missing] == []


def test_a_quoted_line_merged_into_a_group_is_shown_on_its_own() -> None:
    lines = [
        f"INFO Engine 000: Running: 18 reqs, Waiting: {40 + i} reqs, GPU KV cache usage: 96.{i}%" for i in range(9)
    ]
    entries = [LogEntry(text=x) for x in lines]
    quoted = lines[4]
    assert quoted not in condense(entries).text  # one group, no example for an INFO template
    assert quoted in condense(entries, keep=[quoted]).text

"""Failure texts cut to fit a message end at a word boundary with an ellipsis (a revision's message was cut
mid-word with nothing to say so), and the surfaces that cut text use it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from skills.text import shorten

ROOT = Path(__file__).resolve().parent.parent
MESSAGE = (
    "Revision 'vllm-gemma4-00002-cfc' is not ready and cannot serve traffic. The user-provided container failed "
    "the configured startup probe checks. Logs for this revision might contain more information."
)


@pytest.mark.parametrize("limit", [40, 57, 80, 120, 150, len(MESSAGE) - 1])
def test_cut_at_a_word_boundary_with_an_ellipsis(limit: int) -> None:
    out = shorten(MESSAGE, limit)
    assert len(out) <= limit and out.endswith("…")
    kept = out[:-1]
    assert MESSAGE.startswith(kept)
    assert MESSAGE[len(kept)] in " ,.;:-" or not MESSAGE[len(kept) - 1].isalnum(), (limit, out)


def test_short_text_unchanged_and_a_long_word_still_marked() -> None:
    assert shorten("ready", 20) == "ready"
    url = "https://" + "x" * 100
    assert shorten(url, 30) == url[:29] + "…"


def test_user_facing_modules_do_not_cut_text_by_slicing() -> None:
    """The revisions list, the audit and the plan results name `.message[:N]`-style cuts no more."""
    for rel in ("handlers/commands/operate.py", "handlers/commands/plans.py"):
        src = (ROOT / rel).read_text()
        assert not re.search(r"(message|detail|summary)\)?\[:\d+\]", src), rel

"""One token estimator: the log digest and the agent's context guard count the same text the same way."""

from __future__ import annotations

from bot.agent import budget
from skills.logs import condense as condense_mod
from skills.tokens import estimate_tokens

# Log text is dense with digits and punctuation: where a plain 4-characters rule and the digest's rule disagreed.
DENSE = "\n".join(f"2026-05-01T12:{i % 60:02d}:07.123Z 10.0.{i % 255}.7 GET /v1/x 503 {i * 37}ms" for i in range(200))


def test_the_agent_and_the_digest_use_the_same_estimate() -> None:
    assert budget.estimate_tokens is estimate_tokens
    assert condense_mod.estimate_tokens is estimate_tokens
    assert budget.estimate_tokens(DENSE) == estimate_tokens(DENSE)


def test_estimate_is_never_kinder_than_a_plain_character_count() -> None:
    for text in ("", "a", "The quick brown fox.", DENSE, '{"a":[1,2,3]}'):
        assert estimate_tokens(text) >= (len(text) + 3) // 4


def test_truncate_keeps_dense_text_within_its_token_budget() -> None:
    out = budget.truncate(DENSE, 300, "narrow it")
    body = out.split("\n[TRUNCATED", 1)[0]
    assert "[TRUNCATED" in out
    assert estimate_tokens(body) <= 300
    assert estimate_tokens(out) <= 300 + 60

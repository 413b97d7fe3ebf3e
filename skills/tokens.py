"""The one token estimate used everywhere (log digests, tool-result caps, the agent's context guard).

~4 characters a token for prose; digits, punctuation and symbols cost more (Gemma's SentencePiece tokenizer
splits digits one by one, and log and JSON text is dense with them), so those count as 2 characters a token.
Never below `ceil(len/4)`: a context guard must not think text smaller than a plain character count says.
Exact counts come from the server's /tokenize where it matters (bot/agent/loop.py).
"""

from __future__ import annotations

import math


def estimate_tokens(text: str) -> int:
    if not text:
        return 0
    dense = sum(1 for c in text if not c.isalpha() and c != " ")
    return math.ceil((len(text) - dense) / 4 + dense / 2)

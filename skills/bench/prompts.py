"""The bench's prompts: sized to a token target with the server's own tokenizer, each with a unique head so
nothing is prefix-cached."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from skills.errors import InvalidInput

# Counts a prompt's tokens the way the server will (vLLM's /tokenize).
TokenCount = Callable[[str], Awaitable[int]]
HEAD_WORDS = 8  # unique per request: differs inside vLLM's first KV block, so nothing is prefix-cached

# Common words that are one token each in the usual tokenizers (Gemma's included, with a leading space).
_VOCAB = (
    "the of and to in is it that for on with as was at by be this are from or have an they which one "
    "you were her all she there would their we him been has when who will more no if out so said "
    "what up its about into than them can only other new some could time these two may then do first "
    "any my now such like our over man me even most made after also did many before must through "
    "back years where much your way well down should because each just those people how too little "
    "state good very make world still own see men work long get here between both life being under "
    "never day same another know while last might us great old year off come since against go came "
    "right used take three"
).split()


def _words(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(_VOCAB) for _ in range(n)]


def _head(index: int, n: int) -> list[str]:
    """A unique run of words for request `index` (its digits in base len(_VOCAB))."""
    out = []
    for _ in range(n):
        index, d = divmod(index, len(_VOCAB))
        out.append(_VOCAB[d])
    return out


@dataclass
class PromptSet:
    """Prompts of exactly `tokens` tokens (as the server counts them): a shared body and per-request heads."""

    tokens: int
    body: list[str]
    head_words: int

    def prompt(self, index: int) -> str:
        return " ".join(_head(index, self.head_words) + self.body)


async def size_prompt(count: TokenCount, target: int, seed: int = 0, max_rounds: int = 12) -> PromptSet:
    """Grow/shrink a word list until the server's tokenizer counts `target` tokens (or the closest below)."""
    head_n = min(HEAD_WORDS, max(1, target // 4))
    n_body = max(0, target - head_n - 1)
    pool = _words(seed, target * 2 + 64)
    best: tuple[int, int] | None = None  # (tokens, body words), closest at or below target
    for _ in range(max_rounds):
        ps = PromptSet(tokens=target, body=pool[:n_body], head_words=head_n)
        got = await count(ps.prompt(0))
        if got == target:
            return ps
        if got < target and (best is None or got > best[0]):
            best = (got, n_body)
        step = target - got
        n_body = max(0, n_body + (step if abs(step) < 64 else int(n_body * step / max(got, 1))))
        n_body = min(n_body, len(pool))
    if best is None:
        raise InvalidInput(f"Could not build a prompt of {target} tokens with the server's tokenizer.")
    return PromptSet(tokens=best[0], body=pool[: best[1]], head_words=head_n)


async def verify_heads(count: TokenCount, ps: PromptSet, n_requests: int, sample: int = 6) -> bool:
    """Check a spread of request prompts has the same size (heads are one-token words, but verify)."""
    idx = sorted({int(i * (n_requests - 1) / max(1, sample - 1)) for i in range(sample)})
    got = await asyncio.gather(*(count(ps.prompt(i)) for i in idx))
    return all(g == ps.tokens for g in got)

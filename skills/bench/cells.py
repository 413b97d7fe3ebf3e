"""One sweep cell's statistics: percentiles of TTFT, inter-token latency and end-to-end time, and throughput."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, Field

from skills.ports import RequestRecord


def pct(values: Sequence[float], q: float) -> float | None:
    """Percentile with linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


class CellResult(BaseModel):
    concurrency: int
    context: int
    requests: int  # finished (ok + failed); cancelled in-flight requests are not counted
    ok: int
    success_rate: float
    duration_s: float
    req_per_s: float
    output_tok_per_s: float
    mean_prompt_tokens: float | None = None
    mean_output_tokens: float | None = None
    ttft_p50: float | None = None
    ttft_p95: float | None = None
    itl_p50: float | None = None
    itl_p95: float | None = None
    tpot_p50: float | None = None
    e2e_p50: float | None = None
    e2e_p95: float | None = None
    e2e_p99: float | None = None
    errors: dict[str, int] = Field(default_factory=dict)
    usage_missing: int = 0


def summarize_cell(concurrency: int, context: int, recs: list[RequestRecord]) -> CellResult:
    good = [r for r in recs if r.ok]
    duration = (max(r.end for r in recs) - min(r.start for r in recs)) if recs else 0.0
    out_tokens = sum(r.output_tokens for r in good)
    ttfts = [r.ttft for r in good if r.ttft is not None]
    itls = [g for r in good for g in r.itls]
    tpots = [(r.e2e - r.ttft) / (r.output_tokens - 1) for r in good if r.ttft is not None and r.output_tokens > 1]
    e2es = [r.e2e for r in good]
    return CellResult(
        concurrency=concurrency,
        context=context,
        requests=len(recs),
        ok=len(good),
        success_rate=len(good) / len(recs) if recs else 0.0,
        duration_s=duration,
        req_per_s=len(good) / duration if duration > 0 else 0.0,
        output_tok_per_s=out_tokens / duration if duration > 0 else 0.0,
        mean_prompt_tokens=sum(r.prompt_tokens for r in good) / len(good) if good else None,
        mean_output_tokens=out_tokens / len(good) if good else None,
        ttft_p50=pct(ttfts, 50),
        ttft_p95=pct(ttfts, 95),
        itl_p50=pct(itls, 50),
        itl_p95=pct(itls, 95),
        tpot_p50=pct(tpots, 50),
        e2e_p50=pct(e2es, 50),
        e2e_p95=pct(e2es, 95),
        e2e_p99=pct(e2es, 99),
        errors=dict(Counter(r.error for r in recs if not r.ok)),
        usage_missing=sum(1 for r in good if r.usage_missing),
    )

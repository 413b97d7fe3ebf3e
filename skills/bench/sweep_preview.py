"""The preview shown before a benchmark sweep runs (cells, request count, rough duration and cost); "plan" in
this codebase means a write plan (skills/deploy), so this is named for what it is."""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from skills.bench.loadgen import BenchSpec, fit_contexts
from skills.errors import InvalidInput
from skills.ports import ModelAPI, ModelAPIError
from skills.serving.vllm_flags import VllmFlags

# Rough figures for the estimate when no sweep has been measured yet (12B QAT on one L4, FIELD_NOTES).
DEFAULT_STREAM_TOK_S = 60.0
DEFAULT_PREFILL_TOK_S = 4000.0
BATCH_SLOWDOWN = 0.03  # per extra concurrent stream, per-stream decode slows by about this share


class SweepPreview(BaseModel):
    id: str
    spec: BenchSpec
    model: str
    max_model_len: int | None = None
    cells: list[tuple[int, int, int]]  # (concurrency, context, requests)
    total_requests: int
    est_duration_s: float
    usd_per_hour: float | None = None
    est_cost_usd: float | None = None
    notes: list[str] = Field(default_factory=list)
    user_id: str = ""
    channel_id: str = ""


async def server_max_model_len(client: ModelAPI, model: str) -> int | None:
    """vLLM lists `max_model_len` on each model card of /v1/models."""
    try:
        cards = await client.models()
    except ModelAPIError:
        return None
    return next((card.max_model_len for card in cards if card.id == model), None)


def max_model_len_from_args(args: list[str]) -> int | None:
    flags = VllmFlags.parse_or_none(args)
    return flags.max_model_len if flags else None


def estimate_duration_s(spec: BenchSpec, stream_tok_s: float, prefill_tok_s: float = DEFAULT_PREFILL_TOK_S) -> float:
    total = 0.0
    for conc, ctx in spec.cells():
        n = spec.cell_requests(conc)
        per_stream = stream_tok_s / (1 + BATCH_SLOWDOWN * (conc - 1))
        req_s = ctx * min(conc, n) / prefill_tok_s + spec.output_tokens / per_stream
        total += math.ceil(n / conc) * req_s
    return total


def make_preview(
    plan_id: str,
    spec: BenchSpec,
    model: str,
    max_model_len: int | None,
    usd_per_hour: float | None,
    stream_tok_s: float | None,
) -> SweepPreview:
    spec, notes = fit_contexts(spec, max_model_len)
    total = spec.total_requests()
    if total > spec.max_total_requests:
        raise InvalidInput(
            f"This sweep needs {total} requests; the cap is {spec.max_total_requests}.",
            "Use fewer cells, or a smaller --requests per cell.",
        )
    if max_model_len is None:
        notes.append("max-model-len unknown: a context too long for the server will show up as HTTP 400 errors.")
    est = estimate_duration_s(spec, stream_tok_s or DEFAULT_STREAM_TOK_S)
    notes.append(
        "Duration is a rough estimate "
        + ("from the last sweep's single-stream speed." if stream_tok_s else "(no sweep measured yet).")
    )
    if est > spec.max_duration_s:
        notes.append(
            f"The sweep stops at the duration cap of {spec.max_duration_s / 60:.0f} min; later cells may not run."
        )
    cells = [(c, ctx, spec.cell_requests(c)) for c, ctx in spec.cells()]
    cost = usd_per_hour * min(est, spec.max_duration_s) / 3600 if usd_per_hour is not None else None
    return SweepPreview(
        id=plan_id,
        spec=spec,
        model=model,
        max_model_len=max_model_len,
        cells=cells,
        total_requests=total,
        est_duration_s=est,
        usd_per_hour=usd_per_hour,
        est_cost_usd=cost,
        notes=notes,
    )

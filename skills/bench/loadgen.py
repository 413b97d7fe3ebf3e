"""Async load generator for benchmark sweeps over (concurrency x context length).

Definitions follow vLLM's `benchmark_serving` (and agree with guidellm where they overlap):
- TTFT: request sent -> first streamed chunk that carries generated text (not the first chunk).
- ITL (inter-token latency): gaps between consecutive text-bearing chunks, pooled over the cell's requests.
- TPOT: (e2e - TTFT) / (output tokens - 1) per request (guidellm calls this inter-token latency).
- E2E: request sent -> end of the stream.
- Output tokens: the server's usage (`stream_options.include_usage`), never the number of chunks.
- Requests/s and output tokens/s: successful requests (their output tokens) / the cell's wall time, from the
  first request sent to the last one finished.
Each cell is closed-loop: `concurrency` workers send requests back to back until the cell's count is done.
Requests use `/v1/completions` with `ignore_eos` so every request generates exactly `output_tokens` tokens,
and every prompt is unique in its first 16-token block so vLLM's prefix cache cannot flatter TTFT.
Times are taken when a read from the socket reaches the generator (SSE events in one read share its time);
the generator's own overhead is measured in bench/loadgen_capacity.py.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field, field_validator

from skills.errors import InvalidInput, UserFacingError
from skills.ports import RequestRecord, StreamClients, StreamExchange

MIN_REQUESTS_PER_CELL = 10
MAX_CONCURRENCY = 4096
MIN_CONTEXT = 16
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

TokenCount = Callable[[str], Awaitable[int]]
ProgressFn = Callable[["Progress"], Awaitable[None]]


class BenchSpec(BaseModel):
    concurrency: list[int] = Field(default_factory=lambda: [1, 8, 32])
    contexts: list[int] = Field(default_factory=lambda: [128, 2048, 8192])
    output_tokens: int = Field(default=128, ge=2, le=16384)  # >= 2: with 1 token a cell measures only prefill
    requests_per_cell: int | None = Field(default=None, ge=2, le=100_000)
    max_total_requests: int = Field(default=3000, ge=1)
    max_duration_s: float = Field(default=1800.0, gt=0)
    request_timeout_s: float = Field(default=300.0, gt=0)

    @field_validator("concurrency")
    @classmethod
    def _conc(cls, v: list[int]) -> list[int]:
        if not v or any(c < 1 or c > MAX_CONCURRENCY for c in v):
            raise ValueError(f"concurrency values must be 1..{MAX_CONCURRENCY}")
        return sorted(set(v))

    @field_validator("contexts")
    @classmethod
    def _ctx(cls, v: list[int]) -> list[int]:
        if not v or any(c < MIN_CONTEXT for c in v):
            raise ValueError(f"context lengths must be at least {MIN_CONTEXT} tokens")
        return sorted(set(v))

    def cell_requests(self, concurrency: int) -> int:
        """Enough requests for percentiles to mean something: at least 10, and 4 waves of the concurrency."""
        return self.requests_per_cell or max(MIN_REQUESTS_PER_CELL, 4 * concurrency)

    def cells(self) -> list[tuple[int, int]]:
        """(concurrency, context) in run order: per context, concurrency ascending."""
        return [(c, ctx) for ctx in self.contexts for c in self.concurrency]

    def total_requests(self) -> int:
        return sum(self.cell_requests(c) for c, _ in self.cells())


def fit_contexts(spec: BenchSpec, max_model_len: int | None) -> tuple[BenchSpec, list[str]]:
    """Keep prompt + output within max-model-len (a prompt of exactly max-model-len fails with any output)."""
    if not max_model_len:
        return spec, []
    limit = max_model_len - spec.output_tokens
    if limit < MIN_CONTEXT:
        raise InvalidInput(
            f"--output {spec.output_tokens} leaves no room for a prompt under max-model-len {max_model_len}.",
            "Use a smaller --output.",
        )
    notes = [
        f"context {c} -> {limit} (max-model-len {max_model_len} minus {spec.output_tokens} output tokens)"
        for c in spec.contexts
        if c > limit
    ]
    fitted = sorted({min(c, limit) for c in spec.contexts})
    return spec.model_copy(update={"contexts": fitted}), notes


# --- prompts ---------------------------------------------------------------------------------------------


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


# --- the hot path: one streamed request ---------------------------------------------------------------
#
# The HTTP client is an adapter (bot/adapters/stream_client.py, behind ports.StreamExchange): raw HTTP/1.1
# streaming on keep-alive connections, SSE parsed as bytes arrive, so the client adds little to what we time.


def _body(model: str, prompt: str, output_tokens: int) -> bytes:
    return json.dumps(
        {
            "model": model,
            "prompt": prompt,
            "max_tokens": output_tokens,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": True,
        }
    ).encode()


async def one_request(
    client: StreamExchange, model: str, prompt: str, output_tokens: int, timeout_s: float
) -> RequestRecord:
    """A streamed completion, timed: TTFT at the first read that carries text, ITLs between such reads."""
    rec = RequestRecord(ok=False)
    body = _body(model, prompt, output_tokens)
    rec.start = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            error = await client.exchange(body, rec)
    except asyncio.CancelledError:
        raise
    except TimeoutError:
        error = "timeout"
    except Exception as exc:  # noqa: BLE001 - every failure is a data point, classified by type
        error = type(exc).__name__
    if not rec.end:
        rec.end = time.perf_counter()
    rec.error = error
    if error:
        return rec
    rec.ok = True
    if not rec.output_tokens:  # a server without include_usage: chunks are the best we have
        rec.usage_missing = True
        rec.output_tokens = 1 + len(rec.itls)
    return rec


# --- cells and sweeps ------------------------------------------------------------------------------------


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


class Progress(BaseModel):
    phase: str  # "sizing prompts" | "running" | "done"
    cell_index: int = 0  # 1-based; 0 before the first cell
    cells: int = 0
    concurrency: int = 0
    context: int = 0
    done_requests: int = 0
    total_requests: int = 0
    elapsed_s: float = 0.0


class SweepResult(BaseModel):
    id: str
    model: str
    started_at: datetime
    finished_at: datetime | None = None
    spec: BenchSpec
    cells: list[CellResult] = Field(default_factory=list)
    stopped: str = ""  # why it ended early: "cancelled" | "duration cap" | ""
    notes: list[str] = Field(default_factory=list)


async def _wait_stop(stop: asyncio.Event, deadline: float) -> str:
    try:
        async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
            await stop.wait()
        return "cancelled"
    except TimeoutError:
        return "duration cap"


async def run_cell(
    client: StreamExchange,
    model: str,
    prompts: PromptSet,
    n_requests: int,
    concurrency: int,
    output_tokens: int,
    timeout_s: float,
    *,
    first_index: int = 0,
    stop: asyncio.Event | None = None,
    deadline: float = math.inf,
    on_request_done: Callable[[], None] | None = None,
    ramp_s: float = 0.0,
) -> tuple[list[RequestRecord], str]:
    """Run one cell closed-loop. Returns the finished records and why it stopped early ('' if it did not).

    With `ramp_s`, worker k starts k/concurrency x ramp_s late (spread over the ramp), so the closed loop
    settles with requests spread in time instead of in lockstep waves; by default all start at once.
    """
    records: list[RequestRecord] = []
    next_i = 0
    n_workers = min(concurrency, n_requests)

    async def worker(k: int) -> None:
        nonlocal next_i
        if ramp_s > 0 and k:
            await asyncio.sleep(ramp_s * k / n_workers)
        while next_i < n_requests:
            i = next_i
            next_i += 1
            rec = await one_request(client, model, prompts.prompt(first_index + i), output_tokens, timeout_s)
            rec.index = first_index + i
            records.append(rec)
            if on_request_done is not None:
                on_request_done()

    workers = asyncio.gather(*(worker(k) for k in range(n_workers)))
    stopper = asyncio.ensure_future(_wait_stop(stop or asyncio.Event(), deadline))
    try:
        both: set[asyncio.Future[Any]] = {workers, stopper}
        await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)
    finally:
        reason = ""
        if not workers.done():
            reason = stopper.result() if stopper.done() else "cancelled"
            workers.cancel()
            await asyncio.gather(workers, return_exceptions=True)
        stopper.cancel()
        await asyncio.gather(stopper, return_exceptions=True)
    if not reason and (exc := workers.exception()) is not None:
        raise exc
    return records, reason


async def run_sweep(
    clients: StreamClients,
    model: str,
    count_tokens: TokenCount,
    spec: BenchSpec,
    sweep_id: str,
    *,
    stop: asyncio.Event | None = None,
    on_progress: ProgressFn | None = None,
    progress_every_s: float = 2.0,
) -> SweepResult:
    """Size prompts with the server's tokenizer, then run every cell; stop early on `stop` or the time cap.

    `clients` opens the connection pool to the endpoint (with its auth), sized for the largest concurrency.
    """
    streams = await clients.open(max(spec.concurrency))
    try:
        return await _sweep(streams, model, count_tokens, spec, sweep_id, stop, on_progress, progress_every_s)
    finally:
        await streams.aclose()


async def _sweep(
    client: StreamExchange,
    model: str,
    count_tokens: TokenCount,
    spec: BenchSpec,
    sweep_id: str,
    stop: asyncio.Event | None,
    on_progress: ProgressFn | None,
    progress_every_s: float,
) -> SweepResult:
    t_start = time.monotonic()
    deadline = t_start + spec.max_duration_s
    result = SweepResult(id=sweep_id, model=model, started_at=datetime.now(UTC), spec=spec)
    cells = spec.cells()
    total = spec.total_requests()
    if total > spec.max_total_requests:
        raise InvalidInput(
            f"The sweep needs {total} requests; the cap is {spec.max_total_requests}.",
            "Use fewer cells or a smaller --requests.",
        )
    prog = Progress(phase="sizing prompts", cells=len(cells), total_requests=total)
    if on_progress:
        await on_progress(prog)

    prompt_sets: dict[int, PromptSet] = {}
    for ctx in spec.contexts:
        ps = await size_prompt(count_tokens, ctx, seed=ctx)
        n_ctx = sum(spec.cell_requests(c) for c, x in cells if x == ctx)
        if ps.tokens != ctx:
            result.notes.append(f"context {ctx}: the closest prompt the tokenizer allowed is {ps.tokens} tokens")
        if not await verify_heads(count_tokens, ps, n_ctx):
            result.notes.append(f"context {ctx}: per-request prompt heads vary in size by a token or so")
        prompt_sets[ctx] = ps

    # One uncounted request first (as benchmark_serving does): opens a connection and fails fast if the
    # endpoint cannot serve the sweep at all.
    warm = await one_request(client, model, prompt_sets[spec.contexts[0]].prompt(10**9), 2, spec.request_timeout_s)
    if not warm.ok:
        raise UserFacingError(
            f"The warm-up request failed ({warm.error}); the sweep did not start.",
            "Check `/gemma health` and that the model id and max-model-len fit the sweep.",
        )

    last_report = 0.0
    pending: set[asyncio.Task[None]] = set()

    def request_done() -> None:
        nonlocal last_report
        prog.done_requests += 1
        now = time.monotonic()
        if on_progress and now - last_report >= progress_every_s:
            last_report = now
            prog.elapsed_s = now - t_start
            task = asyncio.ensure_future(on_progress(prog.model_copy()))
            pending.add(task)
            task.add_done_callback(pending.discard)

    index = 0
    for n, (conc, ctx) in enumerate(cells, start=1):
        n_req = spec.cell_requests(conc)
        prog.phase, prog.cell_index, prog.concurrency, prog.context = "running", n, conc, ctx
        prog.elapsed_s = time.monotonic() - t_start
        if on_progress:
            await on_progress(prog.model_copy())
        recs, reason = await run_cell(
            client,
            model,
            prompt_sets[ctx],
            n_req,
            conc,
            spec.output_tokens,
            spec.request_timeout_s,
            first_index=index,
            stop=stop,
            deadline=deadline,
            on_request_done=request_done,
        )
        index += n_req
        if recs:
            result.cells.append(summarize_cell(conc, ctx, recs))
        if reason:
            result.stopped = reason
            break
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
    result.finished_at = datetime.now(UTC)
    prog.phase, prog.elapsed_s = "done", time.monotonic() - t_start
    if on_progress:
        await on_progress(prog)
    return result

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
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field, field_validator

from skills.bench.cells import CellResult, summarize_cell
from skills.bench.prompts import PromptSet, TokenCount, size_prompt, verify_heads
from skills.errors import InvalidInput, UserFacingError
from skills.ports import RequestRecord, StreamClients, StreamExchange

MIN_REQUESTS_PER_CELL = 10
MAX_CONCURRENCY = 4096
MIN_CONTEXT = 16


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
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> tuple[list[RequestRecord], str]:
    """Run one cell closed-loop. Returns the finished records and why it stopped early ('' if it did not).

    With `ramp_s`, worker k starts k/concurrency x ramp_s late (spread over the ramp, waiting on `sleep`), so
    the closed loop settles with requests spread in time instead of in lockstep waves; by default all start
    at once.
    """
    records: list[RequestRecord] = []
    next_i = 0
    n_workers = min(concurrency, n_requests)

    async def worker(k: int) -> None:
        nonlocal next_i
        if ramp_s > 0 and k:
            await sleep(ramp_s * k / n_workers)
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

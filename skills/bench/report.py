"""Benchmark results as a table, a CSV, PNG charts, and a Redis history for `bench compare`."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable

from skills.bench.cells import CellResult
from skills.bench.loadgen import SweepResult
from skills.capacity.cost import Measured, Rate
from skills.ports import Store

HISTORY_KEEP = 20

CSV_COLUMNS = [
    "concurrency",
    "context",
    "requests",
    "ok",
    "success_rate",
    "duration_s",
    "req_per_s",
    "output_tok_per_s",
    "mean_prompt_tokens",
    "mean_output_tokens",
    "ttft_p50",
    "ttft_p95",
    "itl_p50",
    "itl_p95",
    "tpot_p50",
    "e2e_p50",
    "e2e_p95",
    "e2e_p99",
    "errors",
]


def to_csv(result: SweepResult) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(CSV_COLUMNS)
    for c in result.cells:
        row = c.model_dump()
        row["errors"] = ";".join(f"{k}={v}" for k, v in sorted(c.errors.items()))
        w.writerow(
            ["" if row[k] is None else (f"{row[k]:.6g}" if isinstance(row[k], float) else row[k]) for k in CSV_COLUMNS]
        )
    return buf.getvalue().encode()


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v * 1000:.0f}"


def table(result: SweepResult) -> str:
    """A fixed-width table for a code block (latencies in ms)."""
    head = f"{'conc':>5} {'ctx':>6} {'ok':>7} {'TTFT50':>7} {'TTFT95':>7} {'ITL50':>6} {'ITL95':>6} "
    head += f"{'E2E50':>7} {'E2E95':>7} {'E2E99':>7} {'req/s':>7} {'tok/s':>8}"
    lines = [head]
    for c in result.cells:
        lines.append(
            f"{c.concurrency:>5} {c.context:>6} {c.success_rate:>6.0%} "
            f"{_ms(c.ttft_p50):>7} {_ms(c.ttft_p95):>7} "
            f"{_ms(c.itl_p50):>6} {_ms(c.itl_p95):>6} "
            f"{_ms(c.e2e_p50):>7} {_ms(c.e2e_p95):>7} {_ms(c.e2e_p99):>7} "
            f"{c.req_per_s:>7.2f} {c.output_tok_per_s:>8.1f}"
        )
    return "\n".join(lines)


def error_summary(result: SweepResult) -> str:
    lines = []
    for c in result.cells:
        if c.errors:
            errs = ", ".join(f"{k} x{v}" for k, v in sorted(c.errors.items(), key=lambda kv: -kv[1]))
            lines.append(f"conc {c.concurrency} / ctx {c.context}: {errs}")
    return "\n".join(lines)


def charts(result: SweepResult) -> dict[str, bytes]:
    """PNG charts: latency vs concurrency per context, and throughput vs concurrency."""
    import matplotlib

    matplotlib.use("Agg")  # no display: render straight to PNG bytes
    import matplotlib.pyplot as plt

    by_ctx: dict[int, list[CellResult]] = {}
    for c in result.cells:
        by_ctx.setdefault(c.context, []).append(c)
    out: dict[str, bytes] = {}

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    metrics: list[tuple[str, Callable[[CellResult], float | None], Callable[[CellResult], float | None]]] = [
        ("TTFT (ms)", lambda c: c.ttft_p50, lambda c: c.ttft_p95),
        ("Inter-token latency (ms)", lambda c: c.itl_p50, lambda c: c.itl_p95),
        ("End-to-end latency (s)", lambda c: c.e2e_p50, lambda c: c.e2e_p95),
    ]
    for ax, (label, p50, p95) in zip(axes, metrics, strict=True):
        scale = 1.0 if label.endswith("(s)") else 1000.0
        for ctx, cells in sorted(by_ctx.items()):
            cells = sorted(cells, key=lambda c: c.concurrency)
            xs = [c.concurrency for c in cells]
            line = ax.plot(xs, [_scaled(p50(c), scale) for c in cells], marker="o", label=f"ctx {ctx} p50")[0]
            ax.plot(
                xs,
                [_scaled(p95(c), scale) for c in cells],
                ls="--",
                color=line.get_color(),
                label=f"ctx {ctx} p95",
            )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency")
        ax.set_title(label)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{result.model}: latency vs concurrency")
    fig.tight_layout()
    out["latency.png"] = _png(fig)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ctx, cells in sorted(by_ctx.items()):
        cells = sorted(cells, key=lambda c: c.concurrency)
        xs = [c.concurrency for c in cells]
        axes[0].plot(xs, [c.output_tok_per_s for c in cells], marker="o", label=f"ctx {ctx}")
        axes[1].plot(xs, [c.req_per_s for c in cells], marker="o", label=f"ctx {ctx}")
    for ax, title in zip(axes, ("Output tokens/s", "Requests/s"), strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{result.model}: throughput vs concurrency")
    fig.tight_layout()
    out["throughput.png"] = _png(fig)
    plt.close(fig)
    return out


def _scaled(v: float | None, k: float) -> float:
    return float("nan") if v is None else v * k


def _png(fig: object) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)  # type: ignore[attr-defined]
    return buf.getvalue()


# --- history -----------------------------------------------------------------------------------------------


async def save_sweep(store: Store, key: str, result: SweepResult) -> None:
    """Newest first, capped list of sweeps."""
    await store.lpush(key, result.model_dump_json())
    await store.ltrim(key, 0, HISTORY_KEEP - 1)


async def recent_sweeps(store: Store, key: str, n: int = 2) -> list[SweepResult]:
    raw = await store.lrange(key, 0, n - 1)
    return [SweepResult.model_validate_json(r) for r in raw]


def best_throughput(result: SweepResult) -> tuple[CellResult | None, CellResult | None]:
    """(single-stream cell, best batched cell) by output tokens/s, among cells that fully succeeded."""
    good = [c for c in result.cells if c.ok and c.success_rate >= 0.99]
    single = [c for c in good if c.concurrency == 1]
    s = max(single, key=lambda c: c.output_tok_per_s) if single else None
    b = max(good, key=lambda c: c.output_tok_per_s) if good else None
    return s, b


def measured(result: SweepResult) -> Measured:
    """A sweep's best throughputs as plain values, for the price list (skills/capacity/cost.py)."""

    def rate(cell: CellResult | None) -> Rate | None:
        if cell is None:
            return None
        return Rate(concurrency=cell.concurrency, context=cell.context, output_tok_per_s=cell.output_tok_per_s)

    single, best = best_throughput(result)
    return Measured(sweep_id=result.id, model=result.model, single_stream=rate(single), batched=rate(best))


def _change(new: float | None, old: float | None, lower_is_better: bool, judge: bool = True) -> str:
    if new is None or old is None or old == 0:
        return "—"
    d = (new - old) / old
    better = (d < 0) if lower_is_better else (d > 0)
    mark = "" if abs(d) < 0.05 or not judge else (" better" if better else " WORSE")
    return f"{d:+.0%}{mark}"


def unlike(new: SweepResult, old: SweepResult) -> list[str]:
    """What makes two sweeps measure different things (then their figures are not judged better or worse)."""
    out = []
    if new.spec.output_tokens != old.spec.output_tokens:
        out.append(f"output {new.spec.output_tokens} vs {old.spec.output_tokens} tokens per request")
    if new.model != old.model:
        out.append(f"model {new.model} vs {old.model}")
    return out


def compare(new: SweepResult, old: SweepResult) -> str:
    """Per matching cell: change in TTFT p50, E2E p95 and output tok/s (>5% marked better/WORSE) between like
    sweeps; unlike ones (another output length or model) are labelled so and not judged."""
    olds = {(c.concurrency, c.context): c for c in old.cells}
    differs = unlike(new, old)
    judge = not differs
    lines = [f"UNLIKE RUNS ({'; '.join(differs)}): changes shown, not judged"] if differs else []
    lines.append(f"{'conc':>5} {'ctx':>6} {'TTFT50':>13} {'E2E95':>13} {'tok/s':>13} {'success':>9}")
    for c in new.cells:
        o = olds.get((c.concurrency, c.context))
        if o is None:
            lines.append(f"{c.concurrency:>5} {c.context:>6}   (no matching cell in the previous sweep)")
            continue
        lines.append(
            f"{c.concurrency:>5} {c.context:>6} {_change(c.ttft_p50, o.ttft_p50, True, judge):>13} "
            f"{_change(c.e2e_p95, o.e2e_p95, True, judge):>13} "
            f"{_change(c.output_tok_per_s, o.output_tok_per_s, False, judge):>13} "
            f"{c.success_rate - o.success_rate:>+8.0%}"
        )
    return "\n".join(lines)

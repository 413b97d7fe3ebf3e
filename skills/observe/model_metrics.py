"""The model server's own `/metrics` (Prometheus text), read with prometheus-client's parser.

Counters and histograms in `/metrics` are cumulative since the server started. Rates and "recent" latency
percentiles therefore need two scrapes: each `/gemma metrics` stores its scrape in Redis, and the next one
(within `max_window_s`) reports rates and percentiles over the interval between the two. Without a recent
previous scrape the figures are averages since the server started (`process_start_time_seconds`), and the
report says which window it used.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict

from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel, Field

from skills.durations import format_duration
from skills.errors import UserFacingError
from skills.ports import ModelServer, Store

KV_USAGE_WARN = 0.85

# Current names first, then the names older vLLM releases used.
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
TTFT = ("vllm:time_to_first_token_seconds",)
ITL = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
E2E = ("vllm:e2e_request_latency_seconds",)
QUEUE = ("vllm:request_queue_time_seconds",)
COUNTERS = (
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:num_preemptions_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
)


class Histo(BaseModel):
    """Cumulative bucket counts by upper bound (+Inf included), summed over label sets."""

    buckets: dict[float, float] = Field(default_factory=dict)
    count: float = 0.0
    sum: float = 0.0

    def minus(self, older: Histo | None) -> Histo:
        if older is None:
            return self
        return Histo(
            buckets={le: v - older.buckets.get(le, 0.0) for le, v in self.buckets.items()},
            count=self.count - older.count,
            sum=self.sum - older.sum,
        )


class Snapshot(BaseModel):
    """One scrape reduced to the numbers we use (so it can be stored and diffed)."""

    at: float  # unix time of the scrape
    gauges: dict[str, float] = Field(default_factory=dict)
    counters: dict[str, float] = Field(default_factory=dict)
    histograms: dict[str, Histo] = Field(default_factory=dict)
    cache_config: dict[str, str] = Field(default_factory=dict)
    process_start: float | None = None


class Percentiles(BaseModel):
    count: float
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None


class ModelMetrics(BaseModel):
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None
    kv_metric: str = ""  # which metric name the server exposed
    kv_capacity_tokens: int | None = None
    kv_capacity_source: str = ""  # "kv_cache_size_tokens" (vLLM's own count) or "blocks x block_size"
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    cache_dtype: str = ""
    ttft: Percentiles | None = None
    itl: Percentiles | None = None
    e2e: Percentiles | None = None
    queue: Percentiles | None = None
    preemptions: float | None = None  # in the window
    prefix_cache_hit_rate: float | None = None  # in the window
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    window: str = ""  # what the rates and percentiles cover, in words
    window_s: float | None = None
    flags: list[str] = Field(default_factory=list)
    scraped_at: float


def parse_snapshot(text: str, at: float | None = None) -> Snapshot:
    """Reduce Prometheus exposition text to a Snapshot; UserFacingError if it is not Prometheus text."""
    gauges: dict[str, float] = defaultdict(float)
    counters: dict[str, float] = defaultdict(float)
    buckets: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    hcount: dict[str, float] = defaultdict(float)
    hsum: dict[str, float] = defaultdict(float)
    kv_max: dict[str, float] = {}
    snap = Snapshot(at=at if at is not None else time.time())
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError) as exc:
        raise UserFacingError(
            f"The model server's /metrics is not Prometheus text ({exc}).", "Is VLLM_BASE_URL a vLLM server?"
        ) from None
    for fam in families:
        for s in fam.samples:
            name, value = s.name, float(s.value)
            if math.isnan(value):
                continue
            if name == "vllm:cache_config_info":
                snap.cache_config = dict(s.labels)
            elif name == "process_start_time_seconds":
                snap.process_start = value
            elif fam.type == "histogram" and name.startswith("vllm:"):
                if name.endswith("_bucket"):
                    le = s.labels.get("le", "+Inf")
                    buckets[name[: -len("_bucket")]][float(le)] += value
                elif name.endswith("_count"):
                    hcount[name[: -len("_count")]] += value
                elif name.endswith("_sum"):
                    hsum[name[: -len("_sum")]] += value
            elif name in KV_USAGE:
                # One engine near full is what matters, so the max over engines, not a sum.
                kv_max[name] = max(kv_max.get(name, 0.0), value)
            elif fam.type == "gauge" and name.startswith("vllm:"):
                gauges[name] += value
            elif fam.type == "counter" and name.endswith("_total"):
                counters[name] += value
    gauges.update(kv_max)
    snap.gauges = dict(gauges)
    snap.counters = dict(counters)
    snap.histograms = {
        n: Histo(buckets=dict(b), count=hcount.get(n, 0.0), sum=hsum.get(n, 0.0)) for n, b in buckets.items()
    }
    if not snap.gauges and not snap.histograms and not snap.counters:
        raise UserFacingError(
            "The model server's /metrics has no vLLM metrics.",
            "Is VLLM_BASE_URL a vLLM server (vllm/vllm-openai)?",
        )
    return snap


def histogram_quantile(q: float, h: Histo) -> float | None:
    """Prometheus' histogram_quantile: linear interpolation inside the bucket that holds rank q x count."""
    bounds = sorted(h.buckets)
    if not bounds:
        return None
    total = h.buckets[bounds[-1]] if math.isinf(bounds[-1]) else max(h.buckets.values())
    if total <= 0:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for le in bounds:
        cum = h.buckets[le]
        if cum >= rank:
            if math.isinf(le):
                return prev_bound  # in the overflow bucket: the largest finite bound is all we know
            if cum == prev_count:
                return le
            return prev_bound + (le - prev_bound) * (rank - prev_count) / (cum - prev_count)
        prev_bound, prev_count = le, cum
    return prev_bound


def percentiles(h: Histo | None) -> Percentiles | None:
    if h is None or h.count <= 0:
        return None
    return Percentiles(
        count=h.count,
        mean=h.sum / h.count,
        p50=histogram_quantile(0.50, h),
        p90=histogram_quantile(0.90, h),
        p95=histogram_quantile(0.95, h),
        p99=histogram_quantile(0.99, h),
    )


def _first(d: dict[str, Histo], names: tuple[str, ...]) -> Histo | None:
    for n in names:
        if n in d:
            return d[n]
    return None


def summarize(cur: Snapshot, prev: Snapshot | None = None) -> ModelMetrics:
    """Gauges from `cur`; rates and percentiles over cur - prev, or since the server started without prev."""
    m = ModelMetrics(scraped_at=cur.at)
    g = cur.gauges
    m.running = g.get("vllm:num_requests_running")
    m.waiting = g.get("vllm:num_requests_waiting")
    for name in KV_USAGE:
        if name in g:
            m.kv_usage, m.kv_metric = g[name], name
            break
    cc = cur.cache_config
    try:
        m.num_gpu_blocks = int(cc["num_gpu_blocks"]) if cc.get("num_gpu_blocks") not in (None, "", "None") else None
        m.block_size = int(cc["block_size"]) if cc.get("block_size") not in (None, "", "None") else None
    except ValueError:
        pass
    m.cache_dtype = cc.get("cache_dtype", "")
    # vLLM's own token count where the server exposes it (newer servers label cache_config_info with
    # kv_cache_size_tokens beside num_gpu_blocks: vllm-project/vllm PR #53902's description): blocks x block
    # size overstates hybrid models, whose KV-cache groups share the block pool (skills/capacity/kv_accounting.py).
    sized = cc.get("kv_cache_size_tokens", "")
    if sized.isdigit():
        m.kv_capacity_tokens, m.kv_capacity_source = int(sized), "kv_cache_size_tokens"
    elif m.num_gpu_blocks and m.block_size:
        m.kv_capacity_tokens, m.kv_capacity_source = m.num_gpu_blocks * m.block_size, "blocks x block_size"

    # A restart resets counters; a diff across it would be negative, so fall back to lifetime figures.
    if prev is not None and (cur.at <= prev.at or any(cur.counters.get(k, 0) < v for k, v in prev.counters.items())):
        prev = None
    if prev is not None:
        window_s = cur.at - prev.at
        m.window = f"over the last {format_duration(window_s, 'approx')} (between two scrapes)"
    elif cur.process_start:
        window_s = cur.at - cur.process_start
        started = format_duration(window_s, "approx")
        m.window = f"since the server started {started} ago (averages; run again for a recent window)"
    else:
        window_s = None
        m.window = "since the server started (cumulative; run again for rates over a recent window)"
    m.window_s = window_s

    def delta(name: str) -> float | None:
        if name not in cur.counters:
            return None
        return cur.counters[name] - (prev.counters.get(name, 0.0) if prev else 0.0)

    hists = {n: h.minus(prev.histograms.get(n) if prev else None) for n, h in cur.histograms.items()}
    m.ttft = percentiles(_first(hists, TTFT))
    m.itl = percentiles(_first(hists, ITL))
    m.e2e = percentiles(_first(hists, E2E))
    m.queue = percentiles(_first(hists, QUEUE))
    m.preemptions = delta("vllm:num_preemptions_total")
    queries, hits = delta("vllm:prefix_cache_queries_total"), delta("vllm:prefix_cache_hits_total")
    if queries and hits is not None:
        m.prefix_cache_hit_rate = hits / queries
    elif "vllm:gpu_prefix_cache_hit_rate" in g:  # older servers export the ratio as a gauge
        m.prefix_cache_hit_rate = g["vllm:gpu_prefix_cache_hit_rate"]
    if window_s and window_s > 0:
        pt, gt = delta("vllm:prompt_tokens_total"), delta("vllm:generation_tokens_total")
        m.prompt_tokens_per_s = pt / window_s if pt is not None else None
        m.generation_tokens_per_s = gt / window_s if gt is not None else None
    m.flags = flags(m)
    return m


def flags(m: ModelMetrics, kv_cache_fp8: bool | None = None) -> list[str]:
    """Advice from the figures; `kv_cache_fp8`: whether the running service already stores its KV cache in fp8
    (from the flags it runs with; None: not known), so the advice never names what is already done."""
    out = []
    if m.kv_usage is not None and m.kv_usage > KV_USAGE_WARN:
        fp8 = "" if kv_cache_fp8 else "use --kv-cache-dtype fp8, "
        out.append(
            f"KV cache {m.kv_usage:.0%} full (> {KV_USAGE_WARN:.0%}): new requests will queue or preempt; "
            f"lower --max-num-seqs / max-model-len, {fp8}or add instances."
        )
    if m.waiting:
        out.append(
            f"{m.waiting:.0f} request(s) waiting: the server is at its batch limit; "
            "if this lasts over 30 s raise "
            "--max-num-seqs (KV permitting) or max-instances."
        )
    if m.preemptions:
        out.append(f"{m.preemptions:.0f} preemption(s) {m.window}: KV cache pressure (requests were recomputed).")
    return out


async def collect_model_metrics(
    model_server: ModelServer,
    base_url: str,
    store: Store | None = None,
    key: str = "",
    max_window_s: float = 900.0,
    kv_cache_fp8: bool | None = None,
) -> ModelMetrics:
    """Scrape, summarise against the previous stored scrape (if fresh), and store this one for next time."""
    text = await model_server.metrics_text(base_url)
    cur = parse_snapshot(text)
    prev: Snapshot | None = None
    if store is not None and key:
        raw = await store.get(key)
        if raw:
            try:
                prev = Snapshot.model_validate_json(raw)
            except ValueError:
                prev = None
        if prev is not None and cur.at - prev.at > max_window_s:
            prev = None
        await store.set(key, cur.model_dump_json(), ex=int(max_window_s) + 60)
    m = summarize(cur, prev)
    m.flags = flags(m, kv_cache_fp8)
    return m

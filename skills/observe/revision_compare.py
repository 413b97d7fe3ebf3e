"""A canary beside the revision it may replace: per-revision evidence over a window, and a verdict.

Two sources, each per revision:
- vLLM's own /metrics, scraped at each revision's tagged URL (a traffic tag gives a revision its own URL, so the
  scrape reaches that revision's instances only): finished requests and latency percentiles from
  `vllm:e2e_request_latency_seconds`, time to first token from `vllm:time_to_first_token_seconds` (histograms,
  differenced between the window's first and latest scrape), KV-cache usage and waiting requests (gauges, now).
- Cloud Monitoring's `run.googleapis.com/request_count` for that revision (the cloud_run_revision resource's
  `revision_name` label), grouped by `response_code_class`: the error rate as Cloud Run saw it, including errors
  vLLM never logs (a request refused before it reached the container).

Sources: vLLM's metric names as skills/observe/model_metrics.py reads them (vLLM's metrics design doc); the
cloud_run_revision monitored resource's labels (project_id, service_name, revision_name, location, configuration_name:
https://cloud.google.com/monitoring/api/resources#tag_cloud_run_revision) and request_count's response_code_class
label (https://cloud.google.com/monitoring/api/metrics_gcp#gcp-run).

No verdict before both revisions finished `min_requests` requests in the window: "not enough traffic yet".
The thresholds are this bot's policy (CANARY_* settings), not vLLM's or Google's numbers.
"""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import BaseModel, Field

from skills.errors import UserFacingError
from skills.observe.model_metrics import Percentiles, Snapshot, parse_snapshot, summarize
from skills.ports import Metrics, ModelServer

log = logging.getLogger(__name__)

Verdict = Literal["not_enough_traffic", "holds", "regresses"]


class Thresholds(BaseModel):
    min_requests: int = Field(default=50, ge=1)
    # The canary's error rate may exceed the baseline's by at most this much (absolute: 0.01 = 1 point).
    max_error_rate_increase: float = Field(default=0.01, ge=0)
    # p95 end-to-end latency and p95 TTFT may be at most this many times the baseline's.
    max_latency_ratio: float = Field(default=1.5, gt=1)


class RevisionEvidence(BaseModel):
    revision: str
    role: Literal["baseline", "canary"]
    requests: float = 0.0  # finished in the window (vLLM's e2e histogram count)
    served: float | None = None  # Cloud Run's request rate over the window (per second), all classes
    error_rate: float | None = None  # 5xx share of Cloud Run's requests; None: Monitoring not read
    e2e: Percentiles | None = None
    ttft: Percentiles | None = None
    kv_usage: float | None = None
    waiting: float | None = None
    problems: list[str] = Field(default_factory=list)  # a source that could not be read, and why


class Comparison(BaseModel):
    baseline: RevisionEvidence
    canary: RevisionEvidence
    verdict: Verdict
    reasons: list[str] = Field(default_factory=list)
    window_s: float = 0.0
    min_requests: int = 0


async def scrape(model_server: ModelServer, url: str, at: float) -> Snapshot:
    return parse_snapshot(await model_server.metrics_text(url), at=at)


async def cloud_run_error_rate(
    metrics: Metrics, service: str, revision: str, minutes: int
) -> tuple[float | None, float | None]:
    """(requests per second, 5xx share) of one revision over the last `minutes`, from request_count grouped by
    response_code_class; (None, None) when no request was counted."""
    series = await metrics.series(service, "request_count", minutes, revision=revision)
    total = errors = 0.0
    for s in series:
        rate = sum(p.value for p in s.points)
        total += rate
        if s.labels.get("response_code_class") == "5xx":
            errors += rate
    if total <= 0:
        return None, None
    points = max((len(s.points) for s in series), default=1) or 1
    return total / points, errors / total


def evidence(
    revision: str,
    role: Literal["baseline", "canary"],
    first: Snapshot | None,
    latest: Snapshot | None,
) -> RevisionEvidence:
    ev = RevisionEvidence(revision=revision, role=role)
    if latest is None:
        ev.problems.append("vLLM /metrics not read")
        return ev
    m = summarize(latest, first)
    ev.kv_usage, ev.waiting = m.kv_usage, m.waiting  # gauges: now
    if first is latest:  # the window opens with this scrape: nothing in it yet (not the server's lifetime)
        return ev
    ev.e2e, ev.ttft = m.e2e, m.ttft
    ev.requests = m.e2e.count if m.e2e else 0.0
    return ev


def compare(base: RevisionEvidence, canary: RevisionEvidence, th: Thresholds, window_s: float) -> Comparison:
    out = Comparison(baseline=base, canary=canary, verdict="holds", window_s=window_s, min_requests=th.min_requests)
    short = [e for e in (base, canary) if e.requests < th.min_requests]
    if short:
        out.verdict = "not_enough_traffic"
        out.reasons = [
            f"`{e.revision}` ({e.role}) finished {e.requests:.0f} of the {th.min_requests} requests needed"
            for e in short
        ]
        return out
    reasons = []
    if base.error_rate is not None and canary.error_rate is not None:
        if canary.error_rate - base.error_rate > th.max_error_rate_increase:
            reasons.append(
                f"error rate {canary.error_rate:.1%} against {base.error_rate:.1%} "
                f"(more than {th.max_error_rate_increase:.1%} above)"
            )
    for what, a, b in (("p95 latency", base.e2e, canary.e2e), ("p95 time to first token", base.ttft, canary.ttft)):
        if a is not None and b is not None and a.p95 and b.p95 and b.p95 > a.p95 * th.max_latency_ratio:
            reasons.append(f"{what} {b.p95:.2f} s against {a.p95:.2f} s ({b.p95 / a.p95:.1f}x)")
    if reasons:
        out.verdict, out.reasons = "regresses", reasons
    return out


async def gather(
    model_server: ModelServer,
    metrics: Metrics | None,
    service: str,
    revision: str,
    role: Literal["baseline", "canary"],
    url: str,
    first: Snapshot | None,
    at: float,
    window_minutes: int,
) -> tuple[RevisionEvidence, Snapshot | None]:
    """One revision's evidence since `first`, and its latest scrape (the window's start when `first` is None).
    A source that fails is named in `problems`; the comparison then goes on with what it has."""
    latest: Snapshot | None = None
    problem = ""
    if url:
        try:
            latest = await scrape(model_server, url, at)
        except UserFacingError as exc:
            problem = f"vLLM /metrics at the `{role}` tag's URL: {exc.message}"
    else:
        problem = f"no tagged URL for `{revision}` yet"
    # The first scrape opens the window: what the revision served before it is not counted.
    ev = evidence(revision, role, first if first is not None else latest, latest)
    if problem:
        ev.problems = [problem]
    # The window opens with this first scrape: no request in it yet, so no error share either (Cloud Monitoring's
    # over the minutes before would sit beside a count of 0).
    if metrics is not None and first is not None:
        try:
            ev.served, ev.error_rate = await cloud_run_error_rate(metrics, service, revision, window_minutes)
        except UserFacingError as exc:
            ev.problems.append(f"Cloud Monitoring: {exc.message}")
    return ev, latest

"""Simulated user traffic split between revisions: what a canary meets in the sandbox.

While the service's traffic is split (a canary), requests arrive at `rate_per_s` on the sandbox clock and go to
each revision in proportion to its percent. Each revision has its own vLLM simulator (its /metrics is what the
revision's tagged URL answers: `{urls['revisions']}/r/REVISION/...`), whose histograms and gauges move with the
requests it gets, and its own Cloud Monitoring `request_count` series (2xx and 5xx, labelled with the
cloud_run_revision resource's `revision_name`). How a revision behaves is its Behaviour: the stable revision and a
canary that holds serve alike; a canary armed by `canary-regresses` is slower and fails some requests.
The figures are the sandbox's own inventions, shaped like a small model on one L4 (seconds, not measurements).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from bot.sandbox.clock import SandboxClock
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.monitoring_grpc import MonitoringStandIn
from bot.sandbox.vllm_sim import SimConfig, VllmSim

ASGIApp = Callable[[MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Any]


@dataclass(frozen=True)
class Behaviour:
    ttft_s: float  # typical time to first token
    e2e_s: float  # typical request latency
    error_share: float  # share of requests answered 5xx
    waiting: float  # requests queued at steady load
    kv_usage: float  # KV-cache usage at steady load


STEADY = Behaviour(ttft_s=0.09, e2e_s=2.2, error_share=0.002, waiting=0, kv_usage=0.31)
REGRESSING = Behaviour(ttft_s=0.6, e2e_s=6.5, error_share=0.08, waiting=5, kv_usage=0.88)

CANARY_SCENARIOS: dict[str, tuple[str, Behaviour]] = {
    "canary-regresses": ("the next canary is slower (TTFT x6, latency x3) and fails 8% of requests", REGRESSING),
    "canary-holds": ("the next canary serves like the revision it is compared with", STEADY),
}
SERVICE_RATE_PER_S = 16.0  # the sandbox's users: requests per second to the service, however traffic is split
LOAD_METRICS = ("request_count", "container/instance_count")  # what the simulated load writes, per revision
SPREAD = (0.7, 0.85, 0.95, 1.0, 1.05, 1.1, 1.2, 1.35, 0.9, 1.0)  # deterministic jitter around the typical value
RECORD_EVERY_S = 2.0  # real seconds between points of the load's Cloud Monitoring history (a tick is 0.25 s)
_MAX_PER_TICK = 400  # observed into a simulator's histograms per tick: a long jump of the clock costs little


class RevisionFleet:
    def __init__(
        self,
        clock: SandboxClock,
        cloud_run: CloudRunStandIn,
        monitoring: MonitoringStandIn,
        service: str,
        config: SimConfig,
        rate_per_s: float = 2.0,
        served_of: Callable[[str], SimConfig | None] = lambda revision: None,
    ) -> None:
        self.clock = clock
        self.cloud_run = cloud_run
        self.monitoring = monitoring
        self.service = service
        self.config = config
        self.served_of = served_of  # what a ready revision's vLLM reports (its deployed configuration)
        self.rate_per_s = rate_per_s
        self.sims: dict[str, VllmSim] = {}
        self.behaviour: dict[str, Behaviour] = {}
        self.next_canary: Behaviour | None = None
        self._served: dict[str, list[float]] = {}  # revision -> [ok, errors] since the split began
        self._carry: dict[str, float] = {}
        self._since: float | None = None  # when the current split began (sandbox seconds)
        self._counted: set[str] = set()  # revisions with an instance_count series
        self._requested: set[str] = set()  # revisions whose request_count history is not at 0
        self._recorded_at = 0.0  # time.monotonic() of the last points written to Cloud Monitoring
        self._recorded_shares: list[tuple[str, int]] = []  # the traffic they were written for
        self._covers_s = RECORD_EVERY_S  # the real seconds the points being written stand for
        self._last = clock.now()
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Forget every revision (a project reset to its first state: the bench's next example)."""
        with self._lock:
            self.sims.clear()
        self.behaviour.clear()
        self.next_canary = None
        self._served.clear()
        self._carry.clear()
        self._since = None
        self._counted.clear()
        self._requested.clear()
        self._recorded_shares = []

    def arm(self, name: str) -> str:
        what, behaviour = CANARY_SCENARIOS[name]
        self.next_canary = behaviour
        return (
            f"Armed: {what}. Deploy one with `--canary N` (e.g. `/gemma deploy gemma4-12b-qat-l4 --max-model-len 8192 "
            "--canary 20`), Confirm, and watch the comparison in the deploy's thread."
        )

    def sim(self, revision: str) -> VllmSim:
        with self._lock:
            if revision not in self.sims:
                served = self.served_of(revision)
                self.sims[revision] = VllmSim(
                    served or SimConfig(model_id=self.config.model_id, max_model_len=self.config.max_model_len)
                )
            return self.sims[revision]

    def _behaviour(self, revision: str, tag: str) -> Behaviour:
        if revision not in self.behaviour:
            if tag == "canary" and self.next_canary is not None:
                self.behaviour[revision], self.next_canary = self.next_canary, None
            else:
                self.behaviour[revision] = STEADY
        return self.behaviour[revision]

    def tick(self) -> None:
        now = self.clock.now()
        dt, self._last = now - self._last, now
        svc = self.cloud_run.services.get(self.service)
        split = [s for s in (svc or {}).get("trafficStatuses") or [] if s.get("percent") and s.get("revision")]
        shares = sorted((str(s["revision"]), int(s["percent"])) for s in split)
        # A point every few seconds, and at once when traffic moves (status right after a write shows it)
        record = shares != self._recorded_shares or time.monotonic() - self._recorded_at >= RECORD_EVERY_S
        if record:
            self._covers_s = min(time.monotonic() - self._recorded_at, RECORD_EVERY_S)
            self._recorded_at, self._recorded_shares = time.monotonic(), shares
            self._instances(split)
        if len(split) < 2:  # no canary: the service's own simulator carries the load (bot/sandbox/cloud.py)
            self._since = None
            self._served.clear()
            if record:
                self._steady(split)
            return
        if self._since is None:
            self._since = now
        if dt <= 0:
            return
        for status in split:
            rev, share = status["revision"], status["percent"] / 100
            b = self._behaviour(rev, status.get("tag", ""))
            due = self.rate_per_s * dt * share + self._carry.get(rev, 0.0)
            n = int(due)  # every request counts in Cloud Monitoring
            self._carry[rev] = due - int(due)
            served = self._served.setdefault(rev, [0.0, 0.0])
            errors = round((served[0] + served[1] + n) * b.error_share) - round(sum(served) * b.error_share)
            ok = max(0, n - errors)
            sim = self.sim(rev)
            spread = [SPREAD[(int(sum(served)) + i) % len(SPREAD)] for i in range(min(ok, _MAX_PER_TICK))]
            sim.observe(ttft=[b.ttft_s * f for f in spread], e2e=[b.e2e_s * f for f in spread])
            busy = self.rate_per_s * share * b.e2e_s  # Little's law: requests in flight at this rate
            sim.set_gauges(running=busy, waiting=b.waiting, kv_usage=b.kv_usage)
            served[0] += ok
            served[1] += errors
            if record:  # the rate since the split began, each class
                elapsed = max(now - self._since, 1.0)
                self._requests(rev, served[0] / elapsed, served[1] / elapsed)
        if record:
            self._stopped({str(s["revision"]) for s in split})

    def _instances(self, serving: list[dict[str, Any]]) -> None:
        """One active instance per revision that takes traffic (each is a GPU instance: a canary's split runs
        two), none for the others; appended to Cloud Monitoring's instance_count history as Cloud Run reports it."""
        with_traffic = {str(s["revision"]) for s in serving}
        for rev in with_traffic | self._counted:
            n = 1.0 if rev in with_traffic else 0.0
            self.monitoring.add(
                "container/instance_count", self.service, [n], labels={"state": "active"}, revision=rev, append=True,
                int_values=True, covers_s=self._covers_s,
            )  # fmt: skip
        self._counted = with_traffic

    def _requests(self, revision: str, ok_per_s: float, errors_per_s: float) -> None:
        """One point of a revision's request rate per response code class, appended to its history."""
        for cls, value in (("2xx", ok_per_s), ("5xx", errors_per_s)):
            self.monitoring.add(
                "request_count", self.service, [value], labels={"response_code_class": cls}, revision=revision,
                append=True, covers_s=self._covers_s,
            )  # fmt: skip
        self._requested.add(revision)

    def _stopped(self, serving: set[str]) -> None:
        """Revisions that took requests and take none now: their rate is 0 from here on, not their last point."""
        for revision in self._requested - serving:
            self._requests(revision, 0.0, 0.0)
        self._requested &= serving

    def _steady(self, serving: list[dict[str, Any]]) -> None:
        """The one revision that serves takes the whole rate, with a steady revision's errors."""
        for status in serving:
            rate, e = self.rate_per_s * status["percent"] / 100, STEADY.error_share
            self._requests(str(status["revision"]), rate * (1 - e), rate * e)
        self._stopped({str(s["revision"]) for s in serving})

    @property
    def app(self) -> ASGIApp:
        """The ASGI app (a plain coroutine function: uvicorn takes a bound method for an ASGI 2 app)."""

        async def asgi(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
            await self.route(scope, receive, send)

        return asgi

    async def route(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        """The revisions' own URLs: /r/REVISION/... reaches that revision's simulator (which first catches up with
        the simulated present, as every stand-in does on a request)."""
        self.tick()
        parts = str(scope.get("path", "")).split("/", 3)
        known = {r["name"].rsplit("/", 1)[-1] for r in self.cloud_run.revisions.get(self.service, [])}
        if scope["type"] != "http" or len(parts) < 3 or parts[1] != "r" or parts[2] not in known:
            await send({"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"Not Found"})
            return
        path = "/" + (parts[3] if len(parts) > 3 else "")
        await self.sim(parts[2]).app({**scope, "path": path, "raw_path": path.encode()}, receive, send)

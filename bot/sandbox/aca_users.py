"""The sandbox's users of an Azure Container Apps app while its traffic is split (a canary): what the comparison
meets there, as bot/sandbox/revision_traffic.py makes it for Cloud Run.

While two or more revisions take a share, requests arrive at SERVICE_RATE_PER_S on the sandbox clock and each
revision takes its weight's share. A revision with a replica up serves them (its replica's vLLM simulator observes
each one's TTFT and latency and shows them in its /metrics, which its label's host answers); one without a replica
up answers 503 (the sandbox's choice, as its ingress does: how long ACA holds a request while a replica starts was
not found in a source), and the requests keep it busy, so its replica starts. Errors of a Behaviour are 500s.
Every request is counted where Azure Monitor's Requests metric reads it (AcaReplicas.count, by revision and
status). How a revision behaves is its Behaviour (revision_traffic.py): the stable one and a canary that holds
serve alike; a canary armed by `canary-regresses` is slower and fails some requests. The figures are the
sandbox's own inventions. Outside a split nobody sends anything: an idle app scales to zero, as the tour shows.
"""

from __future__ import annotations

from bot.sandbox.aca_api import AcaStandIn
from bot.sandbox.aca_replicas import AcaReplicas
from bot.sandbox.clock import SandboxClock
from bot.sandbox.revision_traffic import CANARY_SCENARIOS, SERVICE_RATE_PER_S, SPREAD, STEADY, Behaviour

_MAX_PER_TICK = 400  # observed into a simulator's histograms per tick: a long jump of the clock costs little


class AcaUsers:
    def __init__(
        self, clock: SandboxClock, aca: AcaStandIn, replicas: AcaReplicas, rate_per_s: float = SERVICE_RATE_PER_S
    ) -> None:
        self.clock = clock
        self.aca = aca
        self.replicas = replicas
        self.rate_per_s = rate_per_s
        self.next_canary: Behaviour | None = None
        # Keyed by (revision, its creation time): an example that deletes the app makes revisions of the same names.
        self.behaviour: dict[tuple[str, float], Behaviour] = {}
        self._carry: dict[tuple[str, float], float] = {}
        self._served: dict[tuple[str, float], list[int]] = {}  # [ok, errors] so far
        self._last = clock.now()

    def arm(self, name: str) -> None:
        """The next ACA canary behaves as the scenario says (`/gemma sandbox canary-regresses`)."""
        self.next_canary = CANARY_SCENARIOS[name][1]

    def _behaviour(self, key: tuple[str, float], label: str) -> Behaviour:
        if key not in self.behaviour:
            if label == "canary" and self.next_canary is not None:
                self.behaviour[key], self.next_canary = self.next_canary, None
            else:
                self.behaviour[key] = STEADY
        return self.behaviour[key]

    def tick(self) -> None:
        now = self.clock.now()
        dt, self._last = now - self._last, now
        if dt <= 0:
            return
        with self.aca.lock:
            self.aca._advance()
            for app in list(self.aca.apps.values()):
                if app.deleting_since is not None:
                    continue
                weights = {r: w for r, w in self.aca.weights(app).items() if w > 0 and r in app.revisions}
                if len(weights) < 2:
                    continue  # no split: nobody here sends anything (an idle app scales to zero)
                labels = {
                    str(t.get("revisionName") or app.latest_ready): str(t.get("label") or "")
                    for t in (app.body.get("properties", {}).get("configuration") or {})
                    .get("ingress", {})
                    .get("traffic")
                    or []
                }
                for name, weight in weights.items():
                    rev = app.revisions[name]
                    key = (name, rev.created)
                    due = self.rate_per_s * dt * weight / 100 + self._carry.get(key, 0.0)
                    n = int(due)
                    self._carry[key] = due - n
                    if n == 0:
                        continue
                    self.replicas.last_request[name] = now  # the users keep it busy: a replica runs
                    up = self.replicas.runtime(app, rev, now)[:2] == ("Running", "Healthy")
                    run = self.replicas.runs.get(name)
                    if not up or run is None:
                        self.replicas.count(app.name, name, 503, n)
                        continue
                    b = self._behaviour(key, labels.get(name, ""))
                    served = self._served.setdefault(key, [0, 0])
                    errors = round((sum(served) + n) * b.error_share) - round(sum(served) * b.error_share)
                    ok = max(0, n - errors)
                    spread = [SPREAD[(sum(served) + i) % len(SPREAD)] for i in range(min(ok, _MAX_PER_TICK))]
                    run.sim.observe(ttft=[b.ttft_s * f for f in spread], e2e=[b.e2e_s * f for f in spread])
                    busy = self.rate_per_s * weight / 100 * b.e2e_s  # Little's law: requests in flight at this rate
                    run.sim.set_gauges(running=busy, waiting=b.waiting, kv_usage=b.kv_usage)
                    served[0] += ok
                    served[1] += errors
                    self.replicas.count(app.name, name, 200, ok)
                    if errors:
                        self.replicas.count(app.name, name, 500, errors)

"""What runs in a sandbox Azure Container Apps revision: vLLM's replicas, simulated (bot/sandbox/vllm_sim.py).

Replicas follow the revision's scale rule as ACA's KEDA-based scaler does: minReplicas always run; above that, a
revision runs one replica once provisioned (a new revision is ready when a replica of it is) and while requests
came within its cooldownPeriod (300 s when unset, ACA's default; a request that came while its replica started
counts until vLLM is up), none otherwise: minReplicas 0 with no traffic rests at 0 replicas. A replica's start is
what the Cloud Run sandbox plays for the same configuration (bot/sandbox/lifecycle.py plan_startup, through the
planner's as-deployed check): the revision's image, vLLM flags and startup probe, on its workload profile's GPU,
GPU count and memory (skills/data/aca.yaml). So its lines, its time to ready, how it fails (an image too old for
Gemma 4, bfloat16 on the T4, weights or KV cache that do not fit, a probe too short) and the KV cache its vLLM
reports once up are derived from what was deployed. The revision's runningState and healthState are what the
stand-in reports: Processing while vLLM starts, Running + Healthy once /health answers, Failed + Unhealthy when
the start fails (still so once scaled to zero). A provisioned revision scaled to zero reports Running with no
health (no replica to probe: a sandbox choice).

Each replica's console (what `console(app)` returns) is those start-up lines (bot/sandbox/startup_lines.py, their
sources there) without Cloud Run's own system lines, on the container's port. A start the probe gives up on ends
with "Startup probe failed N s after the container started." (the sandbox's words: ACA's system log line was not
found in a source). `fail_next_start` still makes the next replica's engine die with a given line (tests).

Apps answer under /apps/<fqdn>/... (the sandbox maps an app's FQDN to `endpoint_of(fqdn)`): requests to the app's
host are shared between its revisions by their traffic weights (spread evenly, in a fixed order, so a 90/10 split
sends 1 request in 10 to the second revision); a revision's own host (`<revision>.<domain>`, its properties.fqdn)
and a label's host (`<app>---<label>.<domain>`, skills/data/aca.yaml `traffic`) reach that revision only. 503 while
the chosen revision has no replica up (ACA's ingress with no ready replica). A revision counts as busy (one replica
kept, past min replicas) while requests reached it within its cooldown.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import Response

from bot.sandbox import startup_lines as sl
from bot.sandbox.aca_api import AcaStandIn, App, Revision, Runtime
from bot.sandbox.lifecycle import Startup, plan_startup
from bot.sandbox.vllm_sim import SimConfig, VllmSim
from skills.capacity.aca_catalog import WorkloadProfile, load_aca_catalog
from skills.targets.aca.spec import TAG_MODEL
from skills.targets.cloud_run.render import ANNOTATION_MODEL

DEFAULT_COOLDOWN_S = 300  # ACA's scale rule default cooldownPeriod
_PATH = re.compile(r"^/apps/([^/]+)(/.*)?$")


@dataclass
class _Run:
    revision: str
    started: float
    ready_at: float  # when /health first answers
    failed_at: float | None  # when the startup probe gives up (None: it does not)
    sim: VllmSim
    app: str = ""
    lines: list[sl.Line] = field(default_factory=list)  # at: seconds after `started`
    stopped: float | None = None  # when it was scaled away


def _arg(args: list[str], name: str) -> str | None:
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def _container(template: dict[str, Any]) -> dict[str, Any]:
    containers = template.get("containers") or [{}]
    return next((c for c in containers if c.get("name") == "vllm"), containers[0])


# ACA's default startup probe with ingress: TCP, initial delay 1 s, period 1 s, 240 failures (aca.yaml sources
# health_probes), for a template without its own.
DEFAULT_PROBE = {"initialDelaySeconds": 1, "periodSeconds": 1, "failureThreshold": 240}


def _profile(profile_type: str | None) -> WorkloadProfile:
    aca = load_aca_catalog()
    found = aca.profiles.get(profile_type or "")
    if found is not None:
        return found
    default = aca.default_profile_for("a100-80gb")  # a profile the catalog does not know: the A100's
    assert default is not None
    return default


def as_service(template: dict[str, Any], profile_type: str | None, model: str | None = None) -> dict[str, Any]:
    """The revision as lifecycle.plan_startup reads a service: its container's image, args and startup probe, the
    workload profile's GPU, GPU count and memory per replica, and the model the app's tag names."""
    c = _container(template)
    wp = _profile(profile_type)
    probe = next((p for p in c.get("probes") or [] if p.get("type") == "Startup"), None) or DEFAULT_PROBE
    container = {
        "image": str(c.get("image") or ""),
        "args": [str(a) for a in c.get("args") or []],
        "resources": {"limits": {"memory": f"{wp.memory_gib:g}Gi", "nvidia.com/gpu": str(wp.gpu_count)}},
        "startupProbe": {k: probe[k] for k in DEFAULT_PROBE if k in probe},
    }
    return {
        "template": {"containers": [container], "nodeSelector": {"accelerator": wp.gpu}},
        "annotations": {ANNOTATION_MODEL: model} if model else {},
    }


def startup(template: dict[str, Any], profile_type: str | None, model: str | None = None) -> Startup:
    """The replica's start as the Cloud Run sandbox would play it on this profile (its outcome, lines, when)."""
    return plan_startup(as_service(template, profile_type, model), "", "")


def startup_s(template: dict[str, Any], profile_type: str | None = None) -> float:
    """Seconds from a replica's start to vLLM answering /health (or to its start failing)."""
    return startup(template, profile_type).end_at


def probe_budget_s(template: dict[str, Any]) -> float:
    probe = as_service(template, None)["template"]["containers"][0]["startupProbe"]
    return float(probe.get("initialDelaySeconds", 0) or 0) + float(probe.get("periodSeconds", 10) or 10) * float(
        probe.get("failureThreshold", 3) or 3
    )


def _aca_lines(s: Startup, port: str, budget: float) -> list[sl.Line]:
    """A start's lines as an ACA replica's console shows them: vLLM's own, on the container's port; Cloud Run's
    system lines (its instance start, its probe and container messages) left out; a start the startup probe gives
    up on ends at the probe's budget with ACA's probe failure."""
    lines = [x for x in s.lines if x.log != "varlog/system"]
    if s.kind == "startup_probe_timeout":
        lines = [x for x in lines if x.at < budget]
        lines.append(sl.Line(budget, f"Startup probe failed {budget:g} s after the container started.", "ERROR"))
    for line in lines:
        line.text = line.text.replace("'port': 8080", f"'port': {port}").replace(":8080", f":{port}")
    return lines


class AcaReplicas:
    def __init__(self, aca: AcaStandIn, now: Callable[[], float]) -> None:
        self.aca = aca
        self._now = now
        self.base_url = ""  # where app() is served (the sandbox sets it)
        self.runs: dict[str, _Run] = {}  # revision name -> its replica's vLLM
        self.last_request: dict[str, float] = {}  # revision name -> when a request last reached it through ingress
        self._routed: dict[str, int] = {}  # app name -> requests its host routed by weight (the spread's position)
        self.fail_next_start = ""  # scenario: the next replica's vLLM dies at start-up with this line
        # (revision, its creation) whose last replica failed to start, since scaled to zero (a later example of the
        # bench may make a revision of the same name)
        self.failed: set[tuple[str, float]] = set()
        self.retired: list[_Run] = []  # replicas scaled away: their lines stay in the logs (log_analytics_api.py)
        # (when, app, revision, HTTP status) of each request through ingress, for the metrics stand-in
        self.requests: list[tuple[float, str, str, int]] = []
        # The simulated users' requests (bot/sandbox/aca_users.py), counted per minute of simulated time:
        # (minute start, app, revision, HTTP status) -> how many; thousands a minute, so not one tuple each.
        self.load: dict[tuple[float, str, str, int], int] = {}
        aca.runtime = self.runtime

    def endpoint_of(self, fqdn: str) -> str:
        return f"{self.base_url}/apps/{fqdn}"

    # --- the stand-in's runtime hook (called under aca.lock) -------------------------------------------------

    def runtime(self, app: App, rev: Revision, now: float) -> Runtime:
        scale = rev.template.get("scale") or {}
        min_r = int(scale.get("minReplicas", 0) or 0)
        max_r = int(scale.get("maxReplicas", 10) or 10)
        cooldown = float(scale.get("cooldownPeriod", DEFAULT_COOLDOWN_S) or DEFAULT_COOLDOWN_S)
        last = self.last_request.get(rev.name)
        provisioned = rev.provisioned_at or now
        if rev.provisioned_at is not None:
            # A new revision starts a replica to become ready (ACA: "a new revision is considered ready when one of
            # its replicas starts and becomes ready", aca.yaml sources lifecycle), min replicas 0 or not.
            last = max(last if last is not None else rev.provisioned_at, rev.provisioned_at)
        run = self.runs.get(rev.name)
        if last is not None and run is not None and run.started <= last and run.failed_at is None:
            # A request that came while the replica started waits for it (the scaler counts it until answered):
            # the cooldown runs from when vLLM is up, not from the request, so a long start is not scaled away.
            last = max(last, min(run.ready_at, now))
        busy = rev.active and last is not None and provisioned <= now and now - last < cooldown
        wanted = min(max(min_r, 1 if busy else 0), max_r)
        if wanted == 0:
            gone = self.runs.pop(rev.name, None)
            if gone is not None:  # scaled to zero when its cooldown ran out, though noticed only now
                gone.stopped = min(now, last + cooldown) if last is not None and min_r == 0 else now
                gone.stopped = max(gone.stopped, gone.started)
                self.retired.append(gone)
                if gone.failed_at is not None:
                    self.failed.add((rev.name, rev.created))
            if (rev.name, rev.created) in self.failed:  # its last replica never started: Failed, not resting at 0
                return ("Failed", "Unhealthy", 0)
            return ("Running", "None", 0)
        run = self.runs.get(rev.name)
        if run is None:
            start = provisioned if min_r > 0 else max(provisioned, last or now)
            run = self._start(app, rev, start)
            self.failed.discard((rev.name, rev.created))
        if run.failed_at is not None and now >= run.failed_at:
            return ("Failed", "Unhealthy", wanted)
        if now >= run.ready_at:
            return ("Running", "Healthy", wanted)
        return ("Processing", "None", wanted)

    def _start(self, app: App, rev: Revision, at: float) -> _Run:
        args = [str(a) for a in _container(rev.template).get("args") or []]
        model = _arg(args, "--served-model-name") or _arg(args, "--model") or app.name
        prof = self.aca.profiles.get(app.body.get("properties", {}).get("workloadProfileName") or "")
        tags = app.body.get("tags") or {}
        s = startup(rev.template, prof.type if prof else None, tags.get(TAG_MODEL))
        budget = probe_budget_s(rev.template)
        lines = _aca_lines(copy.deepcopy(s), _arg(args, "--port") or "8000", budget)
        ready, failed_at = s.end_at, None
        if self.fail_next_start:  # the engine dies at start-up with the given line (tests)
            lines = [x for x in lines if x.at < 3.0] + [sl.Line(3.0, self.fail_next_start, severity="ERROR")]
            lines += [x for x in sl.engine_dies(3.5) if x.log != "varlog/system"]
            self.fail_next_start = ""
            failed_at, ready = at + lines[-1].at, float("inf")
        elif s.outcome != "ready":
            failed_at, ready = at + (budget if s.kind == "startup_probe_timeout" else s.end_at), float("inf")
        served = s.served or SimConfig(model_id=model, max_model_len=int(_arg(args, "--max-model-len") or 8192))
        run = _Run(rev.name, at, at + ready, failed_at, VllmSim(served), app=app.name, lines=lines)
        self.runs[rev.name] = run
        return run

    def console(self, app: str) -> list[tuple[float, str, str]]:
        """(simulated time, severity, text) of what the app's replicas printed so far, oldest first."""
        with self.aca.lock:
            self.aca._advance()
            live = self.aca.apps.get(app)
            if live is not None:  # reading the revisions starts what should run by now
                for rev in live.revisions.values():
                    self.aca._runtime(live, rev, self._now())
            now = self._now()
            out = [
                (run.started + line.at, line.severity, line.text)
                for run in self.runs.values()
                if run.app == app
                for line in run.lines
                if run.started + line.at <= now
            ]
        return sorted(out, key=lambda x: x[0])

    def replica_runs(self, app: str) -> list[_Run]:
        """The app's replicas, running and retired, after bringing the stand-in up to now."""
        with self.aca.lock:
            self.aca._advance()
            live = self.aca.apps.get(app)
            if live is not None:
                for rev in live.revisions.values():
                    self.aca._runtime(live, rev, self._now())
            return [r for r in [*self.retired, *self.runs.values()] if r.app == app]

    # --- ingress -----------------------------------------------------------------------------------------------

    def _route(self, app: App, host: str) -> str:
        """The revision a request to `host` reaches ('' when none): the app's host by weight, a revision's or a
        label's host that revision."""
        domain = self.aca.default_domain
        for rev in app.revisions.values():
            if host == f"{rev.name}.{domain}":
                return rev.name if rev.active else ""
        for t in (app.body.get("properties", {}).get("configuration") or {}).get("ingress", {}).get("traffic") or []:
            if t.get("label") and host == load_aca_catalog().traffic.label_fqdn(
                app.name, t["label"], self.aca.fqdn(app.name)
            ):
                return (app.latest_ready or "") if t.get("latestRevision") else str(t.get("revisionName", ""))
        weights = [(r, w) for r, w in self.aca.weights(app).items() if w > 0]
        if not weights:
            return ""
        n = self._routed.get(app.name, 0)
        self._routed[app.name] = n + 1
        spot = (n * 61) % 100  # 61 is prime to 100: consecutive requests spread over the whole 0..99
        total = 0
        for name, w in weights:
            total += w
            if spot < total * 100 // max(sum(x for _, x in weights), 1):
                return name
        return weights[-1][0]

    def _app_for(self, host: str) -> App | None:
        domain = "." + self.aca.default_domain
        name = host.removesuffix(domain).split("---", 1)[0].split("--", 1)[0] if host.endswith(domain) else ""
        app = self.aca.apps.get(name)
        return app if app is not None and app.deleting_since is None else None

    def _serving(self, fqdn: str) -> tuple[str, str, VllmSim | None]:
        """(app, revision, the vLLM that answers `fqdn` now or None): a request through ingress counts as traffic."""
        with self.aca.lock:
            self.aca._advance()
            now = self._now()
            app = self._app_for(fqdn)
            if app is None:
                return "", "", None
            name = self._route(app, fqdn)
            rev = app.revisions.get(name)
            if rev is None:
                return app.name, name, None
            self.last_request[name] = now
            if self.runtime(app, rev, now)[0] != "Running":
                return app.name, name, None
            run = self.runs.get(name)
            return app.name, name, run.sim if run else None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """ASGI: /apps/<fqdn>/<path> goes to that app's vLLM with <path>."""
        m = _PATH.match(scope.get("path", "")) if scope["type"] == "http" else None
        if m is None:
            if scope["type"] == "http":
                await Response(status_code=404)(scope, receive, send)
            return
        app, revision, sim = self._serving(m.group(1))
        if sim is None:
            self._count(app, revision, 503)
            await Response("no healthy upstream", status_code=503)(scope, receive, send)
            return
        rest = m.group(2) or "/"

        async def counted(message: Any) -> None:
            if message["type"] == "http.response.start":
                self._count(app, revision, int(message["status"]))
            await send(message)

        await sim.app({**scope, "path": rest, "raw_path": rest.encode(), "root_path": ""}, receive, counted)

    def count(self, app: str, revision: str, status: int, n: int) -> None:
        """`n` requests of the simulated users, answered `status` now (the caller holds aca.lock)."""
        key = (self._now() // 60 * 60, app, revision, status)
        self.load[key] = self.load.get(key, 0) + n

    def _count(self, app: str, revision: str, status: int) -> None:
        if app:  # a host no app answers to is not any app's request
            with self.aca.lock:
                self.requests.append((self._now(), app, revision, status))

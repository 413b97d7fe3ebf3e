"""The sandbox: a simulated Google Cloud project on this machine, the bot's embedded default cloud.

It runs the wire-level simulators on 127.0.0.1 (Cloud Run Admin v2 over REST, Cloud Logging over REST,
Cloud Monitoring over gRPC, a vLLM server) and points the bot's settings at them, so the bot talks to them
with the real client libraries exactly as in production. Revisions start and fail on the sandbox clock
(bot/sandbox/lifecycle.py); scenarios (bot/sandbox/scenarios.py) make field failures happen and send
Cloud Monitoring's alert to the bot's own webhook. Nothing real is touched and no credentials are needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import httpx
from pydantic import SecretStr

from bot.sandbox import aca_scenarios as aca_sc
from bot.sandbox import scenarios as sc
from bot.sandbox import startup_lines as sl
from bot.sandbox.aca_world import AcaWorld
from bot.sandbox.clock import DEFAULT_SPEED, SandboxClock
from bot.sandbox.cloud_logging_api import CloudLoggingStandIn
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.lifecycle import RevisionLifecycle, Startup
from bot.sandbox.monitoring_grpc import MonitoringStandIn, serve_monitoring
from bot.sandbox.preflight_standins import SCENARIOS as PREFLIGHT_SCENARIOS
from bot.sandbox.preflight_standins import PreflightStandIns
from bot.sandbox.revision_traffic import CANARY_SCENARIOS, LOAD_METRICS, SERVICE_RATE_PER_S, STEADY, RevisionFleet
from bot.sandbox.server import serve
from bot.sandbox.tpu_api import TpuStandIn, serve_tpu
from bot.sandbox.tpu_nodes import TpuNodeSim
from bot.sandbox.tpu_scenarios import TPU_SCENARIOS
from bot.sandbox.vllm_sim import SimConfig, VllmSim
from bot.settings import Settings
from handlers.deps import SandboxScenario
from skills.capacity.tpu_catalog import load_tpu_catalog
from skills.deploy.plan_builder import build_plan
from skills.serving.vllm_flags import VllmFlags
from skills.targets.cloud_run.target import CloudRunTarget
from skills.targets.env import DeployEnv

log = logging.getLogger(__name__)

BANNER = "sandbox: a simulated project on this machine; nothing real is touched"
PROJECT = "sandbox-project"
LOCATION = "us-central1"
SEED_PROFILE = "gemma4-12b-qat-l4"


class _NoService:
    """The Runtime a first render needs: nothing exists yet."""

    async def get_service_spec(self, name: str) -> dict[str, Any] | None:
        return None


POLL_SIM_S = 60.0  # the most simulated time between two looks of a watch


class Sandbox:
    def __init__(
        self,
        speed: float = DEFAULT_SPEED,
        service: str = "vllm-gemma4",
        clock: SandboxClock | None = None,
        image: str | None = None,
    ) -> None:
        self.clock = clock or SandboxClock(speed)
        self.service = service
        self.image = image  # the seeded service runs the image the bot would deploy (VLLM_IMAGE, or the default)
        self.project, self.location = PROJECT, LOCATION
        self.cloud_run = CloudRunStandIn(PROJECT, LOCATION)
        self.logging = CloudLoggingStandIn()
        self.monitoring = MonitoringStandIn()
        self.preflight = PreflightStandIns()  # the Hub, the registry, Cloud Storage, Cloud Quotas
        # Cloud Run refuses a GPU service whose max instances exceed the region's GPU quota, read from Cloud Quotas.
        self.cloud_run.gpu_quota = lambda accelerator: self.preflight.gpu_allowed(accelerator, LOCATION)
        # Cloud TPU: the API stand-in (every v6e zone of skills/data/tpu.yaml with capacity and quota) and the
        # nodes' simulated vLLM; the quota lives in the Cloud Quotas stand-in, per zone, as the real one.
        self.tpu = TpuStandIn(PROJECT, now=self.clock.now)
        self.tpu_nodes = TpuNodeSim(self.tpu, self.logging, self.clock, PROJECT)
        self.tpu_zones(capacity=8, quota=8)
        # Azure Container Apps: one environment with the GPU workload profiles, over the real Azure SDKs (aca_world.py).
        self.azure = AcaWorld(self.clock)
        self._spec = self._render_seed()
        args = [str(a) for a in self._spec["template"]["containers"][0].get("args") or []]
        flags = VllmFlags.parse(args)  # the simulator serves what the seeded service runs
        assert flags.model and flags.max_model_len, "the seeded service names its model and context"
        self.vllm = VllmSim(SimConfig(model_id=flags.model, max_model_len=flags.max_model_len))
        # While traffic is split (a canary), simulated users reach each revision at its tagged URL's own server.
        self.fleet = RevisionFleet(
            self.clock,
            self.cloud_run,
            self.monitoring,
            service,
            self.vllm.config,
            rate_per_s=SERVICE_RATE_PER_S,
            served_of=self._served_by,
        )
        self._serving = ""  # the revision whose configuration the service's vLLM answers with
        self._serving_lock = threading.Lock()
        self.vllm.before_answer = self._follow_serving  # traffic moved by a write: the next answer is the new one's
        self.lifecycle = RevisionLifecycle(
            self.clock, self.logging, PROJECT, LOCATION, self.cloud_run.complete_revision
        )
        self.cloud_run.lifecycle = self.lifecycle
        self.lifecycle.gated = self.preflight.hub.is_gated  # a pull without HF_TOKEN fails only for a gated repo
        self.logging.before_list = self._tick_logs
        self.alert_token = secrets.token_urlsafe(16)
        # Set by whoever wires the bot: the ASGI app with the alert webhooks, and a wait for the queue.
        self.alert_app: Any = None
        self.settle: Callable[..., Awaitable[None]] | None = None  # settle(timeout_s=300.0)
        self.saturated = False
        # Alerts sent and not yet closed: incident id -> (the revision it is about, the open payload). Like Cloud
        # Monitoring, the sandbox sends the close notification when the condition stops being met.
        self.open_alerts: dict[str, tuple[str, dict[str, Any]]] = {}
        # The same for the ACA scenarios' Azure Monitor alerts: alertId -> (the ACA revision, the Fired payload).
        self.azure_open: dict[str, tuple[str, dict[str, Any]]] = {}
        self._watcher: asyncio.Task[None] | None = None
        self._good_template: dict[str, Any] | None = None  # the last template that served (scenarios start there)
        self.urls: dict[str, str] = {}
        self.closers: list[Callable[[], Awaitable[None]]] = []  # async clean-ups of what was wired to it
        self._ticking = threading.Event()  # set: the ticker thread should stop
        self._ticker: threading.Thread | None = None
        self._stack = contextlib.ExitStack()

    def _tick_logs(self) -> None:
        self.lifecycle.tick()
        self.tpu_nodes.tick()

    def tpu_zones(self, *, capacity: int, quota: int, spot_capacity: int | None = None, spot_quota: int | None = None,
                  zones: list[str] | None = None) -> None:  # fmt: skip
        """Every v6e zone (or `zones`) with this much free capacity and quota, in chips; the same in Cloud Quotas."""
        tpu = load_tpu_catalog()
        for zone in zones or list(tpu.zones):
            sc = capacity if spot_capacity is None else spot_capacity
            sq = quota if spot_quota is None else spot_quota
            self.tpu.add_zone(zone, capacity=capacity, spot_capacity=sc, quota=quota, spot_quota=sq)
            self.preflight.quotas.set(tpu.quota.service, tpu.quota.on_demand, zone, quota, dimension="zone")
            self.preflight.quotas.set(tpu.quota.service, tpu.quota.spot, zone, sq, dimension="zone")
        # Per region as well (tpu.yaml `quota_regional`): room for every seeded zone of the region, so only a test
        # that lowers it (TpuStandIn.set_region_quota and the Cloud Quotas value) makes it bind.
        regions = {tpu.region_of(z) for z in zones or list(tpu.zones)}
        for region in regions:
            n = sum(1 for z in self.tpu.zones if tpu.region_of(z) == region)
            sq = quota if spot_quota is None else spot_quota
            for tier, qid, value in (
                ("on-demand", tpu.quota.on_demand_region, quota),
                ("spot", tpu.quota.spot_region, sq),
            ):
                self.tpu.set_region_quota(region, tier, value * n)
                self.preflight.quotas.set(tpu.quota.service, qid, region, value * n, dimension="region")

    # --- start / stop ---------------------------------------------------------------------------------
    def start(self) -> Sandbox:
        s = self._stack
        self.urls["run"] = s.enter_context(serve(self.cloud_run.app))
        self.urls["logging"] = s.enter_context(serve(self.logging.app()))
        self.urls["monitoring"] = s.enter_context(serve_monitoring(self.monitoring))
        self.urls["vllm"] = s.enter_context(serve(self.vllm.app))
        self.urls["tpu"] = s.enter_context(serve_tpu(self.tpu))
        self.urls["tpu_nodes"] = s.enter_context(serve(self.tpu_nodes.app()))
        self.urls["revisions"] = s.enter_context(serve(self.fleet.app))
        self.azure.start(s)
        revisions_url = self.urls["revisions"]
        self.cloud_run.tag_uri = lambda _svc, _tag, rev: f"{revisions_url}/r/{rev}"
        self.lifecycle.uri = self.urls["vllm"]
        self._stack.callback(self.preflight.close)
        self.preflight.start()
        self._seed(self._spec)
        self.ensure_ticker()
        return self

    def close(self) -> None:
        self._ticking.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        self._stack.close()

    async def aclose(self) -> None:
        for close in reversed(self.closers):
            await close()
        self.closers.clear()
        await asyncio.to_thread(self.close)

    def configure(self, settings: Settings, *, console: bool = False) -> Settings:
        """The settings with every Google endpoint pointed at the simulators (VLLM_BASE_URL is left to the
        agent: the deployed model is the simulator, found through the service's URL as in production)."""
        update: dict[str, Any] = {
            "google_cloud_project": PROJECT,
            "google_cloud_location": LOCATION,
            "google_anonymous_credentials": True,
            "cloud_run_api_endpoint": self.urls["run"],
            "cloud_logging_api_endpoint": self.urls["logging"],
            "cloud_monitoring_api_endpoint": self.urls["monitoring"],
            "cloud_tpu_api_endpoint": self.urls["tpu"],
            "tpu_endpoint_template": self.urls["tpu_nodes"] + "/nodes/{ip}",
            "vllm_service_name": self.service,
            "vllm_base_url": None,
            "model_bucket": None,
            # Poll often enough that each phase of a fast simulated start is seen (Slack edits stay few): at most a
            # minute of simulated time apart, so a watch sees a state that lasts minutes (an ACA replica up for its
            # 300 s cooldown before it scales to zero) however fast the clock runs (5000x: every 12 ms).
            "deploy_poll_s": min(
                settings.deploy_poll_s, 1.0, POLL_SIM_S / self.clock.speed if self.clock.speed else 1.0
            ),
            **self.preflight.settings_update(),
            # The preflight scenarios change the stand-ins between two plans: a cached answer would hide that.
            "preflight_cache_s": 0,
        }
        if not settings.alert_webhook_token:
            update["alert_webhook_token"] = SecretStr(self.alert_token)
        else:
            self.alert_token = settings.alert_webhook_token.get_secret_value()
        if console and not settings.deployer_user_ids:
            update["deployer_user_ids"] = "console"  # the only user of a local console
        return settings.model_copy(update=update)

    def _render_seed(self) -> dict[str, Any]:
        """The service as the default profile renders it."""
        fields: dict[str, Any] = {"service": self.service, "region": LOCATION, "project": PROJECT}
        if self.image:
            fields["image"] = self.image
        env = DeployEnv(**fields)
        coro = build_plan("deploy", {"profile": SEED_PROFILE}, CloudRunTarget(_NoService()), env)  # type: ignore[arg-type]
        with ThreadPoolExecutor(1) as pool:  # start() may be called with an event loop running
            plan = pool.submit(asyncio.run, coro).result()
        assert plan.spec is not None
        return plan.spec

    def _seed(self, spec: dict[str, Any]) -> None:
        """Create the service, ready, with the start-up log of its revision, and some Monitoring history."""
        self.lifecycle.backdate = True
        try:
            resp = httpx.post(
                f"{self.urls['run']}/v2/projects/{PROJECT}/locations/{LOCATION}/services",
                params={"serviceId": self.service},
                json=spec,
                timeout=10,
            )
            resp.raise_for_status()
            self.lifecycle.tick()
        finally:
            self.lifecycle.backdate = False
        rates = [12.0, 15.0, 18.0, 14.0, SERVICE_RATE_PER_S]
        series: tuple[tuple[str, list[float], dict[str, str] | None, bool], ...] = (
            ("container/gpu/utilizations", [0.35, 0.42, 0.51, 0.47, 0.44], None, False),
            ("container/gpu/memory_utilizations", [0.91] * 5, None, False),
            ("container/memory/utilizations", [0.48] * 5, None, False),
            ("container/cpu/utilizations", [0.22, 0.25, 0.31, 0.27, 0.24], None, False),
            ("container/instance_count", [1.0] * 5, {"state": "active"}, True),
            # the users' requests, answered as a steady revision answers them (its share of 5xx)
            ("request_count", [r * (1 - STEADY.error_share) for r in rates], {"response_code_class": "2xx"}, False),
            ("request_count", [r * STEADY.error_share for r in rates], {"response_code_class": "5xx"}, False),
            ("request_latencies", [2100.0, 2300.0, 2650.0, 2400.0, 2200.0], None, False),
        )
        serving = self.latest_revision()
        for metric, values, labels, ints in series:
            # Requests and instances are the seeded revision's history, which the simulated load (RevisionFleet)
            # carries on point by point, each covering the time since the one before.
            revision = serving if metric in LOAD_METRICS else ""
            self.monitoring.add(metric, self.service, values, labels=labels, int_values=ints, revision=revision)

    # --- time ---------------------------------------------------------------------------------------------
    def _served_by(self, revision: str) -> SimConfig | None:
        startup = self.lifecycle.finished.get(revision)
        return startup.served if startup is not None else None

    def _follow_serving(self) -> None:
        """The service's vLLM answers as the revision that takes the most traffic was started (its model, context
        and KV cache, from its deployed configuration through the planner): a new revision is a new process."""
        svc = self.cloud_run.services.get(self.service) or {}
        shares = [t for t in svc.get("trafficStatuses") or [] if t.get("percent") and t.get("revision")]
        if not shares:
            return
        revision = str(max(shares, key=lambda t: t["percent"])["revision"]).rsplit("/", 1)[-1]
        served = self._served_by(revision)
        with self._serving_lock:  # the ticker and the simulator's own requests both call this
            if revision != self._serving and served is not None:
                self._serving = revision
                self.vllm.serve(served)

    def tick(self) -> None:
        self.lifecycle.tick()
        self._follow_serving()
        self.fleet.tick()
        self.azure.users.tick()
        if not self.saturated:  # the simulator's own load (a bench) shows in its gauges
            busy = self.vllm.state.in_flight
            self.vllm.set_gauges(running=busy, waiting=0, kv_usage=min(0.9, 0.03 * busy))

    def ensure_ticker(self, every_s: float = 0.25) -> None:
        """Keep simulated time flowing for revisions nobody polls (a scenario's failing one) and the gauges
        following the simulator's load: a thread, so it runs the same under the console and under serve."""
        if self._ticker is not None and self._ticker.is_alive():
            return

        def run() -> None:
            while not self._ticking.wait(every_s):
                self.tick()

        self._ticker = threading.Thread(target=run, name="sandbox-ticker", daemon=True)
        self._ticker.start()

    # --- scenarios ----------------------------------------------------------------------------------------
    def latest_revision(self) -> str:
        return str(self.cloud_run.services[self.service].get("latestCreatedRevision", "")).rsplit("/", 1)[-1]

    async def deploy_by_hand(self, scenario: sc.Scenario) -> str:
        """PATCH the service as `gcloud run deploy` would (past the bot's planner); returns the new revision."""
        svc = self.cloud_run.services[self.service]
        if self.cleared_rollout(svc):  # serving what it was last given: that is the teammate's starting point
            self._good_template = copy.deepcopy(svc["template"])
        # A teammate starts from what works, not from the previous scenario's broken config (scenarios in a row
        # must not stack: host-memory after gated-model would otherwise fail on the missing HF_TOKEN).
        template = sc.mutated_template(scenario, self._good_template or svc["template"])
        # gcloud names each new revision itself: a name the template kept (a canary's) would collide (409).
        template.pop("revision", None)
        url = f"{self.urls['run']}/v2/projects/{PROJECT}/locations/{LOCATION}/services/{self.service}"
        async with httpx.AsyncClient(timeout=10) as client:
            resp = await client.patch(url, json={"template": template})
            resp.raise_for_status()
        return self.latest_revision()

    async def wait_finished(self, revision: str, timeout_s: float) -> Startup | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.tick()
            if revision in self.lifecycle.finished:
                return self.lifecycle.finished[revision]
            await asyncio.sleep(0.05)
        return None

    def saturate(self) -> str:
        """Queue saturation on the serving revision: gauges, histograms and vLLM's stats lines."""
        self.saturated = True
        self._follow_serving()  # the serving revision's server is the one that saturates (not reset after)
        self.vllm.set_gauges(running=8, waiting=19, kv_usage=0.97)
        self.vllm.observe(ttft=[4.0, 6.5, 9.0, 12.0], e2e=[20.0, 28.0, 41.0], preemptions=3)
        svc = self.cloud_run.services[self.service]
        revision = str(svc.get("latestReadyRevision", "")).rsplit("/", 1)[-1]
        now = time.time()
        entries = []
        for i, (sev, text) in enumerate(sc.saturation_lines(revision)):
            line = sl.Line(0.0, text, severity=sev, vllm="INFO")
            s = Startup(self.service, revision, [], 0.0, "ready", wall_start=now - 60 + 10 * i)
            entries.append(self.lifecycle.entry(s, line))
        self.logging.append(entries)
        return revision

    async def _post_alert(self, route: str, payload: dict[str, Any]) -> httpx.Response:
        if self.alert_app is None:
            raise RuntimeError("the bot's alert webhook is not wired to the sandbox")
        transport = httpx.ASGITransport(app=self.alert_app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sandbox.local", timeout=30) as client:
            return await client.post(route, params={"auth_token": self.alert_token}, json=payload)

    async def post_alert(self, payload: dict[str, Any]) -> httpx.Response:
        """Cloud Monitoring's webhook call, into the bot's own alert route."""
        return await self._post_alert("/alerts/gcp", payload)

    async def post_azure_alert(self, payload: dict[str, Any]) -> httpx.Response:
        """Azure Monitor's action group webhook call (common alert schema), into the bot's `/alerts/azure`."""
        return await self._post_alert("/alerts/azure", payload)

    def track_azure_alert(self, revision: str, payload: dict[str, Any]) -> None:
        """An ACA scenario's alert about `revision`: resolved once a newer revision of the app serves."""
        self.azure_open[payload["data"]["essentials"]["alertId"]] = (revision, payload)
        self._watch()

    def scenario_list(self) -> list[SandboxScenario]:
        """Every scenario, and the alert whose incident it opens: a field scenario's (`run_scenario` sends
        Cloud Monitoring's alert for its policy); TPU, preflight and canary scenarios send none (the bot's own
        commands show them: a deploy's progress, a plan's refusal, status and diagnose, the canary's thread)."""
        field = [SandboxScenario(s.name, s.summary, s.kind, s.alert) for s in sc.SCENARIOS.values()]
        tpu = [SandboxScenario(s.name, s.summary, s.kind, "") for s in TPU_SCENARIOS.values()]
        # ACA scenarios send Azure Monitor's alert (common alert schema) to /alerts/azure: each opens a thread
        aca = [SandboxScenario(s.name, s.summary, s.kind, s.alert) for s in aca_sc.ACA_SCENARIOS.values()]
        canary = [SandboxScenario(n, what, "a canary's comparison", "") for n, (what, _) in CANARY_SCENARIOS.items()]
        preflight = [SandboxScenario(n, what, "preflight, at plan time", "") for n, what in PREFLIGHT_SCENARIOS.items()]
        return field + tpu + aca + preflight + canary

    async def fire(self, name: str, on_event: Callable[[str], Awaitable[None]]) -> None:
        """Run a scenario by name, narrating failures of the sandbox itself instead of raising them."""
        try:
            if name in PREFLIGHT_SCENARIOS:
                repo = self._seed_repo()
                await on_event(self.preflight.scenario(name, repo, LOCATION))
                return
            if name in TPU_SCENARIOS:
                await TPU_SCENARIOS[name].run(self, on_event)
                return
            if name in aca_sc.ACA_SCENARIOS:
                await aca_sc.ACA_SCENARIOS[name].run(self, on_event)
                if self.settle is not None:
                    await self.settle()
                return
            if name in CANARY_SCENARIOS:
                self.azure.users.arm(name)  # the next canary on either target behaves so
                await on_event(self.fleet.arm(name))
                return
            await self.run_scenario(sc.SCENARIOS[name], on_event)
        except Exception as exc:
            log.warning("sandbox scenario %s failed: %s: %s", name, type(exc).__name__, str(exc)[:200], exc_info=True)
            await on_event(f":warning: The sandbox could not run `{name}`: {type(exc).__name__}: {exc}")

    async def run_scenario(self, scenario: sc.Scenario, on_event: Callable[[str], Awaitable[None]]) -> None:
        """Make it happen, then send the alert; `on_event` narrates (a line in the chat)."""
        svc = self.cloud_run.services.get(self.service)
        redeploy = f"`/gemma deploy {SEED_PROFILE}`, then Confirm"
        if svc is None:  # `/gemma destroy` deleted it: a scenario has nothing to break
            await on_event(
                f":warning: `{scenario.name}` needs the service `{self.service}`, which does not exist any more "
                f"(it was destroyed). Deploy it again ({redeploy}), then run `/gemma sandbox {scenario.name}`."
            )
            return
        if scenario.load and not svc.get("latestReadyRevision"):
            await on_event(
                f":warning: `{scenario.name}` loads the serving revision, and `{self.service}` has none ready. "
                f"Wait for the deploy to finish, or deploy a working configuration ({redeploy})."
            )
            return
        if scenario.load:
            revision = self.saturate()
        else:
            revision = await self.deploy_by_hand(scenario)
            startup = await self.wait_finished(revision, timeout_s=self.wait_budget_s())
            if startup is None:
                await on_event(f"Revision `{revision}` is still starting; no alert sent.")
                return
            if startup.outcome == "ready":
                await on_event(f"Revision `{revision}` became ready after all; no alert.")
                return
            await on_event(f"Revision `{revision}` failed ({startup.kind}); Cloud Monitoring alerts.")
        payload = sc.gcp_alert(scenario, PROJECT, self.service, revision, LOCATION)
        resp = await self.post_alert(payload)
        if resp.status_code != 202:
            await on_event(f"The alert webhook answered {resp.status_code}: {resp.text[:200]}")
            return
        self.open_alerts[payload["incident"]["incident_id"]] = (revision, payload)
        self._watch()
        if self.settle is not None:
            await self.settle()

    # --- closing alerts ----------------------------------------------------------------------------------
    def cleared(self, revision: str) -> bool:
        """Is the condition of an alert about `revision` no longer met? A failed rollout's clears once a newer
        revision serves (latest created = latest ready: a fix deployed, or a good config), a saturation's once
        traffic moved to a newer revision, and both once the service is gone (destroyed)."""
        svc = self.cloud_run.services.get(self.service)
        if svc is None:
            return True
        ready = str(svc.get("latestReadyRevision", "")).rsplit("/", 1)[-1]
        created = str(svc.get("latestCreatedRevision", "")).rsplit("/", 1)[-1]
        return bool(ready) and ready == created and sc.revision_number(ready) > sc.revision_number(revision)

    @staticmethod
    def cleared_rollout(svc: dict[str, Any]) -> bool:
        """The service serves its latest revision (no failed or pending rollout)."""
        ready = str(svc.get("latestReadyRevision", "")).rsplit("/", 1)[-1]
        return bool(ready) and ready == str(svc.get("latestCreatedRevision", "")).rsplit("/", 1)[-1]

    def _watch(self) -> None:
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(self._watch_alerts(), name="sandbox-alerts")
            self.closers.append(self._stop_watching)

    async def _stop_watching(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None

    async def _watch_alerts(self, every_s: float = 0.1) -> None:
        """Send the close notification of each open alert whose condition cleared (Cloud Monitoring evaluates
        its conditions continuously; here, every `every_s` of real time)."""
        while self.open_alerts or self.azure_open:
            await asyncio.sleep(every_s)
            await self.close_cleared()

    async def close_cleared(self) -> int:
        """One look: send the close notification of every open alert whose condition cleared; how many."""
        sent = 0
        for iid, (revision, opened) in list(self.open_alerts.items()):
            if iid not in self.open_alerts or not self.cleared(revision):
                continue
            if opened["incident"]["policy_name"] == sc.SCENARIOS["queue-saturation"].alert:
                self.saturated = False  # the load moved to the new revision
            summary = f"The condition on {self.service} (revision {revision}) is no longer met."
            try:
                resp = await self.post_alert(sc.gcp_closed(opened, summary))
            except Exception as exc:  # noqa: BLE001 - the next look retries, as Cloud Monitoring would
                log.warning("sandbox: close notification for %s failed: %s", iid, exc)
                continue
            if resp.status_code == 202:
                self.open_alerts.pop(iid, None)
                sent += 1
        return sent + await self._close_cleared_azure()

    def aca_cleared(self, revision: str) -> bool:
        """Is an ACA alert about `revision` no longer met? Once a newer revision of the app is its latest and ready
        (a fix deployed), or the app is gone."""
        standin = self.azure.standin
        with standin.lock:
            standin._advance()
            app = standin.apps.get(aca_sc.SERVICE)
            if app is None or app.deleting_since is not None:
                return True
            order = list(app.revisions)
            ready = app.latest_ready
            return (
                bool(ready) and ready == app.latest and revision in order and order.index(ready) > order.index(revision)
            )

    async def _close_cleared_azure(self) -> int:
        """Azure Monitor's Resolved notification (the same alert instance, monitorCondition Resolved) for each
        ACA alert whose condition cleared."""
        sent = 0
        for alert_id, (revision, fired) in list(self.azure_open.items()):
            if alert_id not in self.azure_open or not self.aca_cleared(revision):
                continue
            resolved = copy.deepcopy(fired)
            essentials = resolved["data"]["essentials"]
            essentials["monitorCondition"] = "Resolved"
            essentials["resolvedDateTime"] = aca_sc.azure_now(self.azure, self.clock).isoformat()
            try:
                resp = await self.post_azure_alert(resolved)
            except Exception as exc:  # noqa: BLE001 - the next look retries, as Azure Monitor would
                log.warning("sandbox: Azure Monitor resolve for %s failed: %s", alert_id, exc)
                continue
            if resp.status_code == 202:
                self.azure_open.pop(alert_id, None)
                sent += 1
        return sent

    def _seed_repo(self) -> str:
        """The Hub repo the default profile pulls (what the preflight scenarios take away)."""
        args = [str(a) for a in self._spec["template"]["containers"][0].get("args") or []]
        return VllmFlags.parse(args).model_path or ""

    def wait_budget_s(self) -> float:
        """Real seconds to wait for a revision: the longest cold start the planner knows, at this speed."""
        return min(self.clock.real_seconds(3600.0), 600.0) + 5.0

    def describe(self) -> str:
        speed = f"{self.clock.speed:g}x" if self.clock.speed else "stopped"
        at = datetime.now(UTC).strftime("%H:%M UTC")
        return f"project `{PROJECT}` ({LOCATION}), service `{self.service}`, clock {speed}, {at}"

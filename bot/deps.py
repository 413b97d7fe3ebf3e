"""The wired dependencies a handler or worker gets. Only bot/ builds this (see bot/wiring.py)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import warnings
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis.asyncio as redis

from bot.fair_share import FairShares
from bot.settings import Settings
from bot.telemetry import Telemetry
from handlers.deps import AgentEvals
from skills.clock import REAL_CLOCK, Clock
from skills.deploy.confirm import UsergroupMembers, WriteGate
from skills.deploy.flow import WriteFlow
from skills.deploy.plans import PlanStore
from skills.deploy.preflight import PreflightSources
from skills.incidents.store import IncidentStore
from skills.ports import Logs, Metrics, ModelServer, StreamClients
from skills.short_cache import ShortCache
from skills.targets.env import DeployEnv
from skills.targets.port import ServingTarget
from skills.targets.registry import Targets

if TYPE_CHECKING:  # annotations only: these pull in openai, slack_sdk and the sandbox's stand-ins
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.adapters.llm import LLMEndpoint
    from bot.agent import Agent
    from bot.sandbox.cloud import Sandbox

log = logging.getLogger(__name__)

# Slack's usergroups.users.list is rate-limited (Tier 2); the deployer check caches a group briefly.
_GROUP_CACHE_S = 60


@dataclass
class Deps:
    """Satisfies handlers.deps.HandlerDeps (what handlers see of it)."""

    settings: Settings
    redis: redis.Redis
    runtime: ServingTarget  # the configured service's serving target (the default one)
    model_server: ModelServer
    telemetry: Telemetry
    endpoint: LLMEndpoint  # the model's OpenAI-compatible API
    evals: AgentEvals  # `/gemma eval`: the agent scored over the sandbox's recorded scenarios
    chat: AsyncWebClient | None = None  # Slack, for posts outside a command (alerts); None in the console
    logs: Logs | None = None
    metrics: Metrics | None = None
    agent: Agent | None = None  # the agent (tool-calling loop), when wired
    streams: StreamClients | None = None  # the bench load generator's connections to the model endpoint
    sandbox: Sandbox | None = None  # when the bot runs on the simulated project
    preflight: PreflightSources | None = None  # what deploy/redeploy plans check before Confirm
    clock: Clock = REAL_CLOCK  # background waits (a canary's comparison); the sandbox's clock in the sandbox
    # Where an error id can be looked up; the console logs to a file and says which.
    log_location: str = "the bot's log (JSON lines on the stdout of `gemma-sre serve`; on Cloud Run, Cloud Logging)"
    # Other serving targets wired beside the default, by kind, and the services that run on them.
    extra_targets: dict[str, ServingTarget] = field(default_factory=dict)
    service_targets: dict[str, str] = field(default_factory=dict)
    learned_targets: dict[str, str] = field(default_factory=dict)  # names the targets answered for (registry.py)
    unwired_targets: dict[str, str] = field(default_factory=dict)  # kind -> what to set to wire it
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    _shares: FairShares | None = None
    _stopping: bool = False

    @property
    def targets(self) -> Targets:
        """Which target serves what: the default, the others wired, and the services on them."""
        default = self.runtime
        return Targets(
            by_kind={default.kind: default, **self.extra_targets},
            default_kind=default.kind,
            services=self.service_targets,
            default_service=self.settings.vllm_service_name,
            learned=self.learned_targets,
            unwired=self.unwired_targets,
        )

    @property
    def writes(self) -> WriteFlow:
        """The write flow (plan -> confirm -> run) over this process's runtime, store and settings."""
        st = self.settings
        plans = PlanStore(self.redis, st.key("plan"), st.plan_ttl_s)
        return WriteFlow(
            targets=self.targets,
            env=DeployEnv(
                service=st.vllm_service_name,
                region=st.google_cloud_location,
                project=st.google_cloud_project,
                image=st.vllm_image,
                model_bucket=st.model_bucket,
                hf_token_secret=st.hf_token_secret,
                service_account=st.vllm_service_account,
                metrics_sidecar=st.vllm_metrics_sidecar,
            ),
            plans=plans,
            gate=WriteGate(
                store=self.redis,
                plans=plans,
                lock_prefix=st.key("lock", "service"),
                lock_ttl_s=st.deploy_lock_ttl_s,
                audit_key=st.key("audit"),
                deployers=st.deployers,
                deployer_usergroup=st.deployer_usergroup_id,
                usergroup_members=self._usergroup_members(),
                clock=self.clock.now,  # a watch's durations on the time its service's logs are on
            ),
            incidents=IncidentStore(self.redis, st.key_prefix),
            status_cache_prefix=st.key("status"),
            poll_s=st.deploy_poll_s,
            preflight=self.preflight,
        )

    def _usergroup_members(self) -> UsergroupMembers | None:
        """Slack usergroups.users.list behind a plain callable, cached briefly (the API is rate-limited)."""
        chat = self.chat
        if chat is None:
            return None
        cache = ShortCache(self.redis, self.settings.key, "usergroup", _GROUP_CACHE_S)

        async def members(group: str) -> list[str]:
            cached = await cache.get(group)
            if cached is not None:
                return [str(u) for u in cached]
            resp = await chat.usergroups_users_list(usergroup=group)
            users = [str(u) for u in resp.get("users") or []]
            await cache.put(group, users)
            return users

        return members

    @property
    def shares(self) -> FairShares:
        if self._shares is None:
            self._shares = FairShares()
        return self._shares

    def spawn(self, coro: Coroutine[Any, Any, Any], *, kind: str = "system", user: str = "") -> asyncio.Task[Any]:
        """Run work after an ack, keeping a reference so it is not garbage-collected mid-flight.

        It waits for a fair share (bot/fair_share.py: per user and per kind -- "read", "write", "watch",
        "system"): a burst from one user queues behind that user's own work instead of flooding the event loop
        or starving everyone else, and acks (which Slack wants within 3 s) keep their turn."""
        task = asyncio.get_running_loop().create_task(self._bounded(kind, user, coro))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        # A task cancelled before its first step never reaches _bounded's `finally`: close the work here too.
        task.add_done_callback(lambda _t: _discard(coro))
        return task

    def watching(self, user: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Around a long wait inside background work (a deploy's progress): counted as a watcher from there."""
        return self.shares.watching(user)

    async def _bounded(self, kind: str, user: str, coro: Coroutine[Any, Any, Any]) -> Any:
        try:
            async with self.shares.slot(kind, user):
                if self._stopping:  # queued when shutdown began: its clients are about to close
                    return None
                return await coro
        except Exception:
            # Said now, with its traceback, rather than "Task exception was never retrieved" at some GC.
            log.exception("background work %s failed", getattr(coro, "__qualname__", "?"))
            return None
        finally:
            _discard(coro)  # never started (cancelled while queued): no "was never awaited" warning

    async def stop_background(self, grace_s: float = 5.0) -> None:
        """At shutdown, before the clients close: work still queued never starts; work running gets `grace_s`,
        then is cancelled (rather than failing on a closed client with a traceback)."""
        self._stopping = True
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=grace_s)
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def drain(self, timeout_s: float = 10.0) -> None:
        """Wait for work started after acks (shutdown, tests)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)


def _discard(coro: Coroutine[Any, Any, Any]) -> None:
    """Close work that may never have started. Python 3.11 warns "was never awaited" from close() itself on an
    unstarted coroutine; here that is intended (the work was refused a slot or cancelled while queued)."""
    if inspect.getcoroutinestate(coro) == inspect.CORO_CREATED:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            coro.close()
    else:
        coro.close()

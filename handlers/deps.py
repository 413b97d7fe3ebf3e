"""What a handler sees of the wired dependencies, as Protocols: bot/ builds the real ones (bot/deps.py,
bot/wiring.py) and hands them over; handlers never import bot/.

bot.deps.Deps satisfies HandlerDeps structurally (mypy checks it where bot passes its Deps to a handler).
Members are read-only properties so a concrete attribute (an Agent, an LLMEndpoint) satisfies its Protocol.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any, NamedTuple, Protocol

from pydantic import SecretStr

from skills.clock import Clock
from skills.deploy.flow import WriteFlow
from skills.diagnosis.agent_eval import Score
from skills.diagnosis.remediation import ProposedAction, RemediationProposal
from skills.ports import Logs, Metrics, ModelEndpoint, ModelServer, Store, StreamClients
from skills.targets.registry import Targets

Progress = Callable[[str], Awaitable[None]]


class HandlerSettings(Protocol):
    """The settings handlers read (bot.settings.Settings has these and more; see it for what each means)."""

    alert_channel_lease_ms: int
    alert_coalesce_interval_s: float
    alert_fix_check_s: float
    alert_group_window_s: int
    alert_header_debounce_s: float
    alert_max_attempts: int
    alert_max_body_bytes: int
    alert_reclaim_idle_ms: int
    alert_storm_edit_interval_s: float
    alert_storm_threshold_per_min: int
    alert_webhook_password: SecretStr | None
    alert_webhook_token: SecretStr | None
    alert_webhook_user: str
    deploy_lock_ttl_s: int
    deploy_poll_s: float
    canary_window_s: float
    canary_poll_s: float
    canary_max_wait_s: float
    canary_min_requests: int
    canary_max_error_rate_increase: float
    canary_max_latency_ratio: float
    canary_auto_rollback: bool
    canary_rollback_identity: str
    canary_lease_ms: int
    deployer_usergroup_id: str
    google_cloud_location: str
    google_cloud_project: str | None
    hf_token_secret: str
    key_prefix: str
    log_max_bytes: int
    log_max_entries: int
    log_token_budget: int
    model_bucket: str | None
    plan_ttl_s: int
    runbooks_dir: str | None
    slack_alerts_channel: str
    slack_post_burst: int
    slack_post_per_s: float
    slack_update_per_min: float
    status_cache_ttl_s: int
    vllm_base_url: str | None
    vllm_image: str | None
    vllm_service_account: str | None
    vllm_service_name: str

    @property
    def deployers(self) -> frozenset[str]:
        """Slack user ids allowed to run writes."""
        ...

    def key(self, *parts: str) -> str:
        """A Redis key under the deployment's prefix."""
        ...


class Conversations(Protocol):
    """`/gemma ask` threads' histories."""

    async def start(self, thread_ts: str) -> None: ...

    async def get(self, thread_ts: str) -> list[dict[str, str]] | None: ...

    async def append(self, thread_ts: str, question: str, answer: str) -> None: ...


class AgentAnswer(Protocol):
    @property
    def text(self) -> str: ...

    @property
    def proposed(self) -> list[ProposedAction]: ...


class AgentRun(Protocol):
    """How the tool-calling loop went (for a footer)."""

    @property
    def steps(self) -> int: ...

    @property
    def executed(self) -> list[str]: ...


class AgentAnalysis(Protocol):
    @property
    def plan(self) -> RemediationProposal: ...

    @property
    def loop(self) -> AgentRun | None: ...

    @property
    def tokens_sent(self) -> int: ...


class Agent(Protocol):
    """The model as on-call agent (bot/agent): investigations and threaded conversations."""

    @property
    def conversations(self) -> Conversations: ...

    @property
    def endpoint(self) -> ModelEndpoint:
        """The model it thinks with (in the sandbox: VLLM_BASE_URL's, never the simulated server)."""
        ...

    async def ask(
        self, history: list[dict[str, str]], question: str, progress: Progress | None = None
    ) -> AgentAnswer: ...

    async def analyze(
        self,
        since_minutes: int = 60,
        context: str = "",
        progress: Progress | None = None,
        service: str | None = None,
    ) -> AgentAnalysis: ...


class AgentEvals(Protocol):
    """Scores the served model as the agent over recorded scenarios (bot/agent_eval_run.py)."""

    def scenarios(self) -> list[str]:
        """The known scenario names, sorted."""
        ...

    async def run(self, base_url: str, model: str, names: list[str], progress: Progress) -> list[Score]:
        """Every scenario in `names` (all when empty) against the model at `base_url`."""
        ...


class SlackAnswer(Protocol):
    def get(self, key: str, default: None = None) -> Any: ...


class SlackDirectory(Protocol):
    """The Slack Web API calls handlers make outside a command's responder."""

    async def usergroups_users_list(self, *, usergroup: str) -> SlackAnswer: ...


class SandboxScenario(NamedTuple):
    """One sandbox scenario as `/gemma sandbox` lists it."""

    name: str
    summary: str  # what happens
    kind: str  # the finding /gemma diagnose should make, or where it shows
    alert: str  # the Cloud Monitoring alert policy (Azure Monitor alert rule) whose incident it opens ("": none)


class Sandbox(Protocol):
    """The simulated project (bot/sandbox), when the bot runs on it."""

    def scenario_list(self) -> list[SandboxScenario]: ...

    def describe(self) -> str: ...

    async def fire(self, name: str, on_event: Progress) -> None: ...


class HandlerDeps(Protocol):
    @property
    def settings(self) -> HandlerSettings: ...

    @property
    def redis(self) -> Store: ...

    @property
    def targets(self) -> Targets:
        """The serving target of each service (skills/targets/registry.py): handlers ask it, never a kind."""
        ...

    @property
    def model_server(self) -> ModelServer: ...

    @property
    def endpoint(self) -> ModelEndpoint: ...

    @property
    def chat(self) -> SlackDirectory | None: ...

    @property
    def logs(self) -> Logs | None: ...

    @property
    def metrics(self) -> Metrics | None: ...

    @property
    def agent(self) -> Agent | None: ...

    @property
    def evals(self) -> AgentEvals: ...

    @property
    def streams(self) -> StreamClients | None: ...

    @property
    def writes(self) -> WriteFlow: ...

    @property
    def clock(self) -> Clock:
        """What background waits run on (the sandbox's clock in the sandbox; a test's scaled clock)."""
        ...

    @property
    def sandbox(self) -> Sandbox | None: ...

    @property
    def log_location(self) -> str:
        """Where the bot's log lines go (a file for the console), for error messages that cite an error id."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, Any], *, kind: str = "system", user: str = "") -> Awaitable[Any]:
        """Run work after an ack, in its fair share (kind: read, write, watch, system; per user); a failure is
        logged."""
        ...

    def watching(self, user: str) -> AbstractAsyncContextManager[None]:
        """Around a long wait inside background work: from there it is counted as a watcher."""
        ...

"""Settings from the environment (pydantic-settings).

Every remote endpoint is a setting: real deployments need private/regional endpoints (GovSlack, PSC) and
tests point them at local stand-ins. `load_settings()` collects every problem into one message.
"""

from __future__ import annotations

import re
from typing import get_origin

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings import SettingsError as PydanticSettingsError


class SettingsError(Exception):
    """Raised with one message that names every invalid or missing setting."""


class Settings(BaseSettings):
    # A `.env` in the working directory is read when present (real environment variables win).
    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore", case_sensitive=False)

    # --- Slack -----------------------------------------------------------------------------------------
    slack_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    # Socket Mode (no public URL): an app-level token (xapp-…, scope connections:write). Set: the bot connects
    # out over a WebSocket instead of receiving /slack/events.
    slack_app_token: SecretStr | None = None
    slack_api_url: str = "https://slack.com/api/"
    slack_alerts_channel: str = "#gemma-alerts"
    # Who may confirm write actions: Slack user ids (comma separated) and/or a user group id.
    deployer_user_ids: str = ""
    deployer_usergroup_id: str = ""

    # --- State -----------------------------------------------------------------------------------------
    # Unset: an in-process store with the same interface (fakeredis), for the console and quick trials.
    redis_url: str | None = None
    key_prefix: str = "gemma-sre"
    status_cache_ttl_s: int = Field(default=30, ge=1, le=3600)

    # --- Google Cloud ----------------------------------------------------------------------------------
    google_cloud_project: str | None = None
    google_cloud_location: str = "us-central1"
    vllm_service_name: str = "vllm-gemma4"
    cloud_run_api_endpoint: str | None = None
    cloud_logging_api_endpoint: str | None = None
    cloud_monitoring_api_endpoint: str | None = None
    # Each blocking cloud client (Cloud Run, Logging, Monitoring) gets its own threads and a per-call deadline
    # (retries included), so one slow API degrades only the commands that need it.
    cloud_call_deadline_s: float = Field(default=15.0, gt=0, le=300)
    cloud_client_threads: int = Field(default=4, ge=1, le=64)
    # Tests and local stand-ins: skip Application Default Credentials entirely.
    google_anonymous_credentials: bool = False

    # --- Model server (vLLM, OpenAI-compatible) --------------------------------------------------------
    vllm_base_url: str | None = None
    vllm_model_id: str | None = None
    vllm_api_key: SecretStr | None = None
    model_timeout_s: float = Field(default=60.0, gt=0)
    probe_timeout_s: float = Field(default=5.0, gt=0)

    # --- Agent -----------------------------------------------------------------------------------------
    agent_max_steps: int = Field(default=6, ge=1, le=30)
    agent_tool_result_tokens: int = Field(default=1500, ge=100)
    agent_time_budget_s: float = Field(default=120.0, gt=0)
    agent_cold_start_budget_s: float = Field(default=900.0, ge=0)
    conversation_ttl_s: int = Field(default=86400, ge=60)

    # --- Logs / diagnosis ------------------------------------------------------------------------------
    log_token_budget: int = Field(default=3000, ge=200)
    log_max_entries: int = Field(default=20000, ge=100)
    log_max_bytes: int = Field(default=20_000_000, ge=10_000)

    # --- Alerts ----------------------------------------------------------------------------------------
    alert_webhook_user: str = "gemma-sre"
    alert_webhook_password: SecretStr | None = None
    alert_webhook_token: SecretStr | None = None
    alert_max_body_bytes: int = Field(default=256 * 1024, ge=1024)
    alert_group_window_s: int = Field(default=1800, ge=0)
    alert_max_attempts: int = Field(default=5, ge=1)
    alert_reclaim_idle_ms: int = Field(default=60_000, ge=100)
    # Cloud Monitoring -> Pub/Sub topic -> this subscription (projects/P/subscriptions/S, or S in
    # GOOGLE_CLOUD_PROJECT): alerts without a public URL. Unset: webhooks only.
    alert_pubsub_subscription: str | None = None
    # Storms (skills/incidents/publisher.py): repeats of an incident within the interval become one thread line;
    # header edits wait at least the debounce and show the latest state; beyond the threshold of new incidents
    # per minute on one channel, a storm summary lists them all at once while their threads open one by one.
    alert_coalesce_interval_s: float = Field(default=60.0, ge=0)
    alert_header_debounce_s: float = Field(default=5.0, ge=0)
    alert_storm_threshold_per_min: int = Field(default=10, ge=1)
    alert_storm_edit_interval_s: float = Field(default=2.0, ge=0)
    # A fix confirmed from an incident's thread is followed up: "fix applied; condition still firing after N min"
    # when its condition has not cleared this long after the fix completed. An estimate: Cloud Monitoring closes
    # an incident once its condition has been false for the condition's duration window plus evaluation delay
    # (https://cloud.google.com/monitoring/alerts/concepts-indepth), commonly 5 min or less; 10 min leaves room.
    alert_fix_check_s: float = Field(default=600.0, gt=0)
    # The lease one instance holds to post into a channel (renewed while working; a dead holder's expires).
    alert_channel_lease_ms: int = Field(default=10_000, ge=100)
    # Our own pacing of chat.postMessage per channel, matching Slack's documented 1/s with a short burst.
    slack_post_per_s: float = Field(default=1.0, gt=0)
    slack_post_burst: int = Field(default=3, ge=1)
    slack_update_per_min: float = Field(default=50.0, gt=0)

    # --- Deploy ----------------------------------------------------------------------------------------
    # Unset: the per-GPU default image from skills/data/vllm_images.yaml (a plan checks any image against it).
    vllm_image: str | None = None
    vllm_service_account: str | None = None  # the vLLM service's runtime identity
    model_bucket: str | None = None
    hf_token_secret: str = "hf-token"
    # Deploys add the Managed Service for Prometheus sidecar, which writes vLLM's /metrics to Cloud Monitoring
    # (the vLLM alert policies read those series): skills/targets/cloud_run/metrics_sidecar.py. Off by default.
    vllm_metrics_sidecar: bool = False
    # Runbooks, one <finding kind>.md each (skills/incidents/runbooks.py); unset: ./runbooks, else the repository's.
    runbooks_dir: str | None = None
    plan_ttl_s: int = Field(default=900, ge=30)
    deploy_lock_ttl_s: int = Field(default=3600, ge=60)
    # How often a deploy polls Cloud Run while it waits for the new revision (progress is edited in place).
    deploy_poll_s: float = Field(default=5.0, gt=0, le=60)
    # Canary deploys (`--canary N`; skills/deploy/canary_watch.py): how long and how often the new revision is
    # compared with the stable one, the sample a verdict needs, what counts as a regression (this bot's policy),
    # and whether a clear regression is rolled back without a click (under its own identity, audited).
    canary_window_s: float = Field(default=600.0, gt=0)
    canary_poll_s: float = Field(default=60.0, gt=0)
    canary_max_wait_s: float = Field(default=3600.0, gt=0)
    canary_min_requests: int = Field(default=50, ge=1)
    canary_max_error_rate_increase: float = Field(default=0.01, ge=0, le=1)
    canary_max_latency_ratio: float = Field(default=1.5, gt=1)
    canary_auto_rollback: bool = False
    canary_rollback_identity: str = "gemma-sre-canary"
    # The lease one bot process holds while it watches a canary (renewed every third of it; a stopped process's
    # lapses, and the next start takes the watch over: skills/deploy/canary_state.py).
    canary_lease_ms: int = Field(default=30_000, ge=100)

    # --- Preflight (skills/deploy/preflight.py): what a deploy plan checks before Confirm ------------------------
    # The bot's copy of the token the vLLM service downloads with (on Cloud Run: the HF_TOKEN_SECRET secret
    # mounted as HF_TOKEN on the bot too); unset: the Hub is asked anonymously and gated models are "could not check".
    hf_token: SecretStr | None = None
    hf_endpoint: str = "https://huggingface.co"
    # Registry host -> base URL overrides (JSON, e.g. {"docker.io": "http://127.0.0.1:5000"}); others are
    # https://HOST, Docker Hub (docker.io) is https://registry-1.docker.io.
    registry_endpoints: dict[str, str] = Field(default_factory=dict)
    storage_api_endpoint: str | None = None  # Cloud Storage JSON API (google-cloud-storage)
    cloud_quotas_api_endpoint: str | None = None  # Cloud Quotas API (google-cloud-quotas, REST)
    # Cloud TPU target (profiles with `target: cloud-tpu`; skills/targets/tpu): the API endpoint, the service name a
    # TPU deploy gets, the VPC the bot and the node share, vLLM's --api-key secret, the wait per zone, the zones.
    cloud_tpu_api_endpoint: str | None = None
    tpu_service_name: str = Field(default="vllm-gemma4-tpu", pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
    tpu_network: str = ""
    tpu_api_key_secret: str = "vllm-api-key"
    tpu_queue_wait_s: int = Field(default=900, ge=60, le=86400)
    tpu_zones: list[str] = Field(default_factory=list)
    tpu_endpoint_template: str = "http://{ip}:8000"  # how the bot reaches a node's vLLM (its internal IP)
    # Azure Container Apps target (profiles with `target: azure-container-apps`; skills/targets/aca): the subscription,
    # resource group and managed environment (workload profiles) the apps live in, its region (read from the
    # environment when empty), the app name an ACA deploy gets, the Key Vault secret URL holding vLLM's --api-key and
    # the user-assigned identity that reads it, the ARM endpoint (unset: Azure's), how the bot reaches an app's FQDN.
    # Credentials: DefaultAzureCredential (AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET, a managed identity
    # or `az login`).
    azure_subscription_id: str = ""
    aca_resource_group: str = ""
    aca_environment: str = ""
    aca_location: str = ""
    aca_service_name: str = Field(default="vllm-gemma4-aca", pattern=r"^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$")
    aca_api_key_secret_url: str = ""
    aca_identity: str = ""
    azure_resource_manager_endpoint: str | None = None
    aca_endpoint_template: str = "https://{fqdn}"
    # The environment's Log Analytics workspace (its customer ID, a GUID) for the apps' console and system logs, and
    # its query endpoint (unset: Azure's); empty: no logs for ACA apps (status and deploys still work).
    aca_log_analytics_workspace_id: str = ""
    aca_log_analytics_endpoint: str | None = None
    preflight_timeout_s: float = Field(default=5.0, gt=0, le=60)  # each check's time limit
    preflight_cache_s: int = Field(default=60, ge=0, le=3600)  # how long a check's pass is reused

    # --- Sandbox (a simulated project on this machine: `console` without credentials, `--sandbox`) -------
    # Simulated seconds per real second: a cold start of minutes plays in seconds (0 stops the clock).
    sandbox_speed: float = Field(default=30.0, ge=0)

    # --- MCP server (`gemma-sre mcp`: the skills as tools for coding agents; bot/mcp_server.py) ------------
    # Streamable HTTP callers: who each bearer token names, as JSON {"<Slack user id>": "<token>"}. The caller
    # named is the Slack user the deployer check and the audit see. No tokens: --http refuses to start.
    mcp_tokens: dict[str, SecretStr] = Field(default_factory=dict)
    # Who a stdio client acts as (it is the local user's own process): a Slack user id. Unset: "mcp-stdio", or
    # the console's user in the sandbox.
    mcp_stdio_user: str = ""
    # Where write plans are posted for a deployer to confirm with the usual buttons (default: SLACK_ALERTS_CHANNEL).
    mcp_plan_channel: str = ""
    # MCP elicitation (the client asks its human) as a confirmation path besides Slack; never for destroy.
    # Unset: on in the sandbox (the console user is the human), off elsewhere.
    mcp_elicit_confirm: bool | None = None
    # Per caller: tool calls per minute, and of those the ones that cost (health, query, bench, eval) or plan a write.
    mcp_calls_per_min: int = Field(default=60, ge=1, le=10_000)
    mcp_costly_per_min: int = Field(default=6, ge=1, le=1000)

    # --- Process ---------------------------------------------------------------------------------------
    port: int = Field(default=8080, ge=1, le=65535)
    log_level: str = "INFO"

    @field_validator("*", mode="before")
    @classmethod
    def _strip(cls, v: object) -> object:
        # A secret pasted with a trailing newline (Secret Manager, .env) must not turn every call into a 401.
        return v.strip() if isinstance(v, str) else v

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, v: str | None) -> str | None:
        if not v:
            return None
        if not v.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"not a Redis URL (expected redis://HOST:PORT/DB, rediss:// or unix://), got {v[:40]!r}")
        return v

    @field_validator("slack_app_token")
    @classmethod
    def _app_token(cls, v: SecretStr | None) -> SecretStr | None:
        if v is None or not v.get_secret_value():
            return None
        if not v.get_secret_value().startswith("xapp-"):
            raise ValueError("must be an app-level token (xapp-…, Slack app > Basic Information > App-Level Tokens)")
        return v

    @field_validator("alert_pubsub_subscription")
    @classmethod
    def _subscription(cls, v: str | None) -> str | None:
        if not v:
            return None
        parts = v.split("/")
        if "/" in v and not (len(parts) == 4 and parts[0] == "projects" and parts[2] == "subscriptions" and all(parts)):
            raise ValueError("must be projects/PROJECT/subscriptions/NAME or just NAME")
        return v

    @field_validator("slack_api_url")
    @classmethod
    def _trailing_slash(cls, v: str) -> str:
        # slack-sdk joins base_url + method name, so the base must end with '/'.
        return v if v.endswith("/") else v + "/"

    @field_validator("mcp_elicit_confirm", mode="before")
    @classmethod
    def _unset_when_empty(cls, v: object) -> object:
        return None if isinstance(v, str) and not v.strip() else v  # `MCP_ELICIT_CONFIRM=` means the default

    @field_validator("vllm_image", "vllm_service_account")
    @classmethod
    def _empty_is_unset(cls, v: str | None) -> str | None:
        return v.strip() or None if v is not None else None

    @field_validator("log_level")
    @classmethod
    def _level(cls, v: str) -> str:
        v = v.upper()
        if v not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR")
        return v

    @property
    def preflight_io_timeout_s(self) -> float:
        """The preflight clients' own I/O timeout: past each check's limit, so the limit (asyncio.wait_for in
        skills/deploy/preflight.py) decides and is what the user reads; this one only ends the blocking call a cut
        check leaves running in its thread."""
        return self.preflight_timeout_s * 1.5 + 1.0

    @property
    def deployers(self) -> frozenset[str]:
        return frozenset(u.strip() for u in self.deployer_user_ids.split(",") if u.strip())

    def key(self, *parts: str) -> str:
        """A namespaced Redis key: gemma-sre:<part>:<part>..."""
        return ":".join((self.key_prefix, *parts))

    def serve_problems(self) -> list[str]:
        """What `serve` needs that the console does not."""
        problems = []
        if not self.slack_bot_token:
            problems.append("SLACK_BOT_TOKEN is required (xoxb-…, from the Slack app's OAuth page)")
        if not self.slack_signing_secret and not self.slack_app_token:
            problems.append(
                "SLACK_SIGNING_SECRET is required (Slack app > Basic Information), "
                "or SLACK_APP_TOKEN (xapp-…) for Socket Mode"
            )
        if not self.redis_url:
            problems.append("REDIS_URL is required for serve (e.g. redis://10.0.0.3:6379/0)")
        if self.alert_pubsub_subscription and "/" not in self.alert_pubsub_subscription:
            if not self.google_cloud_project:
                problems.append("ALERT_PUBSUB_SUBSCRIPTION without a project needs GOOGLE_CLOUD_PROJECT")
        return problems

    @property
    def pubsub_subscription_path(self) -> str | None:
        s = self.alert_pubsub_subscription
        if not s or "/" in s:
            return s
        return f"projects/{self.google_cloud_project}/subscriptions/{s}"


# What each JSON setting looks like (README's configuration table says the same).
_JSON_EXAMPLES = {
    "mcp_tokens": '{"U0123ABCD": "<bearer token>"}',
    "tpu_zones": '["us-east5-b", "europe-west4-a"]',
    "registry_endpoints": '{"docker.io": "http://127.0.0.1:5000"}',
}


def _unparsable(exc: PydanticSettingsError) -> str:
    """'MCP_TOKENS: not valid JSON (…); expected a JSON object, e.g. …' from pydantic-settings' parse error."""
    m = re.search(r'for field "(\w+)"', str(exc))
    name = m.group(1) if m else ""
    field = Settings.model_fields.get(name)
    if field is None:
        return str(exc)
    why = f" ({exc.__cause__})" if isinstance(exc.__cause__, ValueError) else ""
    shape = "a JSON object" if get_origin(field.annotation) is dict else "a JSON array"
    example = _JSON_EXAMPLES.get(name, "")
    return f"{name.upper()}: not valid JSON{why}; expected {shape}" + (f", e.g. {example}" if example else "")


def load_settings(**overrides: object) -> Settings:
    """Build Settings, turning pydantic's errors into one readable message."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except PydanticSettingsError as exc:
        # A complex setting (a list or a mapping) whose text is not JSON: pydantic-settings stops before
        # validation, naming only the field. Its value is never quoted: MCP_TOKENS holds secrets.
        raise SettingsError(f"invalid settings:\n  {_unparsable(exc)}") from None
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            name = ".".join(str(p) for p in err["loc"]).upper()
            msg = str(err["msg"]).removeprefix("Value error, ")
            lines.append(f"{name}: {msg}")
        raise SettingsError("invalid settings:\n  " + "\n  ".join(lines)) from None

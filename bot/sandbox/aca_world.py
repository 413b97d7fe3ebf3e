"""The sandbox's Azure: a subscription with one resource group and one managed environment that has the GPU
workload profiles of skills/data/aca.yaml, their quota, the ARM stand-in (over HTTPS), the replicas' simulated vLLM,
Log Analytics and Azure Monitor metrics, all on 127.0.0.1. The bot reaches it with the real Azure SDK clients, a
local bearer token and the stand-ins' own CA, exactly as it reaches Azure."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.adapters.container_apps import StaticTokenCredential
from bot.sandbox.aca_api import AcaStandIn, serve_aca
from bot.sandbox.aca_metrics_api import AcaMetricsStandIn
from bot.sandbox.aca_replicas import AcaReplicas
from bot.sandbox.aca_users import AcaUsers
from bot.sandbox.clock import SandboxClock
from bot.sandbox.log_analytics_api import LogAnalyticsStandIn, serve_log_analytics
from bot.sandbox.server import serve
from skills.capacity.aca_catalog import load_aca_catalog

SUBSCRIPTION = "5a1d0b00-0000-4000-8000-000000000000"
RESOURCE_GROUP = "gemma-sre-sandbox"
ENVIRONMENT = "gemma-env"
WORKSPACE = "3f0c1e6a-0000-4000-8000-00000000a11c"
IDENTITY = (
    f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}/providers/Microsoft.ManagedIdentity/"
    "userAssignedIdentities/gemma-sre-vllm"
)
KEY_VAULT_SECRET = "https://gemma-sre-sandbox.vault.azure.net/secrets/vllm-api-key"


@dataclass(frozen=True)
class AzureAccess:
    """How the bot's Azure clients reach the sandbox: its token and each stand-in's CA file."""

    credential: Any
    arm_verify: str  # the ARM stand-in's (Container Apps and metrics)
    logs_verify: str  # the Log Analytics stand-in's
    now: Callable[[], datetime]  # the sandbox's Azure time, as a date (metrics windows end there)
    polling_interval: float = 0.05  # how often the SDK polls an operation (real seconds)


class AcaWorld:
    def __init__(self, clock: SandboxClock, *, gpu_quota: int = 4) -> None:
        aca = load_aca_catalog()
        self._clock = clock
        # A region that offers every serverless GPU profile (aca.yaml), so both the A100 and the T4 deploy here.
        self.location = aca.sandbox_region()
        self.token = secrets.token_urlsafe(16)
        self.epoch = datetime.now(UTC)  # simulated second 0 of the sandbox's Azure, as a date
        self.standin = AcaStandIn(
            SUBSCRIPTION,
            RESOURCE_GROUP,
            ENVIRONMENT,
            self.location,
            now=clock.now,
            default_domain=f"{secrets.token_hex(4)}-{secrets.token_hex(2)}.{self.location}.azurecontainerapps.io",
            # 0: the SDK polls at the adapter's own interval (POLL_S), not a whole real second, which at the
            # sandbox's speed would be minutes of simulated time between two looks at an operation
            retry_after_s=0,
            token=self.token,
            epoch=self.epoch,
        )
        self.replicas = AcaReplicas(self.standin, clock.now)
        self.logs = LogAnalyticsStandIn(self.standin, self.replicas, WORKSPACE, now=clock.now, token=self.token)
        self.users = AcaUsers(clock, self.standin, self.replicas)  # requests while a canary splits traffic
        self.metrics = AcaMetricsStandIn(self.standin, self.replicas, now=clock.now)
        self.metrics.install()
        serverless = [p for p in aca.profiles.values() if p.serverless]
        self.standin.available_types(
            self.location, [p.type for p in aca.profiles.values() if self.location in p.regions]
        )
        for p in serverless:  # the environment has every serverless GPU profile, named as its type
            self.standin.add_profile(p.type, p.type, usage=p.quota_usage)
            if p.quota_usage:
                self.standin.set_usage(p.quota_usage, gpu_quota * p.quota_per_gpu)
        self.urls: dict[str, str] = {}
        self.ca_files: dict[str, str] = {}

    def start(self, stack: contextlib.ExitStack) -> None:
        self.urls["arm"], self.ca_files["arm"] = stack.enter_context(serve_aca(self.standin))
        self.urls["apps"] = stack.enter_context(serve(self.replicas))
        self.replicas.base_url = self.urls["apps"]
        self.urls["logs"], self.ca_files["logs"] = stack.enter_context(serve_log_analytics(self.logs))

    def access(self) -> AzureAccess:
        return AzureAccess(
            StaticTokenCredential(self.token),
            self.ca_files["arm"],
            self.ca_files["logs"],
            lambda: self.epoch + timedelta(seconds=self._clock.now()),
        )

    def settings_update(self) -> dict[str, Any]:
        return {
            "azure_subscription_id": SUBSCRIPTION,
            "aca_resource_group": RESOURCE_GROUP,
            "aca_environment": ENVIRONMENT,
            "aca_location": "",  # read from the environment, as in production
            "azure_resource_manager_endpoint": self.urls["arm"],
            "aca_endpoint_template": self.urls["apps"] + "/apps/{fqdn}",
            "aca_api_key_secret_url": KEY_VAULT_SECRET,
            "aca_identity": IDENTITY,
            "aca_log_analytics_workspace_id": WORKSPACE,
            "aca_log_analytics_endpoint": self.urls["logs"],
        }

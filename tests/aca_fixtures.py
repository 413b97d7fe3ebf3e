"""The ACA stand-in served over HTTPS on 127.0.0.1, the adapter on the real SDK client pointed at it, and the
replicas' ingress: what tests/test_aca_standin.py and tests/test_aca_adapter.py share."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from bot.adapters.container_apps import ContainerApps, StaticTokenCredential
from bot.sandbox.aca_api import AcaStandIn, serve_aca
from bot.sandbox.aca_replicas import AcaReplicas
from bot.sandbox.clock import SandboxClock
from bot.sandbox.server import serve
from skills.targets.aca.api import OperationState
from skills.targets.aca.target import DEFAULT_IMAGE

SUB = "00000000-0000-4000-8000-000000000054"
RG = "rg-gemma"
ENV = "env-gemma"
LOC = "swedencentral"
DOMAIN = "kindsea-1234abcd.swedencentral.azurecontainerapps.io"
GPU = "gpu-a100"
A100 = "Consumption-GPU-NC24-A100"
QUOTA = "SubscriptionConsumptionNCA100Gpus"
MODEL = "google/gemma-4-12b-it"


@dataclass
class Aca:
    standin: AcaStandIn
    api: ContainerApps
    clock: SandboxClock
    replicas: AcaReplicas
    url: str
    ca: str

    def env_id(self) -> str:
        return self.standin.environment_id

    async def done(self, handle: str, limit_s: float = 3.0) -> OperationState:
        """Poll `operation` until the poller (its own task, 10 ms apart) reports done."""
        loop = asyncio.get_running_loop()
        end = loop.time() + limit_s
        while True:
            state = await self.api.operation(handle)
            if state.done or loop.time() > end:
                return state
            await asyncio.sleep(0.01)


@asynccontextmanager
async def aca_env(*, gpu_quota: float = 2) -> AsyncIterator[Aca]:
    clock = SandboxClock(speed=0)  # time moves when a test advances it
    standin = AcaStandIn(SUB, RG, ENV, LOC, now=clock.now, default_domain=DOMAIN, retry_after_s=0)
    standin.add_profile(GPU, A100, usage=QUOTA)
    standin.set_usage(QUOTA, gpu_quota, display="Subscription Consumption NCA100 GPUs")
    standin.available_types(LOC, ["Consumption", A100, "Consumption-GPU-NC8as-T4"])
    replicas = AcaReplicas(standin, clock.now)
    with serve_aca(standin) as (url, ca), serve(replicas) as ingress:
        replicas.base_url = ingress
        api = ContainerApps(
            SUB, RG, ENV, base_url=url, credential=StaticTokenCredential(), connection_verify=ca, polling_interval=0.01
        )
        try:
            yield Aca(standin, api, clock, replicas, url, ca)
        finally:
            await api.aclose()


def app_body(
    env_id: str,
    *,
    profile: str = GPU,
    mode: str = "Multiple",
    min_replicas: int = 1,
    traffic: list[dict[str, Any]] | None = None,
    args: list[str] | None = None,
    suffix: str | None = None,
) -> dict[str, Any]:
    """A container app as the ACA target renders it (skills/targets/aca/spec.py render_app, trimmed)."""
    template: dict[str, Any] = {
        "containers": [
            {
                "name": "vllm",
                "image": DEFAULT_IMAGE,  # a release that runs Gemma 4 (an older one fails, as it would)
                "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
                "args": args or ["--model", MODEL, "--max-model-len", "8192", "--port", "8000"],
                "resources": {"cpu": 24, "memory": "220Gi"},
                "probes": [
                    {
                        "type": "Startup",
                        "httpGet": {"path": "/health", "port": 8000, "scheme": "HTTP"},
                        "initialDelaySeconds": 60,
                        "periodSeconds": 120,
                        "failureThreshold": 10,  # ACA's most (aca.yaml probe_limits): 21 min for 12B bf16 from the Hub
                        "timeoutSeconds": 5,
                    }
                ],
            }
        ],
        "scale": {"minReplicas": min_replicas, "maxReplicas": 1},
    }
    if suffix:
        template["revisionSuffix"] = suffix
    return {
        "location": LOC,
        "tags": {"managed-by": "gemma-sre"},
        "properties": {
            "environmentId": env_id,
            "workloadProfileName": profile,
            "configuration": {
                "activeRevisionsMode": mode,
                "ingress": {
                    "external": True,
                    "targetPort": 8000,
                    "transport": "http",
                    "traffic": traffic or [{"latestRevision": True, "weight": 100}],
                },
            },
            "template": template,
        },
    }

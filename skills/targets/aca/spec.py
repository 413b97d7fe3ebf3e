"""The Azure Container Apps target's spec document: a Microsoft.App/containerApps resource as ARM JSON.

The document is the resource as the REST API names its fields (what the SDK's ContainerApp takes and
`az containerapp create --yaml` reads): location, tags, and properties.environmentId, workloadProfileName,
configuration (revision mode, ingress with its traffic weights, secrets) and template (one container, its probes,
the scale rule's replica range). The bot keeps what it deployed in the tags (model, profile) and reads the rest
back from the resource itself.

vLLM runs as on Cloud Run (skills/targets/serving_flags.py: the same flags, listening on VLLM_PORT); its --api-key
comes from a Key Vault secret (an ACA secret with `keyVaultUrl`) read with a user-assigned managed identity, so no
key value ever sits in a plan, a diff or the bot's store. User-assigned, not system-assigned: a system-assigned
identity exists only once the app does, so it cannot have been granted the vault before the app's first revision
reads the secret (the docs grant it after `az containerapp identity assign`). Ingress is external: the bot calls
the app's FQDN.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from pydantic import BaseModel

from skills.serving.changes import FieldChange
from skills.serving.config import ServingConfig
from skills.targets.serving_flags import serving_flags

VLLM_PORT = 8000
CONTAINER = "vllm"
ENTRYPOINT = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
API_KEY_SECRET = "vllm-api-key"  # the app's secret name; its value lives in Key Vault
TAG_MANAGED = "managed-by"
TAG_MODEL = "gemma-sre-model"
TAG_PROFILE = "gemma-sre-profile"
TAG_TYPE = "gemma-sre-workload-profile-type"  # the profile's type (Consumption-GPU-NC24-A100), as planned

# Fields ARM fills in and a PUT must not send back (the REST spec marks them readOnly).
_READ_ONLY_TOP = ("id", "name", "type", "systemData", "etag")
_READ_ONLY_PROPS = (
    "provisioningState",
    "runningStatus",
    "deploymentErrors",
    "latestRevisionName",
    "latestReadyRevisionName",
    "latestRevisionFqdn",
    "customDomainVerificationId",
    "outboundIpAddresses",
    "eventStreamEndpoint",
)


class StartupProbe(BaseModel):
    initial_delay_s: int
    period_s: int
    failure_threshold: int
    timeout_s: int

    @property
    def budget_s(self) -> int:
        return self.initial_delay_s + self.period_s * self.failure_threshold


class AcaDeployConfig(ServingConfig):
    """A resolved ACA deployment: the shared serving configuration and what only ACA asks for."""

    location: str
    environment_id: str
    workload_profile_name: str  # the environment's name for its GPU profile
    workload_profile_type: str  # e.g. Consumption-GPU-NC24-A100
    cpu: float
    memory_gib: float
    probe: StartupProbe
    api_key_secret_url: str  # Key Vault secret URL for vLLM's --api-key
    identity: str  # the user-assigned identity's resource ID (Key Vault Secrets User on that vault)


def vllm_args(cfg: ServingConfig) -> list[str]:
    return serving_flags(cfg, VLLM_PORT).to_args()


def render_app(cfg: AcaDeployConfig) -> dict[str, Any]:
    probe = cfg.probe
    http_get = {"path": "/health", "port": VLLM_PORT, "scheme": "HTTP"}
    return {
        "location": cfg.location,
        "tags": {
            TAG_MANAGED: "gemma-sre",
            TAG_MODEL: cfg.model,
            TAG_PROFILE: cfg.profile,
            TAG_TYPE: cfg.workload_profile_type,
        },
        "identity": {"type": "UserAssigned", "userAssignedIdentities": {cfg.identity: {}}},
        "properties": {
            "environmentId": cfg.environment_id,
            "workloadProfileName": cfg.workload_profile_name,
            "configuration": {
                # Multiple: a new revision starts beside the serving one and traffic moves by weight only when it
                # is ready (rollback and canary name revisions); Single would stop the old one at once.
                "activeRevisionsMode": "Multiple",
                "ingress": {
                    "external": True,
                    "targetPort": VLLM_PORT,
                    "transport": "http",
                    "allowInsecure": False,
                    "traffic": [{"latestRevision": True, "weight": 100}],
                },
                "secrets": [{"name": API_KEY_SECRET, "keyVaultUrl": cfg.api_key_secret_url, "identity": cfg.identity}],
            },
            "template": {
                "containers": [
                    {
                        "name": CONTAINER,
                        "image": cfg.image,
                        "command": list(ENTRYPOINT),
                        "args": vllm_args(cfg),
                        "env": [{"name": "VLLM_API_KEY", "secretRef": API_KEY_SECRET}],
                        "resources": {"cpu": cfg.cpu, "memory": f"{cfg.memory_gib:g}Gi"},
                        "probes": [
                            {
                                "type": "Startup",
                                "httpGet": http_get,
                                "initialDelaySeconds": probe.initial_delay_s,
                                "periodSeconds": probe.period_s,
                                "failureThreshold": probe.failure_threshold,
                                "timeoutSeconds": probe.timeout_s,
                            },
                            {
                                "type": "Readiness",
                                "httpGet": http_get,
                                "periodSeconds": 10,
                                "failureThreshold": 3,
                                "timeoutSeconds": 5,
                            },
                        ],
                    }
                ],
                "scale": {"minReplicas": cfg.min_instances, "maxReplicas": cfg.max_instances},
            },
        },
    }


def sendable(spec: dict[str, Any]) -> dict[str, Any]:
    """The resource as read back, as a PUT may send it: read-only fields away."""
    out = copy.deepcopy(spec)
    for k in _READ_ONLY_TOP:
        out.pop(k, None)
    props = out.get("properties") or {}
    for k in _READ_ONLY_PROPS:
        props.pop(k, None)
    ingress = (props.get("configuration") or {}).get("ingress") or {}
    ingress.pop("fqdn", None)
    identity = out.get("identity") or {}
    for k in ("principalId", "tenantId"):
        identity.pop(k, None)
    for ua in (identity.get("userAssignedIdentities") or {}).values():
        if isinstance(ua, dict):
            ua.pop("principalId", None)
            ua.pop("clientId", None)
    return out


def container_of(spec: dict[str, Any]) -> dict[str, Any]:
    containers = ((spec.get("properties") or {}).get("template") or {}).get("containers") or [{}]
    by_name = [c for c in containers if c.get("name") == CONTAINER]
    return by_name[0] if by_name else containers[0]


def scale_of(spec: dict[str, Any]) -> tuple[int, int]:
    scale = ((spec.get("properties") or {}).get("template") or {}).get("scale") or {}
    return int(scale.get("minReplicas", 0) or 0), int(scale.get("maxReplicas", 10) or 10)


def _leaves(value: Any, path: str, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _leaves(v, f"{path}.{k}" if path else k, out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) and "name" in v for v in value):
        for v in value:  # named items (containers, env, secrets) diff by name, not position
            _leaves({k: x for k, x in v.items() if k != "name"}, f"{path}[{v['name']}]", out)
    else:
        out[path] = json.dumps(value, sort_keys=True)


def diff(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[FieldChange]:
    """Leaf fields that differ between two app documents (secrets carry Key Vault URLs, never values)."""
    a: dict[str, str] = {}
    b: dict[str, str] = {}
    _leaves(sendable(old) if old else {}, "", a)
    _leaves(sendable(new) if new else {}, "", b)
    return [FieldChange(path=k, old=a.get(k), new=b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def fingerprint(spec: dict[str, Any] | None) -> str:
    if not spec:
        return ""
    return hashlib.sha256(json.dumps(sendable(spec), sort_keys=True).encode()).hexdigest()[:16]

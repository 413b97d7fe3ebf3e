"""A field diff between the running Cloud Run service and the one a plan would apply.

Both sides are v2 JSON, but the running one comes back from the API with every default filled in and enums
as integers, while a rendered one is sparse with enum names. Normalising both (drop empty/zero values, enum
numbers to names, output-only fields away) and flattening to readable paths — container args by flag (read
through skills/serving/vllm_flags.py, so vLLM defaults written or left out compare equal), env
and volumes by name — gives a diff a human can check at a glance.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from skills.logs.redact import MARK, redact
from skills.serving.changes import FieldChange
from skills.serving.vllm_flags import VllmFlags, pair_tokens

# Set by Cloud Run, never by a request: stripped before an apply and never part of what a plan changes.
OUTPUT_ONLY_FIELDS = frozenset(
    {
        "uid", "generation", "createTime", "updateTime", "deleteTime", "expireTime", "etag", "conditions",
        "terminalCondition", "latestReadyRevision", "latestCreatedRevision", "trafficStatuses",
        "observedGeneration", "reconciling", "uri", "urls", "creator", "lastModifier",
    }
)  # fmt: skip
# Also not a plan's business: identity and client/launch metadata.
_IGNORED = OUTPUT_ONLY_FIELDS | {"name", "client", "clientVersion", "launchStage", "satisfiesPzs", "buildConfig"}

_ENUMS: dict[str, list[str]] = {
    "executionEnvironment": ["", "EXECUTION_ENVIRONMENT_GEN1", "EXECUTION_ENVIRONMENT_GEN2"],
    "ingress": [
        "",
        "INGRESS_TRAFFIC_ALL",
        "INGRESS_TRAFFIC_INTERNAL_ONLY",
        "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER",
        "INGRESS_TRAFFIC_NONE",
    ],
    "type": ["", "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST", "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION"],
    "encryptionKeyRevocationAction": ["", "PREVENT_NEW", "SHUTDOWN"],
    "scalingMode": ["", "AUTOMATIC", "MANUAL"],
}


# Lists whose items are identified by name (others by position: a running service may have unnamed ones).
_BY_NAME = {"env", "volumes", "volumeMounts"}


def _empty(v: Any) -> bool:
    return v is None or v == "" or v == 0 or v is False or v == [] or v == {} or v == "0"


def _enum(key: str, v: Any) -> Any:
    names = _ENUMS.get(key)
    if names is not None and isinstance(v, int) and not isinstance(v, bool) and 0 <= v < len(names):
        return names[v]
    return v


def arg_items(args: list[str]) -> list[tuple[str, str]]:
    """Container args as (flag, value) through the one flags model (skills/serving/vllm_flags.py): a flag at vLLM's
    default, written or not (`--kv-cache-dtype auto`), is the same configuration and shows no change. Args
    the model cannot read are shown token by token, so the diff still says what differs."""
    flags = VllmFlags.parse_or_none(args)
    return flags.display_items() if flags is not None else pair_tokens(args)


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list | dict):
        return json.dumps(v, sort_keys=True, separators=(",", ":"))
    return str(v)


def flatten(spec: dict[str, Any] | None) -> dict[str, str]:
    flat: dict[str, str] = {}

    def walk(prefix: str, key: str, v: Any) -> None:
        v = _enum(key, v)
        if _empty(v):
            return
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(v, dict):
            for k, sub in v.items():
                if not prefix and k in _IGNORED:
                    continue
                walk(path, k, sub)
        elif isinstance(v, list):
            if key == "args":
                for flag, val in arg_items([str(x) for x in v]):
                    flat[f"{path} {flag}"] = val
            elif key in ("command", "mountOptions"):
                flat[path] = " ".join(str(x) for x in v)
            elif key == "traffic":
                flat[path] = ", ".join(_traffic(t) for t in v)
                # Tags name revisions by URL (a canary's `canary` and `stable`): a change of their own.
                tags = sorted(f"{t['tag']}={t.get('revision') or 'latest'}" for t in v if t.get("tag"))
                if tags:
                    flat[f"{path}.tags"] = ", ".join(tags)
            else:
                for i, item in enumerate(v):
                    # Containers by position (a running service may have unnamed ones); env/volumes by name.
                    named = key in _BY_NAME and isinstance(item, dict) and item.get("name")
                    label = str(item["name"]) if named else str(i)
                    if named:  # the name is the key already
                        item = {k: x for k, x in item.items() if k != "name"}
                    walk(path, f"[{label}]", item)
        else:
            flat[path] = _scalar(v)

    for k, v in (spec or {}).items():
        if k not in _IGNORED:
            walk("", k, v)
    return {k.replace(".[", "["): v for k, v in flat.items()}


def _traffic(t: dict[str, Any]) -> str:
    kind = _enum("type", t.get("type", ""))
    who = "latest" if kind == "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST" else (t.get("revision") or "?")
    return f"{who}={t.get('percent', 0)}%"


# Env vars whose literal value must never be shown (a plan is posted to Slack).
_SECRET_ENV = re.compile(r"token|secret|passw|key|credential|auth", re.IGNORECASE)
_ENV_VALUE = re.compile(r"\benv\[([^\]]+)\]\.value$")


def secret_env_name(name: str) -> bool:
    return bool(_SECRET_ENV.search(name))


def _shown(path: str, value: str | None) -> str | None:
    if value is None:
        return None
    m = _ENV_VALUE.search(path)
    if m and secret_env_name(m.group(1)):
        return MARK.format("secret_env")
    return redact(value)


def diff_specs(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[FieldChange]:
    """Changed fields, old and new values as shown to people (secret-looking values masked)."""
    a, b = flatten(old), flatten(new)
    changes = []
    for path in sorted(a.keys() | b.keys()):
        if a.get(path) != b.get(path):
            changes.append(FieldChange(path=path, old=_shown(path, a.get(path)), new=_shown(path, b.get(path))))
    return changes


def fingerprint(spec: dict[str, Any] | None) -> str:
    """Stable hash of what a plan was computed against (ignores output-only fields and defaults)."""
    if not spec:
        return ""
    return hashlib.sha256(json.dumps(flatten(spec), sort_keys=True).encode()).hexdigest()[:16]

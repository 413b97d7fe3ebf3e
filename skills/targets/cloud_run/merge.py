"""Lay a rendered vLLM service over the running one, keeping everything the bot does not manage.

A deploy onto an existing service must not replace it wholesale: the runtime service account, labels and
annotations someone added, env vars the bot never set, sidecars, extra volumes, VPC access and the like all
stay. The bot owns only what render_service writes; within the serving container it owns its own env vars
(HF_TOKEN, HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE) and its model volume, and nothing else. With
VLLM_METRICS_SIDECAR it adds the Prometheus sidecar when the service runs none (metrics_sidecar.py).
"""

from __future__ import annotations

import copy
from typing import Any

from skills.errors import InvalidInput
from skills.targets.cloud_run import metrics_sidecar
from skills.targets.cloud_run.render import MOUNT_PATH, OFFLINE_ENV, VOLUME, main_container, strip_output_only

MANAGED_ENV = frozenset({"HF_TOKEN", *OFFLINE_ENV})


def _by_name(items: list[dict[str, Any]], drop: set[str]) -> list[dict[str, Any]]:
    return [i for i in items if i.get("name") not in drop]


def _merge_container(current: dict[str, Any], rendered: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(current)
    for key, value in rendered.items():
        if key not in ("env", "volumeMounts"):
            out[key] = copy.deepcopy(value)
    env = _by_name(current.get("env") or [], set(MANAGED_ENV))
    out["env"] = [*env, *copy.deepcopy(rendered.get("env") or [])]
    mounts = [m for m in current.get("volumeMounts") or [] if m.get("mountPath") != MOUNT_PATH]
    out["volumeMounts"] = [*mounts, *copy.deepcopy(rendered.get("volumeMounts") or [])]
    for key in ("env", "volumeMounts"):
        if not out[key]:
            del out[key]
    return out


def _add_sidecar(containers: list[dict[str, Any]], sidecar: dict[str, Any]) -> None:
    """The rendered Prometheus sidecar, unless the service runs one already (kept as it is, whatever its name
    or tag: two would scrape and write the same series twice)."""
    if metrics_sidecar.is_gmp_sidecar(sidecar) and metrics_sidecar.find(containers) is not None:
        return
    if any(c.get("name") == sidecar.get("name") for c in containers):
        raise InvalidInput(
            f"The running service already has a container named `{sidecar.get('name')}` that is not the "
            "Managed Service for Prometheus sidecar, so VLLM_METRICS_SIDECAR cannot add its own.",
            "Rename or remove that container, or set VLLM_METRICS_SIDECAR=false.",
        )
    containers.append(copy.deepcopy(sidecar))


def merge_onto(current: dict[str, Any], rendered: dict[str, Any]) -> dict[str, Any]:
    """`rendered` applied to the running service `current` (v2 JSON): what an update should send."""
    out = strip_output_only(current)
    for key, value in rendered.items():
        if key in ("labels", "annotations"):
            out[key] = {**(out.get(key) or {}), **value}
        elif key != "template":
            out[key] = copy.deepcopy(value)
    cur_tmpl = out.get("template") or {}
    new_tmpl = rendered.get("template") or {}
    tmpl = {k: v for k, v in cur_tmpl.items() if k != "revision"}  # an explicit revision name cannot be reused
    for key, value in new_tmpl.items():
        if key not in ("containers", "volumes", "labels", "annotations"):
            tmpl[key] = copy.deepcopy(value)
    for key in ("labels", "annotations"):
        if key in new_tmpl:
            tmpl[key] = {**(cur_tmpl.get(key) or {}), **new_tmpl[key]}
    volumes = _by_name(cur_tmpl.get("volumes") or [], {VOLUME} | {v["name"] for v in new_tmpl.get("volumes") or []})
    volumes += copy.deepcopy(new_tmpl.get("volumes") or [])
    tmpl["volumes"] = volumes  # kept even when empty: an absent key means "leave as is" to the adapter
    containers = copy.deepcopy(cur_tmpl.get("containers") or [])
    rendered_main, *rendered_sidecars = new_tmpl.get("containers") or [{}]
    if containers:
        serving = main_container({"template": {"containers": containers}})
        idx = next(i for i, c in enumerate(containers) if c == serving)
        containers[idx] = _merge_container(serving, rendered_main)
        # The serving container takes the rendered name: what started after it still does.
        metrics_sidecar.retarget(containers, str(serving.get("name") or ""), str(rendered_main.get("name") or ""))
    else:
        containers = [copy.deepcopy(rendered_main)]
    for sidecar in rendered_sidecars:
        _add_sidecar(containers, sidecar)
    tmpl["containers"] = containers
    out["template"] = tmpl
    return out

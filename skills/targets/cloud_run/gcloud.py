"""The gcloud command equivalent to a plan, so an operator can read (or run) exactly what the bot would do."""

from __future__ import annotations

import shlex
from typing import Any

from skills.logs.redact import MARK, redact
from skills.targets.cloud_run.diff import secret_env_name
from skills.targets.cloud_run.render import main_container


def _q(s: object) -> str:
    return shlex.quote(str(s))


def _join(parts: list[str]) -> str:
    return " \\\n  ".join(parts)


def deploy_command(
    service: str, spec: dict[str, Any], region: str, project: str | None, *, update: bool = False
) -> str:
    """`gcloud run deploy` with the flags that reproduce a rendered Service.

    `update`: the service exists, so env vars, secrets and volumes it has but the spec lacks must be cleared
    explicitly (gcloud keeps what a flag does not mention).
    """
    tmpl = spec.get("template", {})
    c = main_container(spec)
    res = c.get("resources", {})
    limits = res.get("limits", {})
    scaling = tmpl.get("scaling", {})
    # A Preview feature (the RTX PRO 6000 GPU) is only reachable through the beta command track.
    track = "gcloud beta run" if spec.get("launchStage") == "BETA" else "gcloud run"
    parts = [
        f"{track} deploy {_q(service)}",
        f"--image={_q(c.get('image', ''))}",
        f"--region={_q(region)}",
    ]
    if project:
        parts.append(f"--project={_q(project)}")
    if tmpl.get("nodeSelector", {}).get("accelerator"):
        parts += [
            f"--gpu={limits.get('nvidia.com/gpu', '1')}",
            f"--gpu-type={tmpl['nodeSelector']['accelerator']}",
        ]
    if tmpl.get("serviceAccount"):
        parts.append(f"--service-account={_q(tmpl['serviceAccount'])}")
    if tmpl.get("gpuZonalRedundancyDisabled"):
        parts.append("--no-gpu-zonal-redundancy")
    if res.get("cpuIdle") is False:
        parts.append("--no-cpu-throttling")
    if res.get("startupCpuBoost"):
        parts.append("--cpu-boost")
    if limits.get("cpu"):
        parts.append(f"--cpu={limits['cpu']}")
    if limits.get("memory"):
        parts.append(f"--memory={limits['memory']}")
    if tmpl.get("executionEnvironment") in ("EXECUTION_ENVIRONMENT_GEN2", 2):
        parts.append("--execution-environment=gen2")
    if tmpl.get("timeout"):
        parts.append(f"--timeout={str(tmpl['timeout']).removesuffix('s')}")
    if tmpl.get("maxInstanceRequestConcurrency"):
        parts.append(f"--concurrency={tmpl['maxInstanceRequestConcurrency']}")
    parts += [
        f"--min-instances={scaling.get('minInstanceCount', 0)}",
        f"--max-instances={scaling.get('maxInstanceCount', 1)}",
    ]
    ports = c.get("ports") or [{}]
    parts.append(f"--port={ports[0].get('containerPort', 8080)}")
    parts.append("--no-allow-unauthenticated" if not spec.get("invokerIamDisabled") else "--allow-unauthenticated")
    if c.get("command"):
        parts.append(f"--command={_q(','.join(c['command']))}")
    if c.get("args"):
        # gcloud splits --args on commas; vLLM args carry none, so the plain list form is exact.
        parts.append(f"--args={_q(','.join(str(a) for a in c['args']))}")
    plain = [
        f"{e['name']}={MARK.format('secret_env') if secret_env_name(e['name']) else redact(str(e['value']))}"
        for e in c.get("env", [])
        if "value" in e
    ]
    refs = [
        (e["name"], e["valueSource"]["secretKeyRef"])
        for e in c.get("env", [])
        if e.get("valueSource", {}).get("secretKeyRef")
    ]
    secrets = [f"{name}={ref['secret']}:{ref.get('version', 'latest')}" for name, ref in refs]
    # --set-env-vars / --set-secrets replace the whole list; with nothing to set, an update clears it.
    if plain:
        parts.append(f"--set-env-vars={_q(','.join(plain))}")
    elif update:
        parts.append("--clear-env-vars")
    if secrets:
        parts.append(f"--set-secrets={_q(','.join(secrets))}")
    elif update:
        parts.append("--clear-secrets")
    volumes = tmpl.get("volumes") or []
    if update and all(v.get("gcs") for v in volumes):
        # Volumes and mounts are added one by one: start from none so the result is exactly the spec.
        parts += ["--clear-volumes", "--clear-volume-mounts"]
    for v in volumes:
        gcs = v.get("gcs")
        if not gcs:
            continue
        vol = f"name={v['name']},type=cloud-storage,bucket={gcs['bucket']}"
        if gcs.get("readOnly"):
            vol += ",readonly=true"
        if gcs.get("mountOptions"):
            vol += ",mount-options=" + ";".join(gcs["mountOptions"])
        parts.append(f"--add-volume={_q(vol)}")
    for m in c.get("volumeMounts", []):
        mount = "volume={},mount-path={}".format(m["name"], m["mountPath"])
        parts.append(f"--add-volume-mount={_q(mount)}")
    probe = c.get("startupProbe")
    if probe:
        p = probe.get("httpGet", {})
        fields = [f"httpGet.path={p.get('path', '/')}", f"httpGet.port={p.get('port', 8080)}"]
        for k in ("initialDelaySeconds", "periodSeconds", "timeoutSeconds", "failureThreshold"):
            if k in probe:
                fields.append(f"{k}={probe[k]}")
        parts.append(f"--startup-probe={_q(','.join(fields))}")
    labels = spec.get("labels") or {}
    if labels:
        parts.append(f"--labels={_q(','.join(f'{k}={v}' for k, v in labels.items()))}")
    # The flags above describe the serving container only; say which other containers the spec has (the
    # Prometheus sidecar with VLLM_METRICS_SIDECAR) rather than leave them out silently.
    others = [x for x in tmpl.get("containers") or [] if x != c]
    note = "".join(
        f"\n# and container `{x.get('name', '?')}` (`{x.get('image', '')}`"
        + (f", after {', '.join(x['dependsOn'])}" if x.get("dependsOn") else "")
        + "): not set by the flags above; the plan's spec has it"
        for x in others
    )
    return _join(parts) + note


def destroy_command(service: str, region: str, project: str | None) -> str:
    parts = [f"gcloud run services delete {_q(service)}", f"--region={_q(region)}"]
    if project:
        parts.append(f"--project={_q(project)}")
    return _join(parts)


_LATEST = "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST"


def _where(region: str, project: str | None) -> list[str]:
    return [f"--region={_q(region)}"] + ([f"--project={_q(project)}"] if project else [])


def traffic_command(
    service: str, old: list[dict[str, Any]], new: list[dict[str, Any]], region: str, project: str | None
) -> str:
    """`gcloud run services update-traffic` that turns the traffic `old` into `new`: the split (to latest, or to
    revisions by percent) and the tags, removed or set. The flags as gcloud's reference lists them (--to-latest,
    --to-revisions, --remove-tags, --update-tags):
    https://docs.cloud.google.com/sdk/gcloud/reference/run/services/update-traffic"""
    parts = [f"gcloud run services update-traffic {_q(service)}"]
    if [(t.get("type"), t.get("revision"), t.get("percent")) for t in old] != [
        (t.get("type"), t.get("revision"), t.get("percent")) for t in new
    ]:
        if len(new) == 1 and new[0].get("type") == _LATEST:
            parts.append("--to-latest")
        else:
            split = ",".join(
                f"{'LATEST' if t.get('type') == _LATEST else t['revision']}={t.get('percent', 0)}" for t in new
            )
            parts.append(f"--to-revisions={_q(split)}")
    old_tags = {t["tag"]: t.get("revision", "") for t in old if t.get("tag")}
    new_tags = {t["tag"]: t.get("revision", "") for t in new if t.get("tag")}
    gone = sorted(set(old_tags) - set(new_tags))
    if gone:
        parts.append(f"--remove-tags={_q(','.join(gone))}")
    moved = {k: v for k, v in new_tags.items() if old_tags.get(k) != v}
    if moved:
        parts.append(f"--update-tags={_q(','.join(f'{k}={v}' for k, v in sorted(moved.items())))}")
    return _join(parts + _where(region, project)) if len(parts) > 1 else ""


def update_commands(service: str, old: dict[str, Any], new: dict[str, Any], region: str, project: str | None) -> str:
    """The gcloud commands that turn the service as it is (`old`, its template included) into the plan's `new`,
    derived from what differs,
    as the plan's change list is: only the scaling changed -> `services update --min/--max-instances`; anything
    else in the revision template -> `gcloud run deploy` with every flag of the new template (a scale or
    redeploy that builds on the serving revision changes its args and probe too); traffic and tags ->
    `update-traffic`. What no flag sets (the bot's own annotations) is said in a comment, not left out."""
    out = []
    old_t, new_t = old.get("template") or {}, new.get("template") or {}
    if old_t != new_t:
        rest_old = {k: v for k, v in old_t.items() if k != "scaling"}
        rest_new = {k: v for k, v in new_t.items() if k != "scaling"}
        if rest_old == rest_new:
            scaling = new_t.get("scaling") or {}
            out.append(
                _join(
                    [
                        f"gcloud run services update {_q(service)}",
                        f"--min-instances={scaling.get('minInstanceCount', 0)}",
                        f"--max-instances={scaling.get('maxInstanceCount', 1)}",
                        *_where(region, project),
                    ]
                )
            )
        else:
            out.append(deploy_command(service, new, region, project, update=True))
    traffic = traffic_command(service, old.get("traffic") or [], new.get("traffic") or [], region, project)
    if traffic:
        out.append(traffic)
    note = annotations_note(old, new)
    if note:
        out.append(note)
    return "\n".join(out)


def annotations_note(old: dict[str, Any], new: dict[str, Any]) -> str:
    """The bot's own annotations that change, said in a comment: no gcloud flag sets them ('' if none)."""
    bookkeeping = sorted(
        k
        for k in set(old.get("annotations") or {}) | set(new.get("annotations") or {})
        if (old.get("annotations") or {}).get(k) != (new.get("annotations") or {}).get(k)
    )
    if not bookkeeping:
        return ""
    return "# and annotations " + ", ".join(bookkeeping) + ": no gcloud flag sets them; the plan's spec has them"

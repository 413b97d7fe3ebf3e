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


def scale_command(service: str, min_i: int, max_i: int, region: str, project: str | None) -> str:
    parts = [
        f"gcloud run services update {_q(service)}",
        f"--min-instances={min_i}",
        f"--max-instances={max_i}",
        f"--region={_q(region)}",
    ]
    if project:
        parts.append(f"--project={_q(project)}")
    return _join(parts)


def rollback_command(service: str, revision: str, region: str, project: str | None) -> str:
    parts = [
        f"gcloud run services update-traffic {_q(service)}",
        f"--to-revisions={_q(revision)}=100",
        f"--region={_q(region)}",
    ]
    if project:
        parts.append(f"--project={_q(project)}")
    return _join(parts)


def destroy_command(service: str, region: str, project: str | None) -> str:
    parts = [f"gcloud run services delete {_q(service)}", f"--region={_q(region)}"]
    if project:
        parts.append(f"--project={_q(project)}")
    return _join(parts)

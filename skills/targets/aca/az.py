"""The Azure CLI equivalent of an ACA plan, derived from the documents it changes (never edited from another
command's text): `az containerapp create` for a new app; for a change, `az containerapp update` with a flag per
changed template field, `az containerapp ingress traffic set` for the weights and `az containerapp revision label`
for the labels. A changed field no flag sets is named, with the YAML route that sets it.

Flags: `az containerapp create` / `update` (--image, --cpu, --memory, --min-replicas, --max-replicas,
--revision-suffix, --workload-profile-name, --args, --command, --replace-env-vars, --tags, --transport, --yaml),
`az containerapp ingress traffic set` (--revision-weight, with `latest` for the latest-revision weight) and
`az containerapp revision label add|remove` (--label, --revision), as Microsoft's Azure CLI reference names them
(https://learn.microsoft.com/cli/azure/containerapp; skills/data/aca.yaml sources revision_labels).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from skills.targets.aca.spec import API_KEY_SECRET, CONTAINER, VLLM_PORT, container_of, diff, scale_of

_C = rf"properties\.template\.containers\[{CONTAINER}\]"
# Changed leaf paths (skills/targets/aca/spec.py diff) -> the `az containerapp update` flag that sets them.
_FLAGS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"^{_C}\.image$"), "image"),
    (re.compile(rf"^{_C}\.args$"), "args"),
    (re.compile(rf"^{_C}\.command$"), "command"),
    (re.compile(rf"^{_C}\.resources\.cpu$"), "cpu"),
    (re.compile(rf"^{_C}\.resources\.memory$"), "memory"),
    (re.compile(rf"^{_C}\.env\[.+\]\..+$"), "env"),
    (re.compile(r"^properties\.template\.scale\.(minReplicas|maxReplicas)$"), "scale"),
    (re.compile(r"^properties\.template\.revisionSuffix$"), "suffix"),
    (re.compile(r"^properties\.workloadProfileName$"), "profile"),
    (re.compile(r"^tags\..+$"), "tags"),
    (re.compile(r"^properties\.configuration\.ingress\.traffic$"), "traffic"),
]


def _q(x: Any) -> str:
    return shlex.quote(str(x))


def az_create(app: str, spec: dict[str, Any], resource_group: str, environment: str) -> str:
    """The Azure CLI equivalent of the create (`az containerapp create`), as an operator would type it."""
    c = container_of(spec)
    props = spec["properties"]
    lo, hi = scale_of(spec)
    probe = next((p for p in c.get("probes", []) if p.get("type") == "Startup"), None)
    secret = props["configuration"]["secrets"][0]
    parts = [
        f"az containerapp create --name {app} --resource-group {_q(resource_group)}",
        f"--environment {_q(environment)} --workload-profile-name {props['workloadProfileName']}",
        f"--image {_q(c['image'])} --cpu {c['resources']['cpu']:g} --memory {c['resources']['memory']}",
        f"--min-replicas {lo} --max-replicas {hi} --revisions-mode multiple",
        f"--ingress external --target-port {VLLM_PORT} --transport "
        f"{props['configuration']['ingress'].get('transport', 'auto')} --user-assigned {_q(secret['identity'])}",
        f"--secrets {API_KEY_SECRET}=keyvaultref:"
        + _q(secret["keyVaultUrl"])
        + ",identityref:"
        + _q(secret["identity"]),
        f"--env-vars VLLM_API_KEY=secretref:{API_KEY_SECRET}",
        "--command " + " ".join(_q(x) for x in c.get("command", [])),
        "--args " + " ".join(_q(a) for a in c.get("args", [])),
    ]
    if spec.get("tags"):  # the bot reads model, profile and workload profile type back from them
        parts.append("--tags " + " ".join(_q(f"{k}={v}") for k, v in sorted(spec["tags"].items())))
    cmd = " \\\n  ".join(parts)
    if probe is not None:
        # az containerapp create has no probe flags: the probe goes in with a YAML update.
        cmd += (
            "\n# then the startup probe (no create flag for it): `az containerapp update --name "
            f"{app} --resource-group {_q(resource_group)} --yaml app.yaml` with "
            f"periodSeconds {probe['periodSeconds']}, failureThreshold {probe['failureThreshold']}"
        )
    return cmd


def traffic_of(spec: dict[str, Any] | None) -> list[dict[str, Any]]:
    ingress = (((spec or {}).get("properties") or {}).get("configuration") or {}).get("ingress") or {}
    return list(ingress.get("traffic") or [])


def _weight_name(t: dict[str, Any]) -> str:
    return "latest" if t.get("latestRevision") else str(t.get("revisionName", ""))


def az_traffic(app: str, old: list[dict[str, Any]], new: list[dict[str, Any]], resource_group: str) -> list[str]:
    """`az containerapp ingress traffic set` for the new weights, then the labels that move (added where they point
    now, removed where they are gone)."""
    where = f"--name {app} --resource-group {_q(resource_group)}"
    out = []
    weights = " ".join(f"{_q(_weight_name(t))}={int(t.get('weight', 0) or 0)}" for t in new)
    out.append(f"az containerapp ingress traffic set {where} --revision-weight {weights}")
    before = {str(t["label"]): _weight_name(t) for t in old if t.get("label")}
    after = {str(t["label"]): _weight_name(t) for t in new if t.get("label")}
    for label in sorted(set(before) - set(after)):
        out.append(f"az containerapp revision label remove {where} --label {_q(label)}")
    for label, rev in sorted(after.items()):
        if before.get(label) != rev:
            out.append(
                f"az containerapp revision label add {where} --label {_q(label)} --revision {_q(rev)} --no-prompt --yes"
            )
    return out


def az_update(app: str, old: dict[str, Any], new: dict[str, Any], resource_group: str) -> str:
    """The commands that make `old` into `new`, one flag per changed field; what no flag sets is named."""
    changes = diff(old, new)
    kinds: dict[str, list[str]] = {}
    rest: list[str] = []
    for ch in changes:
        kind = next((k for rx, k in _FLAGS if rx.match(ch.path)), None)
        if kind is None:
            rest.append(ch.path)
        else:
            kinds.setdefault(kind, []).append(ch.path)
    c = container_of(new)
    flags: list[str] = []
    if "image" in kinds:
        flags.append(f"--image {_q(c.get('image', ''))}")
    if "cpu" in kinds or "memory" in kinds:
        res = c.get("resources") or {}
        flags.append(f"--cpu {float(res.get('cpu', 0) or 0):g} --memory {res.get('memory', '')}")
    if "scale" in kinds:
        lo, hi = scale_of(new)
        flags.append(f"--min-replicas {lo} --max-replicas {hi}")
    if "suffix" in kinds:
        suffix = ((new.get("properties") or {}).get("template") or {}).get("revisionSuffix")
        if suffix:
            flags.append(f"--revision-suffix {_q(suffix)}")
        # removed: az names the next revision itself, as ARM does without a suffix
    if "profile" in kinds:
        flags.append(f"--workload-profile-name {_q(new['properties']['workloadProfileName'])}")
    if "env" in kinds:
        env = [
            f"{e['name']}=secretref:{e['secretRef']}" if e.get("secretRef") else f"{e['name']}={e.get('value', '')}"
            for e in c.get("env") or []
        ]
        flags.append("--replace-env-vars " + " ".join(_q(x) for x in env))
    if "tags" in kinds:
        tags = new.get("tags") or {}
        flags.append("--tags " + " ".join(_q(f"{k}={v}") for k, v in sorted(tags.items())))
    if "command" in kinds:
        flags.append("--command " + " ".join(_q(x) for x in c.get("command") or []))
    if "args" in kinds:
        flags.append("--args " + " ".join(_q(a) for a in c.get("args") or []))
    lines = []
    if flags:
        lines.append(
            " \\\n  ".join([f"az containerapp update --name {app} --resource-group {_q(resource_group)}", *flags])
        )
    if "traffic" in kinds:
        lines += az_traffic(app, traffic_of(old), traffic_of(new), resource_group)
    if rest:
        lines.append(
            "# no flag sets " + ", ".join(rest) + f": `az containerapp update --name {app} --resource-group "
            f"{_q(resource_group)} --yaml app.yaml` with the plan's document (`/gemma config` exports it)"
        )
    return "\n".join(lines)


def expressed(command: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The changed paths `command` does not express (for tests and the console model): every change must map to a
    flag the command carries or be named in its no-flag line."""
    missing = []
    for ch in diff(old, new):
        kind = next((k for rx, k in _FLAGS if rx.match(ch.path)), None)
        needle = {
            "image": "--image",
            "args": "--args",
            "command": "--command",
            "cpu": "--cpu",
            "memory": "--memory",
            "env": "--replace-env-vars",
            "scale": "-replicas",
            "profile": "--workload-profile-name",
            "tags": "--tags",
            "traffic": "ingress traffic set",
            "suffix": "",
        }.get(kind or "", ch.path)
        if needle and needle not in command:
            missing.append(ch.path)
    return missing

"""Request validation for the Cloud Run stand-in: reject what the Cloud Run Admin API v2 rejects.

- Unknown fields: the body is walked against the v2 `Service` message's own descriptor (google-cloud-run's
  protos), so a field the real API does not know gets the real 400 ("Invalid JSON payload received. Unknown
  name ... Cannot find field.", INVALID_ARGUMENT with a BadRequest field violation).
- GPUs, per Google's GPU page for services (https://cloud.google.com/run/docs/configuring/services/gpu): the
  accelerator must be a Cloud Run GPU, one per instance; nvidia-l4 needs at least 4 CPU and 16 GiB,
  nvidia-rtx-pro-6000 at least 20 CPU and 80 GiB, and being Preview it needs the service's launch stage BETA
  (or an earlier stage such as ALPHA).

- Containers (a revision with sidecars), by what the API documents and Knative serving's pod-spec validation
  (pkg/apis/serving/k8s_validation.go at commit 98e5ef9, which Cloud Run's API follows): one ingress container
  ("A Cloud Run instance always has a single ingress container ... and optionally one or more sidecar
  containers", Cloud Run's container contract), so ports on more than one container are refused ("more than one
  container port is set" / "Only a single port is allowed across all containers") and several containers with
  no port too (Knative's missing "ports"); container names are DNS labels (v2 Container.name: "a DNS_LABEL
  (RFC 1123)") and unique ("duplicate container name %q"); `dependsOn` names other containers of the revision
  ("Names of the containers that must start before this container"; the API checks those names: "Invalid
  container name ''. Must conform to RFC 1123 ..." answered for an unnamed one,
  hashicorp/terraform-provider-google#21035); the wording for an unknown or self dependency is the stand-in's
  own, in the same shape. The GPU goes on one container only (GPU page: "If you use sidecar containers, note
  that the GPU can only be attached to one container").
- Traffic, by Knative serving's route validation (pkg/apis/serving/v1/route_validation.go), which Cloud Run's
  API follows: percents within 0..100 that sum to 100 ("Traffic targets sum to N, want 100"), tags that are
  DNS-1035 labels and unique ("Multiple definitions for \"tag\""), a REVISION target names its revision and a
  LATEST one does not.

The stand-in's own table, deliberately not read from the bot's catalog (tests check the two agree).
"""

from __future__ import annotations

import re
from typing import Any

from google.cloud import run_v2
from google.protobuf.descriptor import Descriptor, FieldDescriptor

# accelerator -> (min CPU, min memory GiB, preview?)
CLOUD_RUN_GPUS: dict[str, tuple[float, float, bool]] = {
    "nvidia-l4": (4, 16, False),
    "nvidia-rtx-pro-6000": (20, 80, True),
}
# Launch stages at which Preview features may be used (google.api.LaunchStage).
_PREVIEW_OK = {"ALPHA", "BETA", "EARLY_ACCESS", "PRELAUNCH", "UNIMPLEMENTED"}
_WELL_KNOWN_STRINGS = {"google.protobuf.Duration", "google.protobuf.Timestamp", "google.protobuf.FieldMask"}


class RequestRejected(Exception):
    """A 400 the real API would return; `body` is its JSON error."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        details = [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [
            {"field": field, "description": message}
        ]}] if field else []  # fmt: skip
        self.body = {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT", "details": details}}


def _unknown(name: str, at: str) -> RequestRejected:
    msg = f"Invalid JSON payload received. Unknown name \"{name}\" at '{at}': Cannot find field."
    return RequestRejected(msg, at)


def _walk(value: Any, desc: Descriptor, at: str) -> None:
    if not isinstance(value, dict):
        raise RequestRejected(f"Invalid JSON payload received. Expected an object at '{at}'.", at)
    fields = {f.json_name: f for f in desc.fields} | {f.name: f for f in desc.fields}
    for key, sub in value.items():
        f = fields.get(key)
        if f is None:
            raise _unknown(key, at)
        if f.type != FieldDescriptor.TYPE_MESSAGE or sub is None:
            continue
        msg = f.message_type
        where = f"{at}.{f.json_name}"
        if msg.GetOptions().map_entry:
            value_field = msg.fields_by_name["value"]
            if value_field.type == FieldDescriptor.TYPE_MESSAGE and isinstance(sub, dict):
                for k, v in sub.items():
                    _walk(v, value_field.message_type, f"{where}[{k}]")
            continue
        if msg.full_name in _WELL_KNOWN_STRINGS:
            continue
        repeated = bool(getattr(f, "is_repeated", False))
        items = sub if repeated and isinstance(sub, list) else [sub]
        for i, item in enumerate(items):
            _walk(item, msg, f"{where}[{i}]" if repeated else where)


def _launch_stage(body: dict[str, Any]) -> str:
    raw = body.get("launchStage", "")
    if isinstance(raw, int) and not isinstance(raw, bool):
        enum = run_v2.Service.meta.pb.DESCRIPTOR.fields_by_name["launch_stage"].enum_type
        return enum.values_by_number[raw].name if raw in enum.values_by_number else ""
    return str(raw or "")


def _cpu(v: Any) -> float:
    s = str(v).strip()
    return float(s[:-1]) / 1000 if s.endswith("m") else float(s)


def _gib(v: Any) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Gi|Mi|G|M|Ki)?", str(v).strip())
    if not m:
        raise RequestRejected(f"Invalid memory value '{v}'.", "service.template.containers.resources.limits")
    n, unit = float(m.group(1)), m.group(2) or ""
    return {"Gi": n, "G": n * 1e9 / 2**30, "Mi": n / 1024, "M": n * 1e6 / 2**30, "Ki": n / 2**20}.get(unit, n / 2**30)


def _check_gpu(body: dict[str, Any]) -> None:
    tmpl = body.get("template") or {}
    accelerator = (tmpl.get("nodeSelector") or {}).get("accelerator")
    if not accelerator:
        return
    if accelerator not in CLOUD_RUN_GPUS:
        raise RequestRejected(
            f"Accelerator type '{accelerator}' is not supported. Supported types: {', '.join(CLOUD_RUN_GPUS)}.",
            "service.template.node_selector.accelerator",
        )
    min_cpu, min_gib, preview = CLOUD_RUN_GPUS[accelerator]
    stage = _launch_stage(body)
    if preview and stage not in _PREVIEW_OK:
        raise RequestRejected(
            f"Accelerator type '{accelerator}' is in Preview: set the service's launch stage to BETA to use it "
            f"(got '{stage or 'GA'}').",
            "service.launch_stage",
        )
    for i, c in enumerate(tmpl.get("containers") or []):
        limits = (c.get("resources") or {}).get("limits") or {}
        if "nvidia.com/gpu" not in limits:
            continue
        where = f"service.template.containers[{i}].resources.limits"
        if str(limits["nvidia.com/gpu"]) != "1":
            raise RequestRejected("Only one GPU per instance is supported (nvidia.com/gpu must be 1).", where)
        cpu, mem = _cpu(limits.get("cpu", "1")), _gib(limits.get("memory", "512Mi"))
        if cpu < min_cpu or mem < min_gib:
            raise RequestRejected(
                f"Accelerator type '{accelerator}' requires at least {min_cpu:g} CPU and {min_gib:g}Gi of memory; "
                f"got {cpu:g} CPU and {limits.get('memory', '512Mi')}.",
                where,
            )


_TRAFFIC_TYPES = {0: "TRAFFIC_TARGET_ALLOCATION_TYPE_UNSPECIFIED", 1: "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST",
                  2: "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION"}  # fmt: skip
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def dns1035_problem(value: str) -> str:
    """Why `value` is not a DNS-1035 label ('' when it is), in k8s.io/apimachinery's words."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not DNS1035.match(value):
        return (
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
            "character, and end with an alphanumeric character"
        )
    return ""


def _check_traffic(body: dict[str, Any]) -> None:
    traffic = body.get("traffic")
    if not traffic:
        return
    total = 0
    tags: dict[str, int] = {}
    for i, t in enumerate(traffic):
        where = f"service.traffic[{i}]"
        kind = t.get("type", 0)
        kind = _TRAFFIC_TYPES.get(kind, kind) if isinstance(kind, int) else kind
        percent = t.get("percent", 0)
        revision = t.get("revision", "")
        if not isinstance(percent, int) or not 0 <= percent <= 100:
            raise RequestRejected(f"expected 0 <= {percent} <= 100: {where}.percent", f"{where}.percent")
        if kind == "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST" and revision:
            raise RequestRejected(f"may not set revision {revision!r} when the type is LATEST", f"{where}.revision")
        if kind == "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION" and not revision:
            raise RequestRejected(f"missing field(s): {where}.revision", f"{where}.revision")
        if kind not in ("TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST", "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION"):
            raise RequestRejected(f"invalid value: {kind}: {where}.type", f"{where}.type")
        total += percent
        tag = t.get("tag", "")
        if not tag:
            continue
        if why := dns1035_problem(tag):
            raise RequestRejected(f"invalid value: not a DNS 1035 label: [{why}]: {where}.tag", f"{where}.tag")
        if tag in tags:
            raise RequestRejected(
                f'Multiple definitions for "{tag}": service.traffic[{i}].tag, service.traffic[{tags[tag]}].tag',
                f"{where}.tag",
            )
        tags[tag] = i
    if total != 100:
        raise RequestRejected(f"Traffic targets sum to {total}, want 100: service.traffic", "service.traffic")


_RFC1123 = (
    "Must conform to RFC 1123: only lowercase letters, digits, hyphens, and periods are allowed, must begin and "
    "end with a letter or digit, and be less than 64 characters"
)
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")


def _check_containers(body: dict[str, Any]) -> None:
    containers = (body.get("template") or {}).get("containers") or []
    if len(containers) < 2:
        return
    names: dict[str, int] = {}
    for i, c in enumerate(containers):
        name = str(c.get("name") or "")
        where = f"service.template.containers[{i}].name"
        if name and not _DNS1123.match(name):
            raise RequestRejected(f"Invalid container name '{name}'. {_RFC1123}: {where}", where)
        if name and name in names:
            raise RequestRejected(f'duplicate container name "{name}": {where}', where)
        if name:
            names[name] = i
    with_ports = [i for i, c in enumerate(containers) if c.get("ports")]
    if len(with_ports) > 1 or any(len(containers[i]["ports"]) > 1 for i in with_ports):
        raise RequestRejected(
            "more than one container port is set: service.template.containers[*].ports\n"
            "Only a single port is allowed across all containers",
            "service.template.containers",
        )
    if not with_ports:
        raise RequestRejected("missing field(s): service.template.containers[*].ports", "service.template.containers")
    gpus = [i for i, c in enumerate(containers) if "nvidia.com/gpu" in ((c.get("resources") or {}).get("limits") or {})]
    if len(gpus) > 1:
        raise RequestRejected(
            "The GPU can only be attached to one container: "
            + ", ".join(f"service.template.containers[{i}].resources.limits" for i in gpus),
            f"service.template.containers[{gpus[1]}].resources.limits",
        )
    for i, c in enumerate(containers):
        where = f"service.template.containers[{i}].depends_on"
        for dep in c.get("dependsOn") or []:
            if not dep or not _DNS1123.match(str(dep)):
                raise RequestRejected(f"Invalid container name '{dep}'. {_RFC1123}: {where}", where)
            if dep == c.get("name"):
                raise RequestRejected(f"Container '{dep}' cannot depend on itself: {where}", where)
            if dep not in names:
                raise RequestRejected(
                    f"Container '{dep}' named in depends_on is not a container of this revision: {where}", where
                )


def validate_service(body: dict[str, Any]) -> None:
    """Raise RequestRejected (a 400) for a Service body the real API would refuse."""
    _walk(body, run_v2.Service.meta.pb.DESCRIPTOR, "service")
    _check_containers(body)
    _check_gpu(body)
    _check_traffic(body)

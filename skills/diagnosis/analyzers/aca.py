# ruff: noqa: E501  (remediation prose and log wordings read better unbroken)
"""Azure Container Apps failures no other kind covers: an image the replica cannot pull, and a workload profile the
environment lacks. Probe failures (startup.py), GPU quota (platform.py) and memory kills (memory.py) reuse their
kinds with ACA's wordings and fixes; `on_aca` tells those analyzers the log is ACA's.

The lines come from bot/adapters/aca_logs.py: a system event is "<Reason>: <Log>" from ContainerAppSystemLogs(_CL).
A failed revision's `provisioningError`, when the ACA target puts it in the service's terminal condition, is read as
one more line. Every wording is from a source named beside it (samples in tests/data/aca_logs*/manifest.yaml).
"""

from __future__ import annotations

import re

from skills.diagnosis.analyzers.base import Line, LogView, analyzer, evidence_of, first_seen
from skills.diagnosis.findings import Finding, Remediation

# What only ACA writes: its system tables, its controller, the termination event ("Container 'x' was terminated with
# exit code '137'" and "... with exit code '' and reason 'ImagePullFailure'", microsoft/azure-container-apps#1085,
# #1201), its probe event ("Probe of StartUp failed with status code: 1", yeongseon/azure-container-apps-practical-guide
# probe-and-port-mismatch lab), its replica events (ReplicaUnhealthy, ContainerBackOff "Persistent Failure to start
# container", microsoft/azure-container-apps#1561) and its image-pull help link (aka.ms/cappsimagepullerrors).
_ACA_WORDING = re.compile(
    r"was terminated with (?:exit code '\d*'|reason ')|Probe of (?:StartUp|Liveness|Readiness) failed|"
    r"ContainerAppController|\bReplicaUnhealthy\b|Persistent Failure to start container|aka\.ms/cappsimagepullerrors|"
    r"azurecontainerapps\.io"
)


def on_aca(view: LogView) -> bool:
    """The log is an Azure Container Apps app's (its tables, or a wording only ACA writes)."""
    return any(ln.log_name.startswith("ContainerApp") or _ACA_WORDING.search(ln.text) for ln in view.lines)


def state_lines(view: LogView) -> list[Line]:
    """The service's failed terminal condition (an ACA revision's provisioningError) as a line of its own."""
    cond = view.service.terminal_condition if view.service is not None else None
    if cond is None or cond.state == "CONDITION_SUCCEEDED" or not (cond.reason or cond.message):
        return []
    return [Line(idx=-1, ts=None, severity="ERROR", text=f"{cond.reason}: {cond.message}".strip(": "))]


def grep_with_state(view: LogView, *patterns: re.Pattern[str]) -> list[tuple[Line, re.Match[str]]]:
    hits = view.grep(*patterns)
    for line in state_lines(view):
        m = next((m for p in patterns if (m := p.search(line.text)) is not None), None)
        if m is not None:
            hits.append((line, m))
    return hits


# Image pull, by class. ACA's system events: Reason ImagePullUnauthorized / ImagePullFailed / BackOff and
# ContainerTerminated "... reason 'ImagePullFailure'" (yeongseon/azure-container-apps-practical-guide ACR labs; azd
# write-ups), the portal's "Persistent Image Pull Errors for image ..." (Azure OSS Developer Support blog), ACA's
# "Unauthorized to access image ... Image pull failed with unauthorized error"; the kubelet/containerd wordings ACA
# passes through ("Failed to pull image ...: failed to pull and unpack image", ErrImagePull, ImagePullBackOff,
# Azure-Samples/container-apps-store-api-microservice#33; "Back-off pulling image").
_PULL = [
    re.compile(r"reason[ =]'?(ImagePull\w*|ErrImagePull)\b"),
    re.compile(r"\b(ImagePullBackOff|ErrImagePull|ImagePullUnauthorized|ImagePullFailed|ImagePullFailure)\b"),
    re.compile(r"Failed to pull image|failed to pull and unpack image|Back-off pulling image"),
    re.compile(r"[Ii]mage pull (?:for \S+ )?failed|Container pull image failed|Persistent Image Pull Errors"),
    re.compile(r"Unauthorized to access image"),
]
_IMAGE = re.compile(
    r"(?:image|Image) [\"']?([a-z0-9][\w.-]*(?::\d+)?/[\w./-]+(?::[\w.-]+|@sha256:[0-9a-f]+)?)|[\"']([a-z0-9][\w.-]*\.[a-z]{2,}/[\w./-]+:[\w.<>-]+)[\"']"
)
# Why, from the registry's own answer: Docker Hub's rate limit (HTTP 429, toomanyrequests); ACR's firewall ("client
# with IP '...' is not allowed access", DENIED); a tag or repository that is not there (MANIFEST_UNKNOWN, "manifest
# unknown", "not found in registry"); credentials or identity (unauthorized, "authentication required", 401, 403).
_WHY = (
    ("rate_limited", re.compile(r"\b429\b|toomanyrequests|rate limit", re.IGNORECASE)),
    ("network", re.compile(r"is not allowed access|aka\.ms/acr/firewall|no such host|i/o timeout|dial tcp")),
    (
        "not_found",
        re.compile(
            r"manifest unknown|MANIFEST_UNKNOWN|not found in registry|manifest for \S+ not found|(?<!or )not found: manifest",
            re.IGNORECASE,
        ),
    ),
    (
        "auth",
        re.compile(
            r"unauthori[sz]ed|authentication required|\b40[13]\b|Forbidden|failed to authorize|ImagePullUnauthorized",
            re.IGNORECASE,
        ),
    ),
)
_FIX = {
    "rate_limited": (
        "The public registry refused the pull for its rate limit.",
        [
            "Import the image into your Azure Container Registry (`az acr import -n ACR --source docker.io/IMAGE --image IMAGE`) and point the app at it (`az containerapp update -n APP -g RG --image ACR.azurecr.io/IMAGE`).",
        ],
    ),
    "network": (
        "The registry did not let the environment reach it (firewall or private endpoint DNS).",
        [
            "ACR's firewall: allow the environment's outbound IP (`az acr network-rule add`), or reach ACR through a private endpoint whose `privatelink.azurecr.io` zone is linked to the environment's VNet (`az network private-dns link vnet list --zone-name privatelink.azurecr.io -g RG`).",
        ],
    ),
    "not_found": (
        "The image tag or repository is not in the registry.",
        [
            "Check the tag exists: `az acr repository show-tags -n ACR --repository REPO`; push it, or deploy a tag that exists (`az containerapp update -n APP -g RG --image ...`).",
        ],
    ),
    "auth": (
        "The registry refused the app's credentials.",
        [
            "With a managed identity: grant it AcrPull on the registry (`az role assignment create --assignee PRINCIPAL_ID --role AcrPull --scope ACR_ID`) and set it on the registry (`az containerapp registry set -n APP -g RG --server ACR.azurecr.io --identity system`).",
            "With a password: it may have expired or been rotated (a workflow token dies with its run); set a current one with `az containerapp registry set`.",
        ],
    ),
}


@analyzer("aca_image_pull_failed")
def image_pull(view: LogView) -> Finding | None:
    hits = grep_with_state(view, *_PULL)
    if not hits:
        return None
    text = "\n".join(h.text for h, _ in hits) + "\n" + "\n".join(ln.text for ln in view.lines[:200])
    why = next((name for name, rx in _WHY if rx.search(text)), "")
    image = next((m.group(1) or m.group(2) for h, _ in hits if (m := _IMAGE.search(h.text))), "")
    summary, steps = _FIX.get(why, ("Container Apps could not pull the image; the system log says why.", []))
    steps = [
        *steps,
        "Confirm with `az containerapp logs show -n APP -g RG --type system` (ImagePull* reasons) and `az containerapp revision show -n APP -g RG --revision REV` (its provisioningError).",
    ]
    if not why:
        steps.insert(
            0,
            "Check the image name and tag, the registry credentials or identity (AcrPull), and that the registry is reachable from the environment.",
        )
    return Finding(
        kind="aca_image_pull_failed",
        title="Container Apps could not pull the image"
        + (f" {image}" if image else "")
        + (f" ({why.replace('_', ' ')})" if why else ""),
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(summary=summary + " The container never started: its code did not run.", steps=steps),
        first_seen=first_seen(hits),
        count=len(hits),
    )


# A workload profile the environment does not have: ARM's WorkloadProfileNotFound when an app's workloadProfileName
# names no profile of its environment (gemma-3-4b-it GPU deploy README; ACA flex-profile notes), and
# WorkloadProfileInvalidType "Workload profile type 'CONSUMPTION_GPU_NC8AS_T4' is invalid." when the environment will
# not take the GPU profile type (Azure/azure-cli#30526). A property a profile refuses (WorkloadProfilePropertyNotSupported)
# or a name too long are other errors, not this one.
_PROFILE = [
    re.compile(r"\b\w*WorkloadProfile(?:NotFound|InvalidType)\b"),
    re.compile(r"[Ww]orkload profile type '([^']+)' is invalid"),
    re.compile(
        r"does not have a workload profile|[Ww]orkload ?profile '?([\w-]*)'? (?:was )?not found|no workload profile (?:named|with)"
    ),
]
_PROFILE_NAME = re.compile(
    r"(?:[Ww]orkload ?profile (?:type |name )?|--workload-profile-(?:name|type) )[`'\"]?([A-Za-z][\w-]{2,})"
)


@analyzer("aca_workload_profile_missing")
def workload_profile(view: LogView) -> Finding | None:
    hits = grep_with_state(view, *_PROFILE)
    if not hits:
        return None
    names = [
        m.group(1)
        for h, _ in hits
        for m in _PROFILE_NAME.finditer(h.text)
        if m.group(1).lower() not in ("property", "is", "with", "named")
    ]
    gpu = next((n for n in names if "GPU" in n.upper()), "")
    return Finding(
        kind="aca_workload_profile_missing",
        title="The Container Apps environment has no such workload profile" + (f" ({gpu})" if gpu else ""),
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary="The app names a workload profile its environment does not have (or will not take), so ARM refused the revision; nothing ran.",
            steps=[
                "List the environment's profiles: `az containerapp env workload-profile list -n ENV -g RG`; the app's `workloadProfileName` must be one of their names exactly.",
                "Add the GPU profile the app needs: `az containerapp env workload-profile add -n ENV -g RG --workload-profile-name NAME --workload-profile-type Consumption-GPU-NC8as-T4` (or Consumption-GPU-NC24-A100), in a region that offers it (serverless A100: West US 3, West US, Australia East, Sweden Central; T4: West US 3, Australia East, Sweden Central, West Europe, there only in a new workload profile environment: learn.microsoft.com/azure/container-apps/gpu-serverless-overview).",
                "Or deploy on a profile the environment has: `--workload-profile-name` with its exact name.",
            ],
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )

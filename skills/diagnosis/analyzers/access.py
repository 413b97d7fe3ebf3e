"""Reaching the weights: GCS FUSE permissions, Hugging Face auth, model path or repo not found."""

from __future__ import annotations

import re

from skills.capacity.catalog import load_catalog
from skills.diagnosis.analyzers.base import LogView, analyzer, evidence_of, first_seen, rx
from skills.diagnosis.findings import Finding, ProposedAction, Remediation
from skills.errors import UserFacingError

# Wordings: Python's PermissionError ("[Errno 13] Permission denied: '/mnt/...'") reading the mount; Cloud Storage's
# 403 for a caller without the IAM permission ("<account> does not have storage.objects.get access to the Google
# Cloud Storage object", the JSON API's error message, relayed by gcsfuse as "googleapi: Error 403: ..."); gcsfuse's
# own operation names (fuseops, CreateFile, mountWithStorageHandle) in its failure lines; the kubelet's
# "MountVolume.SetUp failed for volume ..." for the GCS FUSE CSI driver (field: tests/data/field_logs).
_FUSE = rx(
    r"(?:PermissionError|Errno 13|[Pp]ermission denied).{0,200}(?:/mnt/|gcsfuse|fuse)",
    r"(?:/mnt/|gcsfuse)\S*.{0,200}[Pp]ermission denied",
    r"does not have storage\.objects\.(?:get|list) access",
    r"gcsfuse.{0,200}(?:403|[Aa]ccess denied|Forbidden)",
    # The GCS FUSE CSI driver / sidecar and IAM: mount refused, or GCS answering 403 to the FUSE process.
    r"MountVolume\.SetUp failed.{0,300}(?:PermissionDenied|Unauthenticated|403)",
    r"(?:mountWithStorageHandle|SetUpBucket|fuseops|CreateFile|CreateChildFile).{0,300}"
    r"(?:403|[Pp]ermission denied|PermissionDenied|Unauthenticated)",
    r"googleapi: Error 403: .{0,120}(?:[Aa]ccess denied|[Ff]orbidden|storage\.objects)",
    r"[Cc]aller does not have storage\.objects\.(?:get|list) access",
)
_IAM = re.compile(r"storage\.objects|403|Forbidden|[Aa]ccess denied|PermissionDenied|Unauthenticated|IAM")


@analyzer("gcs_fuse_permission_denied")
def fuse_permission(view: LogView) -> Finding | None:
    hits = view.grep(*_FUSE)
    if not hits:
        return None
    iam = any(_IAM.search(h.text) for h, _ in hits)
    # A read refused inside the container is the mount's uid/gid; a 403 from GCS is IAM (not the bot's to grant).
    local = not iam and any(not _IAM.search(h.text) for h, _ in hits)
    actions = []
    if local:
        actions.append(
            ProposedAction(
                action="redeploy",
                params={"fix_fuse_mount_options": True},
                reason="mount the bucket as uid/gid 1001, the vLLM image's user",
            )
        )
    steps = [
        "Mount the bucket with `uid=1001;gid=1001` in the volume's mount options (the vLLM image runs as "
        "uid/gid 1001), e.g. `uid=1001;gid=1001;max-conns-per-host=100;stat-cache-ttl=3600s;type-cache-ttl=3600s`.",
    ]
    if iam:
        steps.insert(0, "Grant the service's runtime service account `roles/storage.objectViewer` on the model bucket.")
    return Finding(
        kind="gcs_fuse_permission_denied",
        title="Permission denied reading the model under the GCS FUSE mount",
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(
            summary="vLLM cannot read the weights on the mounted bucket.", steps=steps, actions=actions
        ),
        first_seen=first_seen(hits),
        count=len(hits),
    )


# Wordings: huggingface_hub/utils/_http.py hf_raise_for_status (GatedRepoError "Cannot access gated repo for
# url ...", its 401 / 403 "Client Error." heads), the Hub's own messages ("Access to model X is restricted ...",
# "Invalid username or password.", "Invalid credentials in Authorization header"), requests' HTTPError
# ("403 Client Error: Forbidden for url: ...", requests/models.py raise_for_status: a licence request not yet
# granted, field: rh-ai-quickstart/ai-virtual-agent#200), file_download.py's offline LocalEntryNotFoundError.
_HF_AUTH = rx(
    r"GatedRepoError",
    r"[Cc]annot access gated repo",
    r"You are trying to access a gated repo",
    r"Access to model \S+ is restricted",
    r"401 Client Error",
    r"Unauthorized for url: https://huggingface\.co",
    r"403 Client Error: Forbidden for url: https://huggingface\.co",
    r"Invalid user token|Invalid credentials in Authorization header|Invalid username or password",
    r"outgoing traffic has been disabled|LocalEntryNotFoundError",
)
# hf_raise_for_status turns a 401 on a repo URL into RepositoryNotFoundError ("Repository Not Found for url",
# "401 is misleading": the Hub answers 401 for a repo that does not exist), and the Hub's "Invalid username or
# password." rides along: one cause, not found, unless the repo is gated.
_REPO_NOT_FOUND = re.compile(r"RepositoryNotFoundError|Repository Not Found for url")
_GATED = re.compile(
    r"GatedRepoError|[Cc]annot access gated repo|You are trying to access a gated repo|is restricted|Forbidden for url|"
    r"awaiting a review"
)  # the not-found message itself advises on "a private or gated repo": that is not a refusal
_OFFLINE = re.compile(r"outgoing traffic has been disabled|HF_HUB_OFFLINE|LocalEntryNotFoundError")


@analyzer("hf_auth_failed")
def hf_auth(view: LogView) -> Finding | None:
    hits = view.grep(*_HF_AUTH)
    if not hits:
        return None
    if view.grep(_REPO_NOT_FOUND) and not view.grep(_GATED):
        return None  # a 401 that means "not found" (model_not_found)
    offline = any(_OFFLINE.search(h.text) for h, _ in hits)
    steps = []
    bucket = ProposedAction(
        action="redeploy", params={"model_source": "bucket"}, reason="serve the weights from the GCS bucket"
    )
    if offline:
        actions = [
            ProposedAction(
                action="redeploy",
                params={"model_source": "hub"},
                reason="pull from the Hub: HF_HUB_OFFLINE unset, HF_TOKEN from Secret Manager",
            ),
            bucket,
        ]
    else:
        actions = [
            ProposedAction(
                action="redeploy",
                params={"hf_token_from_secret": True},
                reason="HF_TOKEN from Secret Manager for the gated repo",
            ),
            bucket,
        ]
    if offline:
        steps.append(
            "Offline mode is on but the files are not local: unset `HF_HUB_OFFLINE` when pulling from the Hub, "
            "or point `--model` at the weights on the GCS FUSE mount."
        )
    else:
        steps.append(
            "Inject the Hugging Face token as `HF_TOKEN` from Secret Manager (secret `hf-token`), never as a literal."
        )
        steps.append("Accept the Gemma licence on the model's Hugging Face page with the token's account.")
    steps.append("Or serve weights from the GCS bucket (`/mnt/models/...`) so no Hub access is needed.")
    return Finding(
        kind="hf_auth_failed",
        title="Hugging Face refused the download" + (" (offline mode, files not cached)" if offline else " (auth)"),
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(summary="vLLM could not fetch the model from the Hub.", steps=steps, actions=actions),
        first_seen=first_seen(hits),
        count=len(hits),
    )


# Wordings, by where they are raised: huggingface_hub's RepositoryNotFoundError ("Repository Not Found for url",
# utils/_http.py hf_raise_for_status) and its HFValidationError for a path taken for a repo id ("Repo id must be in
# the form 'repo_name' or 'namespace/repo_name': '...'", utils/_validators.py validate_repo_id); Transformers'
# cached_file / cached_files (utils/hub.py: "X is not a local folder and is not a valid model identifier listed on
# 'https://huggingface.co/models'", "X does not appear to have a file named config.json"); vLLM's config loader
# (vllm/transformers_utils/config.py get_config: "No supported config format found in X", later "Invalid
# repository ID or local directory specified: 'X'"); vLLM's OpenAI server for a request naming another model
# (serving_engine.py _check_model: "The model `X` does not exist.", HTTP 404); Python's FileNotFoundError.
_NOT_FOUND = rx(
    r"RepositoryNotFoundError|Repository Not Found for url",
    r"404 Client Error.{0,200}huggingface",
    r"does not appear to have a file named (?:config\.json|\S+)",
    r"No such file or directory: '(/mnt/[^']+)'",
    r"is not a local folder and is not a valid model identifier",
    r"Invalid repository ID or local directory specified",
    r"No supported config format found in",
    r"The model `([^`]+)` does not exist",
    # huggingface_hub takes a local path that does not exist for a repo id, and rejects it.
    r"Repo id must be in the form 'repo_name' or 'namespace/repo_name': '([^']+)'",
)
_HUB_ID = re.compile(r"huggingface\.co/(?:api/models/)?([\w.-]+/[\w.-]+)")
_PATHS = re.compile(r"(/mnt/[^'\"\s,]+)|'([^'\s]+)'")


def _catalog_match(candidate: str) -> tuple[str, str] | None:
    """(catalog model, its folder/repo name) when a path component or repo id names a catalog model."""
    catalog = load_catalog()
    parts = [candidate, *candidate.strip("/").split("/")]
    for part in parts:
        if len(part) < 5 or part.startswith("http"):
            continue
        try:
            m = catalog.model(part)
        except UserFacingError:
            continue
        return m.name, m.hf_repo.rsplit("/", 1)[-1]
    return None


def _model_fix(candidates: list[str]) -> tuple[ProposedAction | None, str] | None:
    """What fixes the model path: the catalog's folder for a misnamed one (e.g. the short name), or pulling
    from the Hub when the path is already the catalog's but holds no files. Letter case is never "fixed":
    GCS paths are case-sensitive and the bucket's spelling may be the right one."""
    for cand in candidates:
        match = _catalog_match(cand)
        if match is None:
            continue
        name, folder = match
        written = next((p for p in cand.strip("/").split("/") if p.lower() == folder.lower()), None)
        if written is None:
            return (
                ProposedAction(action="redeploy", params={"model": name}, reason=f"catalog model {name} ({folder})"),
                f"`{cand}` is not the catalog's folder for `{name}`: redeploy with model `{name}` (`{folder}`).",
            )
        if written != folder:
            return None, (
                f"`{written}` differs from the catalog's `{folder}` only in letter case: GCS paths are case-sensitive, "
                "so check the folder name in the bucket."
            )
        if cand.startswith("/"):
            return (
                ProposedAction(
                    action="redeploy", params={"model_source": "hub"}, reason="the bucket lacks the weights"
                ),
                f"`{cand}` is the expected folder but holds no weights: upload them, or pull `{name}` from the Hub.",
            )
    return None


# Missing-repo errors mention gated repos in their advice; only a 401 or a refusal makes it an auth problem.
_AUTHY = re.compile(r"\b401\b|Invalid username or password|Cannot access gated repo|is restricted")


@analyzer("model_not_found")
def model_not_found(view: LogView) -> Finding | None:
    gated = bool(view.grep(_GATED))
    hits = [
        (h, m)
        for h, m in view.grep(*_NOT_FOUND)
        if not _AUTHY.search(h.text) or (_REPO_NOT_FOUND.search(h.text) and not gated)
    ]
    if not hits:
        return None
    api_side = all("does not exist" in h.text for h, _ in hits)
    not_local = any("Repo id must be in the form" in h.text for h, _ in hits)
    actions: list[ProposedAction] = []
    if api_side:
        steps = [
            "Clients ask for a model name the server does not serve: use the id from `GET /v1/models`, "
            "or set `--served-model-name` to the name clients use."
        ]
        summary = "Requests name a model the server does not serve (HTTP 404)."
    else:
        steps = [
            "Check `--model`: the path under `/mnt/models` must exist in the bucket (with config.json), or the "
            "Hugging Face repo id must be spelled exactly.",
            "List the bucket (`gcloud storage ls gs://BUCKET/`) and compare with the path in the logs.",
        ]
        summary = "vLLM could not find the model it was told to load."
        cfg_model = view.config_at(hits[0][0].idx).get("model")
        candidates = [str(cfg_model)] if cfg_model else []
        for h, _ in hits[:10]:
            candidates += _HUB_ID.findall(h.text) + [a or b for a, b in _PATHS.findall(h.text)]
        fix = _model_fix(list(dict.fromkeys(c.rstrip("/.") for c in candidates if c)))
        if fix is not None:
            if fix[0] is not None:
                actions.append(fix[0])
            steps.insert(0, fix[1])
    return Finding(
        kind="model_not_found",
        title="Model not found"
        + (" (request names an unknown model)" if api_side else "")
        + (" (a local path that does not exist was taken for a Hub repo id)" if not_local else ""),
        severity="warning" if api_side else "critical",
        evidence=evidence_of(hits),
        remediation=Remediation(summary=summary, steps=steps, actions=actions),
        first_seen=first_seen(hits),
        count=len(hits),
    )

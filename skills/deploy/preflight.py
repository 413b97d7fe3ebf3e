"""Preflight: before a deploy or redeploy can be confirmed, check for real what a 15-minute deploy would
otherwise find out at the end: the checkpoint exists and the token can read it (or the bucket holds the
weights), the image tag exists (and passes the compatibility check), the region offers the GPU, and the project
has GPU quota there.

Each check is ✓, ✗ with the fix (blocks Confirm) or "could not check" with why (a warning). They run at once,
each within `timeout_s`; definite answers are kept a short while (ShortCache), so re-planning stays fast.
A source not wired (no adapter) is a "could not check".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from skills.capacity.fit import load_catalog
from skills.capacity.gpu_quota import read_gpu_quota, unit_note
from skills.capacity.image_compat import check_image, check_tpu_image
from skills.capacity.prices import load_prices, regions_offering
from skills.errors import UserFacingError
from skills.ports import ImageRegistry, ModelHub, PreflightUnavailable, QuotaReader, WeightStore
from skills.short_cache import ShortCache
from skills.targets.preflight_check import PreflightCheck, PreflightTarget

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreflightSources:
    """The adapters preflight asks (None: not wired; that check says it could not run) and its limits."""

    hub: ModelHub | None = None
    registry: ImageRegistry | None = None
    weights: WeightStore | None = None
    quotas: QuotaReader | None = None
    cache: ShortCache | None = None
    timeout_s: float = 5.0
    hub_url: str = "https://huggingface.co"  # where a user accepts a licence (HF_ENDPOINT)
    hf_token_secret: str = "hf-token"  # the secret a gated checkpoint's HF_TOKEN would come from (HF_TOKEN_SECRET)


async def run_preflight(src: PreflightSources, t: PreflightTarget) -> list[PreflightCheck]:
    checks: list[tuple[str, str, Callable[[], Awaitable[PreflightCheck]]]] = [
        ("region", "", lambda: _region(t)),
        ("image", f"image:{t.image}:{t.family}:{t.gpu}", lambda: _image(src, t)),
        ("quota", f"quota:{t.project}:{t.gpu}:{t.region}:{t.max_instances}", lambda: _quota(src, t)),
    ]
    if t.platform == "cloud-tpu":
        checks = [c for c in checks if c[0] == "image"]
    checks = [c for c in checks if c[0] in t.shared_checks]
    if t.bucket:
        checks.insert(0, ("weights", f"weights:{t.bucket}/{t.prefix}", lambda: _weights(src, t)))
    elif t.hf_repo:
        checks.insert(0, ("checkpoint", f"hub:{t.hf_repo}:{bool(t.hf_token_secret)}", lambda: _hub(src, t)))
    return list(await asyncio.gather(*(_bounded(src, name, key, fn) for name, key, fn in checks)))


async def _bounded(
    src: PreflightSources, name: str, key: str, fn: Callable[[], Awaitable[PreflightCheck]]
) -> PreflightCheck:
    """One check within the time limit, through the cache; whatever goes wrong becomes "could not check"."""
    if key and src.cache is not None:
        try:
            hit = await src.cache.get(key)
        except Exception as exc:  # noqa: BLE001 - a cache outage only costs the lookup
            log.warning("preflight cache read failed: %s", type(exc).__name__)
            hit = None
        if hit is not None:
            return PreflightCheck.model_validate(hit)
    try:
        check = await asyncio.wait_for(fn(), timeout=src.timeout_s)
    except TimeoutError:
        return PreflightCheck(name=name, status="unknown", text=f"no answer within {src.timeout_s:g} s ({name}).")
    except PreflightUnavailable as exc:
        return PreflightCheck(name=name, status="unknown", text=str(exc))
    except UserFacingError as exc:
        return PreflightCheck(name=name, status="unknown", text=str(exc))
    # Only a pass is reused: after a failure the user is fixing it (granting access, pushing the image, asking
    # for quota), and the next plan must show the fix at once, not the cached ✗ for another minute.
    if key and src.cache is not None and check.status == "ok":
        try:
            await src.cache.put(key, check.model_dump())
        except Exception as exc:  # noqa: BLE001 - as above
            log.warning("preflight cache write failed: %s", type(exc).__name__)
    return check


def _not_wired(name: str, what: str) -> PreflightCheck:
    return PreflightCheck(name=name, status="unknown", text=f"{what} is not wired in this process.")


async def _hub(src: PreflightSources, t: PreflightTarget) -> PreflightCheck:
    repo = t.hf_repo or ""
    if src.hub is None:
        return _not_wired("checkpoint", "the Hugging Face Hub")
    a = await src.hub.access(repo)
    page = f"{src.hub_url.rstrip('/')}/{repo}"
    secret = f"secret `{t.hf_token_secret}`"
    if a.state == "ok":
        if a.gated and not t.hf_token_secret:
            # The service gets no HF_TOKEN (the catalog records the checkpoint as not gated): its download would
            # fail with huggingface_hub's GatedRepoError (401).
            return PreflightCheck(
                name="checkpoint",
                status="fail",
                text=f"`{repo}` is gated on the Hub, and the service gets no HF_TOKEN to download it with.",
                fix="give the service a token of an account that has accepted the licence at "
                f"{page}: redeploy with `hf_token_from_secret=True` (HF_TOKEN from secret "
                f"`{src.hf_token_secret}`), or serve the weights from MODEL_BUCKET.",
            )
        if not a.gated:
            return PreflightCheck(
                name="checkpoint",
                status="ok",
                text=f"checkpoint `{repo}` exists and is not gated: the service downloads it without an HF token.",
            )
        if a.gated and not a.with_token:
            return PreflightCheck(
                name="checkpoint",
                status="unknown",
                text=f"`{repo}` exists and is gated, but the bot has no HF_TOKEN, so whether the service's token "
                f"({secret}) has accepted its licence was not checked.",
            )
        gated = " (gated: the token's account has accepted its licence)" if a.gated else ""
        return PreflightCheck(
            name="checkpoint", status="ok", text=f"checkpoint `{repo}` exists and the HF token can read it{gated}."
        )
    if a.state == "missing":
        return PreflightCheck(
            name="checkpoint",
            status="fail",
            text=f"checkpoint `{repo}` was not found on the Hub" + (f" ({a.detail})" if a.detail else "") + ".",
            fix=f"the catalog's repo id for `{t.model or repo}` is wrong or the repo is private to another account: "
            f"pick another model (`/gemma models`) or serve the weights from MODEL_BUCKET.",
        )
    if a.state == "gated":
        return PreflightCheck(
            name="checkpoint",
            status="fail",
            text=f"`{repo}` is gated and the account of the HF token in {secret} has not accepted its licence.",
            fix=f"accept the licence at {page} with that account (or store a token of an account that has).",
        )
    if a.state == "token_rejected":
        return PreflightCheck(
            name="checkpoint",
            status="fail",
            text=f"the Hub rejects the HF token in {secret}" + (f" ({a.detail})" if a.detail else "") + ".",
            fix=f"store a valid read token: `printf %s hf_… | gcloud secrets versions add {t.hf_token_secret} "
            "--data-file=-`.",
        )
    return PreflightCheck(
        name="checkpoint",
        status="fail",
        text=f"the HF token in {secret} may not read `{repo}`" + (f" ({a.detail})" if a.detail else "") + ".",
        fix="give the token read access (a fine-grained token needs 'Read access to contents of all public gated "
        "repos you can access'), or use a classic read token.",
    )


async def _weights(src: PreflightSources, t: PreflightTarget) -> PreflightCheck:
    where = f"gs://{t.bucket}/{t.prefix}"
    if src.weights is None:
        return _not_wired("weights", "Cloud Storage")
    listing = await src.weights.list_prefix(str(t.bucket), t.prefix)
    if listing.state == "no_bucket":
        return PreflightCheck(
            name="weights",
            status="fail",
            text=f"bucket `{t.bucket}` does not exist.",
            fix="set MODEL_BUCKET to the bucket holding the weights, or pull from the Hub (`model_source=hub`).",
        )
    if listing.state == "denied":
        return PreflightCheck(
            name="weights",
            status="unknown",
            text=f"the bot may not list {where} ({listing.detail or 'permission denied'}); give its service account "
            "roles/storage.objectViewer on the bucket to have this checked.",
        )
    names = [n[len(t.prefix) :] for n in listing.names]
    has_config = "config.json" in names
    shards = [n for n in names if n.endswith(".safetensors")]
    if has_config and shards:
        return PreflightCheck(
            name="weights", status="ok", text=f"{where} holds config.json and {len(shards)} safetensors file(s)."
        )
    missing = ", ".join(x for x, ok in (("config.json", has_config), ("*.safetensors", bool(shards))) if not ok)
    repo = load_catalog().model(t.model).hf_repo if t.model else "REPO"
    return PreflightCheck(
        name="weights",
        status="fail",
        text=f"{where} has no {missing}" + (" (the folder is empty)" if not names else "") + ".",
        fix=f"copy the checkpoint there: `hf download {repo} --local-dir w && gcloud storage cp -r w/* {where}`.",
    )


async def _image(src: PreflightSources, t: PreflightTarget) -> PreflightCheck:
    compat_note = ""
    if t.family and t.platform == "cloud-run":
        compat = check_image(t.image, t.family, t.gpu)
        if not compat.ok:
            return PreflightCheck(
                name="image",
                status="fail",
                text=f"image `{t.image}` cannot run {t.family} on {t.gpu}: " + " ".join(compat.problems),
                fix=f"use `{compat.suggestion}`." if compat.suggestion else "no recorded image fits.",
            )
        compat_note = " and passes the vLLM/CUDA compatibility check"
    elif t.platform == "cloud-tpu":  # vLLM's TPU image: a release tag that serves the model (check_tpu_image)
        tpu = check_tpu_image(t.image, t.family)
        if not tpu.ok:
            return PreflightCheck(
                name="image",
                status="fail",
                text=f"image `{t.image}` cannot serve {t.family or 'the model'} on TPU: " + " ".join(tpu.problems),
                fix=f"use `{tpu.suggestion}`." if tpu.suggestion else "no recorded image fits.",
            )
        compat_note = f" and its release serves {t.family}" if t.family else ""
    if src.registry is None:
        return _not_wired("image", "the image registry")
    found = await src.registry.lookup(t.image)
    if found.state == "ok":
        digest = f" ({found.digest[:19]}…)" if found.digest else ""
        return PreflightCheck(name="image", status="ok", text=f"image `{t.image}` exists{digest}{compat_note}.")
    if found.state == "missing":
        return PreflightCheck(
            name="image",
            status="fail",
            text=f"image `{t.image}` does not exist in its registry" + (f" ({found.detail})" if found.detail else ""),
            fix="check the tag's spelling (vLLM's tags: https://hub.docker.com/r/vllm/vllm-openai/tags) or unset "
            "VLLM_IMAGE to use the GPU's pinned default.",
        )
    return PreflightCheck(
        name="image",
        status="unknown",
        text=f"the registry refused the bot's request for `{t.image}` ({found.detail or 'denied'}); Cloud Run pulls "
        "with its own service agent, which may still have access.",
    )


async def _region(t: PreflightTarget) -> PreflightCheck:
    prices = load_prices()
    region = prices.regions.get(t.region)
    status = region.gpus.get(t.gpu) if region else None
    src = f"Cloud Run GPU regions, checked {prices.checked.isoformat()}"
    if status == "available":
        return PreflightCheck(name="region", status="ok", text=f"{t.region} offers {t.gpu} on Cloud Run ({src}).")
    others = ", ".join(regions_offering(t.gpu, prices)) or "none recorded"
    if status == "invitation":
        return PreflightCheck(
            name="region",
            status="unknown",
            text=f"{t.region} offers {t.gpu} by invitation only ({src}); whether this project is invited cannot be "
            f"read. Regions open to all: {others}.",
        )
    return PreflightCheck(
        name="region",
        status="fail",
        text=f"{t.region} does not offer {t.gpu} on Cloud Run ({src}).",
        fix=f"set GOOGLE_CLOUD_LOCATION to a region that does: {others}.",
    )


async def _quota(src: PreflightSources, t: PreflightTarget) -> PreflightCheck:
    if src.quotas is None:
        return _not_wired("quota", "the Cloud Quotas API")
    q = await read_gpu_quota(src.quotas, t.gpu, t.region)
    if q is None:
        return PreflightCheck(name="quota", status="unknown", text=f"no Cloud Run quota id is recorded for {t.gpu}.")
    if q.value is None:
        return PreflightCheck(
            name="quota",
            status="unknown",
            text=f"the Cloud Quotas API gives no value of `{q.quota_id}` for {t.region}.",
        )
    if q.value == -1:
        return PreflightCheck(name="quota", status="ok", text=f"`{q.quota_id}` in {t.region}: unlimited.")
    if q.value <= 0:
        return PreflightCheck(
            name="quota",
            status="fail",
            text=f"the project has no {t.gpu} quota in {t.region} (`{q.quota_id}` = 0): Cloud Run would refuse the "
            "revision.",
            fix=q.request_fix(t.project),
        )
    text = f"`{q.quota_id}` in {t.region}: {q.value} GPU(s)" + unit_note(t.gpu, q.raw if q.raw is not None else -1)
    if q.value < t.max_instances:
        # Cloud Run refuses the service outright ("Max instances must be set to N or fewer in order to set GPU
        # requirements. ... Quota violated: <quota id> requested: M allowed: N"; field reports in gpu_quota.py).
        return PreflightCheck(
            name="quota",
            status="fail",
            text=text + f", fewer than max instances {t.max_instances} (one GPU per instance): Cloud Run refuses "
            f'a GPU service whose max instances exceed the quota ("Max instances must be set to {q.value} or fewer '
            'in order to set GPU requirements").',
            fix=f"lower max instances to {q.value} (`--max-instances {q.value}`), or "
            + q.request_fix(t.project, need_gpus=t.max_instances),
        )
    return PreflightCheck(
        name="quota",
        status="ok",
        text=text + " (GPUs used by other services in the region count against it too).",
    )

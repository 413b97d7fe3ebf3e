"""Preflight checks against strict stand-ins of the Hub, a registry, Cloud Storage and Cloud Quotas, reached
through the real clients (huggingface_hub, httpx on the registry API, google-cloud-storage,
google-cloud-quotas): present, missing, forbidden, gated, unreachable and slow for each."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bot.adapters.preflight import make_preflight
from bot.sandbox.preflight_standins import (
    DEFAULT_QUOTA,
    GATED_REPO,
    HF_TOKEN,
    QUOTA_UNIT_AS_READ,
    PreflightStandIns,
)
from bot.settings import Settings, load_settings
from skills.capacity.fit import load_catalog
from skills.capacity.gpu_quota import (
    GPU_QUOTA_IDS,
    QUOTA_SERVICE,
    QUOTA_UNIT,
    quota_by_region,
    read_gpu_quota,
    request_text,
)
from skills.capacity.image_compat import default_image
from skills.deploy.preflight import PreflightSources, run_preflight
from skills.targets.preflight_check import PreflightCheck, PreflightTarget
from tests.conftest import REDIS_URL

MODEL = load_catalog().model("gemma-4-12b-qat")
REPO = MODEL.hf_repo
FOLDER = REPO.rsplit("/", 1)[-1]
IMAGE = default_image("nvidia-l4")
SLOW_LIMIT_S = 0.3  # the time limit the slow cases run under (what a held answer must exceed)


@pytest.fixture(scope="module")
def standins() -> Iterator[PreflightStandIns]:
    s = PreflightStandIns().start()
    yield s
    s.close()


@pytest.fixture
def stand(standins: PreflightStandIns) -> PreflightStandIns:
    standins.seed()  # each test starts from a healthy project and breaks one thing
    standins.gcs.buckets.clear()
    standins.gcs.denied.clear()
    standins.registry.denied.clear()
    standins.stock_bucket("weights")
    return standins


def _settings(stand: PreflightStandIns, key_prefix: str, **over: Any) -> Settings:
    base: dict[str, Any] = dict(
        google_cloud_project="test-proj",
        google_anonymous_credentials=True,
        redis_url=REDIS_URL,
        key_prefix=key_prefix,
        preflight_cache_s=0,
        preflight_timeout_s=5.0,
        **stand.settings_update(),
    )
    base.update(over)
    return load_settings(**base)


def _sources(stand: PreflightStandIns, key_prefix: str, redis_client: Any, **over: Any) -> PreflightSources:
    return make_preflight(_settings(stand, key_prefix, **over), redis_client)


def _target(**over: Any) -> PreflightTarget:
    base: dict[str, Any] = dict(
        image=IMAGE,
        model=MODEL.name,
        family=MODEL.family,
        hf_repo=REPO,
        gpu="nvidia-l4",
        region="europe-west1",
        project="test-proj",
        max_instances=1,
    )
    base.update(over)
    return PreflightTarget(**base)


async def _check(src: PreflightSources, name: str, **over: Any) -> PreflightCheck:
    checks = await run_preflight(src, _target(**over))
    return next(c for c in checks if c.name == name)


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


# --- the checkpoint on the Hub -----------------------------------------------------------------------------


async def test_checkpoint_present_gated_with_licence_accepted(
    stand: PreflightStandIns, key_prefix: str, redis_client: Any
) -> None:
    c = await _check(_sources(stand, key_prefix, redis_client), "checkpoint", hf_repo=GATED_REPO)
    assert c.status == "ok", c
    assert "licence" in c.text and GATED_REPO in c.text
    # asked with the bot's token, metadata first, then access
    assert (f"/api/models/{GATED_REPO}", HF_TOKEN) in stand.hub.requests
    assert (f"/api/models/{GATED_REPO}/auth-check", HF_TOKEN) in stand.hub.requests


async def test_a_gemma4_checkpoint_is_not_gated_and_needs_no_token(
    stand: PreflightStandIns, key_prefix: str, redis_client: Any
) -> None:
    """Gemma 4 is Apache-2.0 and not gated (catalog.yaml, hub_gated): no token on the service, none on the bot."""
    for src in (_sources(stand, key_prefix, redis_client), _sources(stand, key_prefix, redis_client, hf_token=None)):
        c = await _check(src, "checkpoint", hf_token_secret="")
        assert c.status == "ok" and "not gated" in c.text and "without an HF token" in c.text, c
    # the same check of a gated checkpoint for a service without HF_TOKEN: refused with the fix
    c = await _check(_sources(stand, key_prefix, redis_client), "checkpoint", hf_repo=GATED_REPO, hf_token_secret="")
    assert c.status == "fail" and "no HF_TOKEN" in c.text and "hf_token_from_secret=True" in c.fix, c


async def test_checkpoint_missing_fails_with_the_fix(
    stand: PreflightStandIns, key_prefix: str, redis_client: Any
) -> None:
    del stand.hub.repos[REPO]
    c = await _check(_sources(stand, key_prefix, redis_client), "checkpoint")
    assert c.status == "fail" and "was not found on the Hub" in c.text and "Repository not found" in c.text
    assert "/gemma models" in c.fix and "MODEL_BUCKET" in c.fix


async def test_a_checkpoint_id_in_another_letter_case_is_found_as_on_the_hub(
    stand: PreflightStandIns, key_prefix: str, redis_client: Any
) -> None:
    # Hub repo ids are case-insensitive (RedHatAI's FP8 ids are spelled -FP8-Dynamic and -FP8-dynamic in places).
    c = await _check(_sources(stand, key_prefix, redis_client), "checkpoint", hf_repo=REPO.swapcase())
    assert c.status == "ok", c
    del stand.hub.repos[REPO]
    c = await _check(_sources(stand, key_prefix, redis_client), "checkpoint", hf_repo=REPO.swapcase())
    assert c.status == "fail"


async def test_gated_checkpoint_whose_licence_the_token_has_not_accepted(
    stand: PreflightStandIns, key_prefix: str, redis_client: Any
) -> None:
    stand.hub.tokens[HF_TOKEN].discard(GATED_REPO)
    c = await _check(_sources(stand, key_prefix, redis_client), "checkpoint", hf_repo=GATED_REPO)
    assert c.status == "fail" and "has not accepted its licence" in c.text and "`hf-token`" in c.text
    assert f"{stand.urls['hub']}/{GATED_REPO}" in c.fix


async def test_token_without_gated_scope_is_forbidden(
    stand: PreflightStandIns, key_prefix: str, redis_client: Any
) -> None:
    stand.hub.no_gated_scope.add(HF_TOKEN)
    c = await _check(_sources(stand, key_prefix, redis_client), "checkpoint", hf_repo=GATED_REPO)
    assert c.status == "fail" and "may not read" in c.text and "fine-grained" in c.text
    assert "public gated repos" in c.fix


async def test_a_token_the_hub_rejects(stand: PreflightStandIns, key_prefix: str, redis_client: Any) -> None:
    c = await _check(_sources(stand, key_prefix, redis_client, hf_token="hf_revoked"), "checkpoint")
    assert c.status == "fail" and "rejects the HF token" in c.text and "Invalid credentials" in c.text
    assert "gcloud secrets versions add hf-token" in c.fix
    assert "hf_revoked" not in c.text + c.fix


async def test_without_a_token_a_gated_checkpoint_cannot_be_checked(
    stand: PreflightStandIns, key_prefix: str, redis_client: Any
) -> None:
    c = await _check(_sources(stand, key_prefix, redis_client, hf_token=None), "checkpoint", hf_repo=GATED_REPO)
    assert c.status == "unknown" and "no HF_TOKEN" in c.text
    assert all(tok == "" for _, tok in stand.hub.requests[-1:])  # asked anonymously


async def test_hub_unreachable_is_could_not_check(stand: PreflightStandIns, key_prefix: str, redis_client: Any) -> None:
    c = await _check(_sources(stand, key_prefix, redis_client, hf_endpoint=_closed_port()), "checkpoint")
    assert c.status == "unknown" and "cannot reach the Hub" in c.text and "huggingface.co" in c.text
    assert c.line().startswith("? could not check:")


async def test_slow_hub_is_cut_at_the_time_limit(stand: PreflightStandIns, key_prefix: str, redis_client: Any) -> None:
    stand.hub.hold_s = 10.0
    src = _sources(stand, key_prefix, redis_client, preflight_timeout_s=SLOW_LIMIT_S)
    t0 = time.monotonic()
    checks = await run_preflight(src, _target())
    took = time.monotonic() - t0
    hub = next(c for c in checks if c.name == "checkpoint")
    assert hub.status == "unknown" and f"no answer within {SLOW_LIMIT_S:g} s" in hub.text
    assert took < 5.0  # bounded by the limit, not by the held answer
    # the other checks ran alongside and answered
    assert {c.name: c.status for c in checks}["image"] == "ok"


# --- the weights in a bucket -------------------------------------------------------------------------------


def _bucket(**over: Any) -> dict[str, Any]:
    return {"hf_repo": None, "bucket": "weights", "prefix": f"{FOLDER}/", **over}


async def test_bucket_holding_the_weights(stand: PreflightStandIns, key_prefix: str, redis_client: Any) -> None:
    c = await _check(_sources(stand, key_prefix, redis_client), "weights", **_bucket())
    assert c.status == "ok" and "config.json and 1 safetensors" in c.text
    assert stand.gcs.requests[-1]["prefix"] == f"{FOLDER}/"


async def test_empty_folder_and_missing_bucket_fail(
    stand: PreflightStandIns, key_prefix: str, redis_client: Any
) -> None:
    src = _sources(stand, key_prefix, redis_client)
    c = await _check(src, "weights", **_bucket(prefix="gemma-4-12B-it-typo/"))
    assert c.status == "fail" and "the folder is empty" in c.text
    assert f"hf download {REPO}" in c.fix and "gs://weights/gemma-4-12B-it-typo/" in c.fix
    stand.gcs.put("weights", f"{FOLDER}-partial/config.json")
    c = await _check(src, "weights", **_bucket(prefix=f"{FOLDER}-partial/"))
    assert c.status == "fail" and "no *.safetensors" in c.text
    c = await _check(src, "weights", **_bucket(bucket="no-such-bucket"))
    assert c.status == "fail" and "does not exist" in c.text and "MODEL_BUCKET" in c.fix


async def test_bucket_the_bot_may_not_list_is_a_warning(
    stand: PreflightStandIns, key_prefix: str, redis_client: Any
) -> None:
    stand.gcs.denied.add("weights")
    c = await _check(_sources(stand, key_prefix, redis_client), "weights", **_bucket())
    assert c.status == "unknown" and "roles/storage.objectViewer" in c.text


async def test_storage_unreachable_and_slow(stand: PreflightStandIns, key_prefix: str, redis_client: Any) -> None:
    src = _sources(stand, key_prefix, redis_client, storage_api_endpoint=_closed_port())
    c = await _check(src, "weights", **_bucket())
    assert c.status == "unknown" and "Cloud Storage" in c.text
    stand.gcs.hold_s = 10.0
    src = _sources(stand, key_prefix, redis_client, preflight_timeout_s=SLOW_LIMIT_S)
    c = await _check(src, "weights", **_bucket())
    assert c.status == "unknown" and "no answer within" in c.text


# --- the image tag -----------------------------------------------------------------------------------------


async def test_image_present_through_the_token_flow(
    stand: PreflightStandIns, key_prefix: str, redis_client: Any
) -> None:
    c = await _check(_sources(stand, key_prefix, redis_client), "image")
    assert c.status == "ok" and "exists (sha256:" in c.text and "compatibility check" in c.text
    repo, tag = IMAGE.split(":")
    # 401 challenge, token, then the authorised HEAD
    assert stand.registry.requests[-2:] == [("HEAD", f"{repo}:{tag}"), ("HEAD", f"{repo}:{tag}")]
    assert stand.registry.token_auth[-1] == ""  # Docker Hub's pull token, asked anonymously


async def test_tag_missing_and_repository_missing(stand: PreflightStandIns, key_prefix: str, redis_client: Any) -> None:
    src = _sources(stand, key_prefix, redis_client)
    c = await _check(src, "image", image="vllm/vllm-openai:v0.25.9-cu129")
    # a well-formed tag the compatibility rules accept, which was never published
    assert c.status == "fail" and "MANIFEST_UNKNOWN" in c.text and "hub.docker.com/r/vllm/vllm-openai/tags" in c.fix
    c = await _check(src, "image", image="vllm/vllm-openia:v0.25.1-cu129", family=None)
    assert c.status == "fail" and "NAME_UNKNOWN" in c.text


async def test_incompatible_image_fails_before_asking_the_registry(
    stand: PreflightStandIns, key_prefix: str, redis_client: Any
) -> None:
    before = len(stand.registry.requests)
    c = await _check(_sources(stand, key_prefix, redis_client), "image", image="vllm/vllm-openai:v0.11.0")
    assert c.status == "fail" and "cannot run gemma-4-12b" in c.text and "v0.25.1" in c.fix
    assert len(stand.registry.requests) == before


async def test_other_registry_host_denied_unreachable_slow(
    stand: PreflightStandIns, key_prefix: str, redis_client: Any
) -> None:
    mirror = "us-docker.pkg.dev/p/mirror/vllm-openai:v0.25.1-cu129"
    stand.registry.add(mirror.split("/", 1)[1])
    endpoints = {"us-docker.pkg.dev": stand.urls["registry"]}
    src = _sources(stand, key_prefix, redis_client, registry_endpoints=endpoints)
    assert (await _check(src, "image", image=mirror)).status == "ok"
    stand.registry.denied.add("p/mirror/vllm-openai")
    c = await _check(src, "image", image=mirror)
    assert c.status == "unknown" and "refused" in c.text and "HTTP 403" in c.text
    src = _sources(stand, key_prefix, redis_client, registry_endpoints={"docker.io": _closed_port()})
    c = await _check(src, "image")
    assert c.status == "unknown" and "cannot reach the registry docker.io" in c.text
    stand.registry.hold_s = 10.0
    src = _sources(stand, key_prefix, redis_client, preflight_timeout_s=SLOW_LIMIT_S)
    c = await _check(src, "image")
    assert c.status == "unknown" and ("no answer within" in c.text or "did not answer within" in c.text)


# --- region and quota ------------------------------------------------------------------------------------


async def test_region_offers_the_gpu_or_not(stand: PreflightStandIns, key_prefix: str, redis_client: Any) -> None:
    src = _sources(stand, key_prefix, redis_client)
    assert (await _check(src, "region")).status == "ok"
    c = await _check(src, "region", region="us-central1")  # L4 there is by invitation only (prices.yaml)
    assert c.status == "unknown" and "invitation only" in c.text
    c = await _check(src, "region", region="us-west1")
    assert c.status == "fail" and "does not offer nvidia-l4" in c.text and "europe-west1" in c.fix


async def test_quota_present_short_and_zero(stand: PreflightStandIns, key_prefix: str, redis_client: Any) -> None:
    src = _sources(stand, key_prefix, redis_client)
    c = await _check(src, "quota")
    assert c.status == "ok" and f"{DEFAULT_QUOTA} GPU(s)" in c.text
    c = await _check(src, "quota", max_instances=5)  # a service Cloud Run refuses: not a note (issue 50)
    assert c.status == "fail" and "fewer than max instances 5" in c.text
    assert f"--max-instances {DEFAULT_QUOTA}" in c.fix and "for at least 5 GPU(s)" in c.fix
    stand.quotas.set(QUOTA_SERVICE, GPU_QUOTA_IDS["nvidia-l4"], "europe-west1", 0)
    c = await _check(src, "quota")
    assert c.status == "fail" and "= 0" in c.text
    assert "NvidiaL4GpuAllocNoZonalRedundancyPerProjectRegion" in c.fix and "project=test-proj" in c.fix
    # a region with no value of its own gets the quota's default entry (0 here)
    c = await _check(src, "quota", region="us-west1")
    assert c.status == "fail"


async def test_quota_unknown_id_unreachable_slow(stand: PreflightStandIns, key_prefix: str, redis_client: Any) -> None:
    stand.quotas.values.clear()
    src = _sources(stand, key_prefix, redis_client)
    c = await _check(src, "quota")
    assert c.status == "unknown" and "does not know" in c.text
    src = _sources(stand, key_prefix, redis_client, cloud_quotas_api_endpoint=_closed_port())
    c = await _check(src, "quota")
    assert c.status == "unknown" and "Cloud Quotas API" in c.text
    stand.seed()
    stand.quotas.hold_s = 10.0
    src = _sources(stand, key_prefix, redis_client, preflight_timeout_s=SLOW_LIMIT_S)
    c = await _check(src, "quota")
    assert c.status == "unknown" and "no answer within" in c.text


async def test_quota_the_bot_may_not_read_is_could_not_check(
    stand: PreflightStandIns, key_prefix: str, redis_client: Any
) -> None:
    # without roles/cloudquotas.viewer the API answers 403 PERMISSION_DENIED: a warning naming the role
    stand.quotas.denied = True  # the fixture's seed() lifts it for the next test
    c = await _check(_sources(stand, key_prefix, redis_client), "quota")
    assert c.status == "unknown" and "roles/cloudquotas.viewer" in c.text


# --- the short cache -----------------------------------------------------------------------------------------


async def test_a_pass_is_cached_briefly_a_failure_and_could_not_check_are_not(
    stand: PreflightStandIns, key_prefix: str, redis_client: Any
) -> None:
    src = _sources(stand, key_prefix, redis_client, preflight_cache_s=60)
    assert (await _check(src, "checkpoint")).status == "ok"
    asked = len(stand.hub.requests)
    del stand.hub.repos[REPO]  # changed behind the cache: the cached answer stands for its minute
    assert (await _check(src, "checkpoint")).status == "ok"
    assert len(stand.hub.requests) == asked
    # a failure is not reused: the fix the user just made shows on the next plan
    other = "acme/gemma-4-12b-finetune"
    stand.hub.repos.pop(other, None)
    assert (await _check(src, "checkpoint", hf_repo=other)).status == "fail"
    stand.hub.add(other, gated=False)  # the user pushed the checkpoint
    assert (await _check(src, "checkpoint", hf_repo=other)).status == "ok"
    # an unanswered check is asked again next time
    src_slow = _sources(stand, key_prefix, redis_client, preflight_cache_s=60, preflight_timeout_s=SLOW_LIMIT_S)
    stand.quotas.hold_s = 10.0
    assert (await _check(src_slow, "quota", region="europe-west4")).status == "unknown"
    stand.quotas.hold_s = 0.0
    assert (await _check(src_slow, "quota", region="europe-west4")).status == "ok"


async def test_artifact_registry_is_asked_with_the_bots_access_token(stand: PreflightStandIns) -> None:
    import base64

    from bot.adapters.image_registry import HttpImageRegistry, split_image

    image = "europe-docker.pkg.dev/acme/mirror/vllm-openai:v0.25.1-cu129"
    stand.registry.add(image.split("/", 1)[1])

    async def access_token() -> str | None:
        return "ya29.bot-access-token"

    reg = HttpImageRegistry({"europe-docker.pkg.dev": stand.urls["registry"]}, 5.0, access_token)
    try:
        found = await reg.lookup(image)
        assert found.state == "ok" and found.digest.startswith("sha256:")
        basic = base64.b64encode(b"oauth2accesstoken:ya29.bot-access-token").decode()
        assert stand.registry.token_auth[-1] == f"Basic {basic}"
        # without an override Docker Hub's short names go to its registry host (never asked here)
        assert reg.base_url("docker.io") == "https://registry-1.docker.io"
        assert reg.base_url("ghcr.io") == "https://ghcr.io"
    finally:
        await reg.aclose()
    assert split_image("ubuntu") == ("docker.io", "library/ubuntu", "latest")
    assert split_image("localhost:5000/a/b@sha256:ab") == ("localhost:5000", "a/b", "sha256:ab")


async def test_gpu_quota_is_read_in_whole_gpus_whatever_its_unit(
    stand: PreflightStandIns, key_prefix: str, redis_client: Any
) -> None:
    """The RTX Pro 6000 quota counts milli-GPUs, the L4 one GPUs (sources: skills/capacity/gpu_quota.py); read
    through the real client, both come out in GPUs, and an increase request is shown in GPUs too."""
    src = _sources(stand, key_prefix, redis_client)
    assert src.quotas is not None
    rtx = GPU_QUOTA_IDS["nvidia-rtx-pro-6000"]
    stand.quotas.set(QUOTA_SERVICE, rtx, "europe-west4", 2500)  # two GPUs and half of one: two instances
    q = await read_gpu_quota(src.quotas, "nvidia-rtx-pro-6000", "europe-west4")
    assert q is not None and (q.value, q.raw) == (2, 2500)
    c = await _check(src, "quota", gpu="nvidia-rtx-pro-6000", region="europe-west4", max_instances=2)
    assert c.status == "ok" and "2 GPU(s) (the API's value 2500 counts milli-GPUs)" in c.text, c.text
    stand.quotas.request(QUOTA_SERVICE, rtx, "europe-west4", preferred=3000, granted=1000, pending=True)
    (row,) = await quota_by_region(src.quotas, "nvidia-rtx-pro-6000", ["europe-west4"], 5.0)
    stand.quotas.preferences.clear()
    assert [request_text(r) for r in row.requests] == ["request for 3, granted 1 (pending Google's review)"]
    q = await read_gpu_quota(src.quotas, "nvidia-l4", "europe-west1")
    assert q is not None and q.value == q.raw == DEFAULT_QUOTA


def test_the_sandbox_reads_quota_units_as_the_bot_does() -> None:
    assert QUOTA_UNIT_AS_READ == QUOTA_UNIT

"""The four preflight stand-ins served together (Hub, registry, Cloud Storage, Cloud Quotas), seeded with what a
healthy project has: every catalog checkpoint (public and not gated, as Google's Gemma 4 repos are: Apache-2.0),
one gated checkpoint (GATED_REPO, whose licence the bot's token has accepted), every image in
skills/data/vllm_images.yaml, GPU quota in every region that offers the GPU. Scenarios (`scenario()`) take one
of them away. Used by the sandbox and by the tests."""

from __future__ import annotations

import contextlib
from typing import Any

from pydantic import SecretStr

from bot.sandbox.cloud_quotas_api import QuotasStandIn
from bot.sandbox.gcs_api import GcsStandIn
from bot.sandbox.hf_hub_api import HubStandIn
from bot.sandbox.registry_api import RegistryStandIn
from bot.sandbox.server import serve
from skills.capacity.fit import load_catalog
from skills.capacity.gpu_quota import GPU_QUOTA_IDS, QUOTA_SERVICE
from skills.capacity.image_compat import default_image, load_image_data
from skills.capacity.prices import load_prices
from skills.targets.tpu.spec import DEFAULT_IMAGE as TPU_IMAGE

HF_TOKEN = "hf_sandboxTokenWithTheGemmaLicenceAccepted"
# A checkpoint the Hub really gates: Gemma 3 and earlier are under the Gemma Terms of Use, behind "Access Gemma on
# Hugging Face ... you have to accept the conditions to access its files" (the Hub pages of Gemma 3n repos, e.g.
# https://huggingface.co/google/gemma-3n-E2B/tree/main: "Gated model"; "Gemma 3 required a logged-in account and an
# explicit agreement to Google's terms", public-code index file id 65727075224). Gemma 4 is not gated.
GATED_REPO = "google/gemma-3n-E2B"
DEFAULT_QUOTA = 3  # GPUs per region; seeded in each quota's own unit (QUOTA_UNIT_AS_READ)
# What one GPU counts as in the Cloud Quotas API's value, as the real API answers: the L4 quota counts GPUs, the
# RTX Pro 6000 quota milli-GPUs (a public deploy script: `REQUIRED_QUOTA=1000`, "RTX PRO 6000 quota is expressed
# in milliGPUs"; a codelab write-up: `quotas info` value 1000 where Cloud Run allowed 1). The stand-in's own
# table, not read from the bot's skills/capacity/gpu_quota.py (tests check the two agree).
QUOTA_UNIT_AS_READ = {"nvidia-l4": 1, "nvidia-rtx-pro-6000": 1000}
# (name, what happens): each makes the next deploy plan of the default L4 profile fail one check.
SCENARIOS = {
    "checkpoint-missing": "the Hub no longer has the default profile's checkpoint (a wrong catalog repo id)",
    "tag-missing": "the registry no longer has the L4 default vLLM image tag",
    "quota-zero": "the project has no L4 GPU quota in the region",
    "hub-slow": "the Hub holds every answer past preflight's time limit (the check says it could not check)",
    "preflight-healthy": "undo the preflight scenarios above",
}


class PreflightStandIns:
    def __init__(self) -> None:
        self.hub = HubStandIn()
        self.registry = RegistryStandIn()
        self.gcs = GcsStandIn()
        self.quotas = QuotasStandIn()
        self.urls: dict[str, str] = {}
        self._stack = contextlib.ExitStack()
        self.seed()

    def seed(self) -> None:
        self.hub.repos.clear()
        self.hub.tokens.clear()
        self.hub.no_gated_scope.clear()
        self.hub.hold_s = self.registry.hold_s = self.gcs.hold_s = self.quotas.hold_s = 0.0
        self.quotas.denied = False
        for m in load_catalog().models.values():
            self.hub.add(m.hf_repo, gated="manual" if m.hub_gated else False)
        self.hub.add(GATED_REPO, gated="manual")
        self.hub.tokens[HF_TOKEN] = set(self.hub.repos)
        self.registry.tags.clear()
        for image in load_image_data().images:
            self.registry.add(image)
        self.registry.add(TPU_IMAGE)  # vLLM's TPU release image (skills/targets/tpu/spec.py)
        for key in [k for k in self.quotas.values if k[0] == QUOTA_SERVICE]:  # Cloud Run's; Cloud TPU's stay
            del self.quotas.values[key]
        for name, region in load_prices().regions.items():
            for gpu in region.gpus:
                if gpu in GPU_QUOTA_IDS:
                    self.quotas.set(QUOTA_SERVICE, GPU_QUOTA_IDS[gpu], name, DEFAULT_QUOTA * QUOTA_UNIT_AS_READ[gpu])
        for qid in GPU_QUOTA_IDS.values():  # regions without their own value: none
            self.quotas.set(QUOTA_SERVICE, qid, "", 0)

    def gpu_allowed(self, accelerator: str, region: str) -> tuple[str, int] | None:
        """The Cloud Run GPU quota Cloud Run enforces in `region`: (quota id, whole GPUs), None when no quota id is
        known for the accelerator or the value is unlimited (for the Cloud Run stand-in's max-instances check)."""
        qid = GPU_QUOTA_IDS.get(accelerator)
        if qid is None:
            return None
        by_region = self.quotas.values.get((QUOTA_SERVICE, qid), {})
        raw = by_region.get(region, by_region.get("", 0))
        if raw < 0:
            return None
        return qid, raw // QUOTA_UNIT_AS_READ.get(accelerator, 1)

    def stock_bucket(self, bucket: str) -> None:
        """A bucket holding every catalog checkpoint as `hf download REPO --local-dir FOLDER` lays it out (the
        folder a bucket-served deploy points --model at: the repo's last part)."""
        for m in load_catalog().models.values():
            folder = m.hf_repo.rsplit("/", 1)[-1]
            self.gcs.put(bucket, f"{folder}/config.json", 2_000)
            self.gcs.put(bucket, f"{folder}/model-00001-of-00001.safetensors", 5_000_000_000)

    def start(self) -> PreflightStandIns:
        s = self._stack
        self.urls["hub"] = s.enter_context(serve(self.hub.app()))
        self.urls["registry"] = self.registry.base_url = s.enter_context(serve(self.registry.app()))
        self.urls["storage"] = s.enter_context(serve(self.gcs.app()))
        self.urls["quotas"] = s.enter_context(serve(self.quotas.app()))
        return self

    def close(self) -> None:
        self._stack.close()

    def settings_update(self) -> dict[str, Any]:
        """Settings pointing preflight at these stand-ins (Docker Hub's short names included)."""
        return {
            "hf_endpoint": self.urls["hub"],
            "hf_token": SecretStr(HF_TOKEN),
            "registry_endpoints": {"docker.io": self.urls["registry"]},
            "storage_api_endpoint": self.urls["storage"],
            "cloud_quotas_api_endpoint": self.urls["quotas"],
        }

    def scenario(self, name: str, profile_repo: str, region: str, hold_s: float = 30.0) -> str:
        """Make one preflight failure happen; returns what the next deploy plan should show."""
        if name == "preflight-healthy":
            self.seed()
            return "Preflight stand-ins are healthy again."
        if name == "checkpoint-missing":
            self.hub.repos.pop(profile_repo, None)
        elif name == "tag-missing":
            self.registry.remove(default_image("nvidia-l4"))
        elif name == "quota-zero":
            self.quotas.set(QUOTA_SERVICE, GPU_QUOTA_IDS["nvidia-l4"], region, 0)
        elif name == "hub-slow":
            self.hub.hold_s = hold_s
        else:
            raise KeyError(name)
        return f"Done: {SCENARIOS[name]}. Plan a deploy (`/gemma deploy gemma4-12b-qat-l4`) to see preflight catch it."

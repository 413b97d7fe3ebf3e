"""The Cloud Run stand-in rejects what the Admin API v2 rejects (through the real google-cloud-run client)."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from bot.sandbox.cloud_run_api import CloudRunStandIn
from skills.errors import UserFacingError
from skills.targets.cloud_run.render import DeployConfig, probe_for, render_service

pytest_plugins = ["tests.deploy_fixtures"]

SERVICES = "/v2/projects/test-proj/locations/us-central1/services"


def spec(
    gpu: str = "nvidia-rtx-pro-6000", cpu: str = "20", memory: str = "80Gi", stage: str = "BETA"
) -> dict[str, Any]:
    cfg = DeployConfig(
        service="vllm-gemma4",
        model="gemma-4-31b-qat",
        hf_repo="google/gemma-4-31B-it-qat-w4a16-ct",
        gpu=gpu,
        max_model_len=32768,
        gpu_memory_utilization=0.9,
        max_num_seqs=8,
        cpu=cpu,
        memory=memory,
        probe=probe_for(600),
        image="vllm/vllm-openai:v0.25.1",
        launch_stage=stage,
    )
    return render_service(cfg)


async def create(deps: Any, body: dict[str, Any]) -> None:
    await deps.runtime.apply_service("vllm-gemma4", body, create=True)


async def test_preview_gpu_needs_the_beta_launch_stage(deps: Any, cloud_run: CloudRunStandIn) -> None:
    with pytest.raises(UserFacingError) as exc:
        await create(deps, spec(stage="GA"))
    assert "rejected" in exc.value.message and "Preview" in exc.value.message and "BETA" in exc.value.message
    assert "vllm-gemma4" not in cloud_run.services  # nothing created
    await create(deps, spec())  # the same service at launch stage BETA is accepted
    assert "vllm-gemma4" in cloud_run.services


@pytest.mark.parametrize(
    ("gpu", "cpu", "memory", "stage"),
    [
        ("nvidia-l4", "2", "16Gi", "GA"),  # L4: at least 4 CPU
        ("nvidia-l4", "4", "8Gi", "GA"),  # ... and 16 GiB
        ("nvidia-rtx-pro-6000", "8", "80Gi", "BETA"),  # RTX PRO 6000: at least 20 CPU
        ("nvidia-rtx-pro-6000", "20", "32Gi", "BETA"),  # ... and 80 GiB
    ],
)
async def test_cpu_or_memory_under_the_gpu_minimum_is_rejected(
    deps: Any, cloud_run: CloudRunStandIn, gpu: str, cpu: str, memory: str, stage: str
) -> None:
    with pytest.raises(UserFacingError) as exc:
        await create(deps, spec(gpu, cpu, memory, stage))
    assert "requires at least" in exc.value.message
    assert not cloud_run.services


async def test_other_platforms_gpus_and_a_second_gpu_are_rejected(deps: Any, cloud_run: CloudRunStandIn) -> None:
    t4 = spec("nvidia-l4", "8", "32Gi", "GA")
    t4["template"]["nodeSelector"]["accelerator"] = "nvidia-tesla-t4"
    with pytest.raises(UserFacingError, match="not supported"):
        await create(deps, t4)
    two = spec("nvidia-l4", "8", "32Gi", "GA")
    two["template"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2"
    with pytest.raises(UserFacingError, match="one GPU per instance"):
        await create(deps, two)


async def test_unknown_fields_get_the_apis_400(cloud_run: CloudRunStandIn) -> None:
    base = cloud_run.base_url  # type: ignore[attr-defined]
    good = spec("nvidia-l4", "8", "32Gi", "GA")
    bad = copy.deepcopy(good)
    bad["template"]["containers"][0]["gpuType"] = "l4"
    async with httpx.AsyncClient(base_url=base) as http:
        r = await http.post(SERVICES, params={"serviceId": "vllm-gemma4"}, json=bad)
        assert r.status_code == 400
        err = r.json()["error"]
        assert err["status"] == "INVALID_ARGUMENT" and err["code"] == 400
        assert err["message"] == (
            "Invalid JSON payload received. Unknown name \"gpuType\" at 'service.template.containers[0]': "
            "Cannot find field."
        )
        assert err["details"][0]["fieldViolations"][0]["field"] == "service.template.containers[0]"
        top = {**good, "replicas": 2}
        r = await http.post(SERVICES, params={"serviceId": "vllm-gemma4"}, json=top)
        assert r.status_code == 400 and "Unknown name \"replicas\" at 'service'" in r.json()["error"]["message"]
        assert not cloud_run.services
        r = await http.post(SERVICES, params={"serviceId": "vllm-gemma4"}, json=good)  # snake or camel known
        assert r.status_code == 200
        r = await http.patch(f"{SERVICES}/vllm-gemma4", json={**good, "labels": {"a": "b"}, "bogus": True})
        assert r.status_code == 400 and '"bogus"' in r.json()["error"]["message"]


async def test_a_misspelled_field_is_an_error_not_a_silent_default(deps: Any, cloud_run: CloudRunStandIn) -> None:
    body = spec()
    body["template"]["maxInstanceRequestConcurency"] = 4  # typo of maxInstanceRequestConcurrency
    with pytest.raises(UserFacingError) as exc:
        await create(deps, body)
    assert "maxInstanceRequestConcurency" in exc.value.message
    assert "vllm-gemma4" not in cloud_run.services  # nothing sent
    assert not [r for r in cloud_run.requests if r[0] != "GET"]


async def test_max_instances_above_the_gpu_quota_is_refused_as_cloud_run_refuses_it(
    deps: Any, cloud_run: CloudRunStandIn
) -> None:
    """Cloud Run refuses a GPU service whose max instances exceed the region's GPU quota, naming the most it
    allows (field reports quoted in bot/sandbox/cloud_run_api.py)."""
    qid = "NvidiaRtxPro6000GpuAllocNoZonalRedundancyPerProjectRegion"
    cloud_run.gpu_quota = lambda accelerator: (qid, 1) if accelerator == "nvidia-rtx-pro-6000" else None
    body = spec()
    body["template"]["scaling"]["maxInstanceCount"] = 3
    with pytest.raises(UserFacingError) as exc:
        await create(deps, body)
    msg = exc.value.message
    assert "Max instances must be set to 1 or fewer in order to set GPU requirements" in msg, msg
    assert f"{qid} requested: 3 allowed: 1" in msg, msg
    assert "vllm-gemma4" not in cloud_run.services
    body["template"]["scaling"]["maxInstanceCount"] = 1
    await create(deps, body)  # within the quota: accepted
    raised = copy.deepcopy(cloud_run.services["vllm-gemma4"])
    raised["template"]["scaling"]["maxInstanceCount"] = 2
    with pytest.raises(UserFacingError) as exc:
        await deps.runtime.apply_service("vllm-gemma4", raised, create=False)
    assert "Max instances must be set to 1 or fewer" in exc.value.message

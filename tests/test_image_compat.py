"""Images that can serve Gemma 4 on Cloud Run GPUs: the data file, the per-GPU defaults, every profile rendered."""

from __future__ import annotations

from typing import Any

import pytest

from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.cloud_run_validation import CLOUD_RUN_GPUS, validate_service
from bot.sandbox.openai_script import OpenAIScript, say
from skills.capacity.catalog import load_catalog
from skills.capacity.image_compat import check_image, default_image, load_image_data, newest_compatible, parse_image
from skills.deploy.plan_builder import build_plan
from skills.errors import InvalidInput
from skills.serving.profiles import load_profiles
from skills.targets.cloud_run.render import main_container
from tests.agent_helpers import plan_json

pytest_plugins = ["tests.deploy_fixtures", "tests.agent_fixtures"]

L4, RTX = "nvidia-l4", "nvidia-rtx-pro-6000"


def test_tags_follow_the_cuda_convention_of_their_release() -> None:
    cases = {
        "vllm/vllm-openai:v0.25.1": ((0, 25, 1), "13.0"),  # from v0.20.0 unsuffixed = CUDA 13
        "vllm/vllm-openai:v0.25.1-cu129": ((0, 25, 1), "12.9"),
        "vllm/vllm-openai:v0.23.0-cu129-ubuntu2404@sha256:abc": ((0, 23, 0), "12.9"),
        "vllm/vllm-openai:v0.19.1": ((0, 19, 1), "12"),  # before v0.20.0 unsuffixed = CUDA 12.x
        "vllm/vllm-openai:v0.19.1-cu130": ((0, 19, 1), "13.0"),
        "us-docker.pkg.dev/p/mirror/vllm-openai:v0.24.0-cu129": ((0, 24, 0), "12.9"),
    }
    for image, (v, cuda) in cases.items():
        ref = parse_image(image)
        assert (ref.vllm, ref.cuda) == (v, cuda), image
    for floating in ("vllm/vllm-openai:latest", "vllm/vllm-openai:nightly", "vllm/vllm-openai:gemma4", "me/vllm:1.0"):
        assert parse_image(floating).vllm is None


def test_cuda13_build_cannot_run_on_the_l4_driver() -> None:
    c = check_image("vllm/vllm-openai:v0.25.1", "gemma-4-26b-a4b", L4)
    assert not c.ok and "535.216.03" in c.problems[0] and "CUDA 13.0" in c.problems[0]
    assert c.suggestion == "vllm/vllm-openai:v0.25.1-cu129"
    assert check_image("vllm/vllm-openai:v0.25.1", "gemma-4-26b-a4b", RTX).ok
    ok = check_image("vllm/vllm-openai:v0.25.1-cu129", "gemma-4-26b-a4b", L4)
    assert ok.ok and "minor-version compatibility" in ok.notes[0]  # 12.9 build on a 12.2 driver


def test_an_image_older_than_gemma4_or_the_12b_is_refused() -> None:
    old = check_image("vllm/vllm-openai:v0.11.0", "gemma-4-31b", RTX)
    assert not old.ok and ">= 0.19.1" in old.problems[0] and old.suggestion == "vllm/vllm-openai:v0.25.1"
    assert check_image("vllm/vllm-openai:v0.22.0-cu129", "gemma-4-26b-a4b", L4).ok
    twelve = check_image("vllm/vllm-openai:v0.22.0-cu129", "gemma-4-12b", L4)
    assert not twelve.ok and "Gemma4UnifiedForConditionalGeneration" in twelve.problems[0]
    assert newest_compatible("gemma-4-12b", L4) == "vllm/vllm-openai:v0.25.1-cu129"


def test_data_file_covers_the_catalog_and_agrees_with_the_stand_in() -> None:
    data, cat = load_image_data(), load_catalog()
    assert {m.family for m in cat.models.values()} <= set(data.families)
    on_run = {g.name: g for g in cat.gpus.values() if g.available_on_cloud_run}
    assert set(on_run) == set(data.cloud_run_gpus) == set(CLOUD_RUN_GPUS) == {L4, RTX}
    for name, g in on_run.items():
        assert g.cloud_run is not None
        min_cpu, min_gib, preview = CLOUD_RUN_GPUS[name]
        assert (g.cloud_run.min_cpu, g.cloud_run.min_memory_gib) == (min_cpu, min_gib)
        assert (g.launch_stage == "BETA") == preview
        assert data.cloud_run_gpus[name].compute_capability == g.compute_capability
    for g in cat.gpus.values():  # another platform's GPU is always labelled with its platform
        assert g.available_on_cloud_run or ("not Cloud Run" in g.label and g.platform != "Cloud Run")
    cited = [f.source for f in data.families.values()] + [i.source for i in data.images.values()]
    cited += [g.source for g in data.cloud_run_gpus.values()] + [c.source for c in data.tag_conventions]
    assert all(k in data.sources for k in cited + data.serving.sources)  # every entry names a source


async def test_every_profile_renders_on_every_cloud_run_gpu_with_a_compatible_image(deps: Any) -> None:
    env, cat = deps.writes.env, load_catalog()
    serving = load_image_data().serving
    rendered = 0
    for profile in load_profiles().values():
        if profile.target != "cloud-run":  # a Cloud TPU profile runs vLLM's TPU image (tests/test_tpu_target.py)
            continue
        family = cat.model(profile.model).family
        for gpu in (L4, RTX):
            plan = await build_plan("deploy", {"profile": profile.name, "gpu": gpu}, deps.runtime, env)
            spec = plan.spec or {}
            c = main_container(spec)
            assert c["image"] == default_image(gpu)
            assert check_image(c["image"], family, gpu).ok, (profile.name, gpu)
            args = c["args"]
            for flag, value in [
                ("--tool-call-parser", serving.tool_call_parser),
                ("--reasoning-parser", serving.reasoning_parser),
                ("--chat-template", serving.chat_template),
            ]:
                assert args[args.index(flag) + 1] == value
            limits = c["resources"]["limits"]
            gpu_prof = cat.gpu(gpu)
            assert gpu_prof.cloud_run is not None
            assert float(limits["cpu"]) >= gpu_prof.cloud_run.min_cpu
            assert int(limits["memory"].removesuffix("Gi")) >= gpu_prof.cloud_run.min_memory_gib
            assert spec.get("launchStage", "GA") == gpu_prof.launch_stage
            assert plan.gcloud.startswith("gcloud beta run deploy" if gpu == RTX else "gcloud run deploy")
            validate_service(spec)  # the stand-in (as strict as the API) would accept it
            rendered += 1
    assert rendered == 2 * len([p for p in load_profiles().values() if p.target == "cloud-run"])


async def test_vllm_image_override_that_cannot_run_is_refused_with_the_newest_compatible(
    deps: Any, cloud_run: CloudRunStandIn
) -> None:
    env = deps.writes.env.model_copy(update={"image": "vllm/vllm-openai:v0.25.1"})
    with pytest.raises(InvalidInput) as exc:
        await build_plan("deploy", {"profile": "gemma4-12b-qat-l4"}, deps.runtime, env)
    assert "VLLM_IMAGE" in exc.value.message and "CUDA 13.0" in exc.value.message
    assert "vllm/vllm-openai:v0.25.1-cu129" in exc.value.hint
    env = deps.writes.env.model_copy(update={"image": "vllm/vllm-openai:v0.11.0"})
    with pytest.raises(InvalidInput) as exc:
        await build_plan("deploy", {"profile": "gemma4-31b-qat-rtx"}, deps.runtime, env)
    assert "needs vLLM >= 0.19.1" in exc.value.message and "vllm/vllm-openai:v0.25.1" in exc.value.hint
    assert not [r for r in cloud_run.requests if r[0] != "GET"]  # refused plans change nothing


async def test_tool_requests_carry_the_fields_the_gemma4_recipe_needs(make_deps: Any, script: OpenAIScript) -> None:
    script.push(say(plan_json(), reasoning="thinking"))
    await make_deps().agent.analyze(since_minutes=30)
    req = script.chat_requests[0]
    assert req["tools"] and req["skip_special_tokens"] is False

"""Deploy plans refuse what cannot work or would change nothing, and keep what the bot does not manage."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.lifecycle import plan_startup
from skills.deploy.execute import execute
from skills.deploy.plan_builder import build_plan
from skills.errors import InvalidInput
from skills.targets.cloud_run.render import main_container

pytest_plugins = ["tests.deploy_fixtures"]
SERVICE = "vllm-gemma4"


async def deploy(deps: Any, params: dict[str, Any], **env: Any) -> Any:
    plan = await build_plan("deploy", params, deps.runtime, deps.writes.env.model_copy(update=env))
    result = await execute(deps.runtime, plan, poll_s=0.0)
    assert result.ok, result.detail
    return plan


async def test_a_deploy_that_changes_nothing_is_refused(deps: Any, cloud_run: CloudRunStandIn) -> None:
    await deploy(deps, {"profile": "gemma4-12b-qat-l4"})
    writes = [r for r in cloud_run.requests if r[0] != "GET"]
    with pytest.raises(InvalidInput) as exc:
        await build_plan("deploy", {"profile": "gemma4-12b-qat-l4"}, deps.runtime, deps.writes.env)
    assert "already running this" in exc.value.message and "vllm/vllm-openai:v0.25.1-cu129" in exc.value.message
    assert [r for r in cloud_run.requests if r[0] != "GET"] == writes
    # A real change is still planned.
    plan = await build_plan(
        "deploy", {"profile": "gemma4-12b-qat-l4", "max_model_len": 8192}, deps.runtime, deps.writes.env
    )
    assert [c.path for c in plan.changes] == ["template.containers[0].args --max-model-len"]


async def test_deploy_onto_a_running_service_keeps_what_the_bot_does_not_manage(
    deps: Any, cloud_run: CloudRunStandIn
) -> None:
    first = await deploy(deps, {"profile": "gemma4-12b-qat-l4"})
    mine = dict(first.spec)
    # Someone else adds a runtime identity, labels, an env var, a scratch volume and a sidecar.
    tmpl = mine["template"]
    mine = {**mine, "labels": {**mine["labels"], "team": "ml"}, "annotations": {**mine["annotations"], "o": "1"}}
    tmpl["serviceAccount"] = "vllm-runner@test-proj.iam.gserviceaccount.com"
    tmpl["volumes"] = [{"name": "scratch", "emptyDir": {"medium": "MEMORY", "sizeLimit": "1Gi"}}]
    c = tmpl["containers"][0]
    c["env"] = [*c.get("env", []), {"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"}]
    c["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    tmpl["containers"].append({"name": "metrics-agent", "image": "gcr.io/acme/agent:1"})
    await execute(deps.runtime, await _update_plan(deps, mine), poll_s=0.0)

    plan = await build_plan("deploy", {"profile": "gemma4-26b-qat-l4"}, deps.runtime, deps.writes.env)
    assert not [c.path for c in plan.changes if c.new is None], plan.changes  # nothing is removed
    assert (await execute(deps.runtime, plan, poll_s=0.0)).ok
    svc = cloud_run.services[SERVICE]
    assert svc["template"]["serviceAccount"] == "vllm-runner@test-proj.iam.gserviceaccount.com"
    assert svc["labels"]["team"] == "ml" and svc["annotations"]["o"] == "1"
    assert svc["annotations"]["gemma-sre/model"] == "gemma-4-26b-a4b-qat"
    serving = main_container(svc)
    assert {"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"} in serving["env"]
    assert {"name": "scratch", "mountPath": "/scratch"} in serving["volumeMounts"]
    assert [c["name"] for c in svc["template"]["containers"]] == ["vllm", "metrics-agent"]


async def test_the_adapter_keeps_fields_an_update_leaves_out(deps: Any, cloud_run: CloudRunStandIn) -> None:
    plan = await deploy(deps, {"profile": "gemma4-12b-qat-l4"}, service_account="sa@test-proj.iam.gserviceaccount.com")
    partial = {k: v for k, v in plan.spec.items() if k not in ("labels", "annotations")}
    partial["template"] = {k: v for k, v in partial["template"].items() if k != "serviceAccount"}
    op = await deps.runtime.apply_service(SERVICE, partial, create=False)
    assert (await deps.runtime.wait_operation(op, 5)).done
    svc = cloud_run.services[SERVICE]
    assert svc["template"]["serviceAccount"] == "sa@test-proj.iam.gserviceaccount.com"
    assert svc["labels"] == {"managed-by": "gemma-sre"}
    assert "--service-account=sa@test-proj.iam.gserviceaccount.com" in plan.gcloud


async def test_gpu_minimums_and_driver_checks_on_redeploy(deps: Any, cloud_run: CloudRunStandIn) -> None:
    await deploy(deps, {"profile": "gemma4-12b-qat-l4"})
    with pytest.raises(InvalidInput, match="at least 20 CPU and 80 GiB"):
        await build_plan("redeploy", {"gpu": "nvidia-rtx-pro-6000"}, deps.runtime, deps.writes.env)
    plan = await build_plan(
        "redeploy", {"gpu": "nvidia-rtx-pro-6000", "cpu": "20", "memory": "80Gi"}, deps.runtime, deps.writes.env
    )
    assert plan.spec is not None and plan.spec["launchStage"] == "BETA"  # the CUDA 12.9 image runs on driver 580
    assert plan.gcloud.startswith("gcloud beta run deploy")
    with pytest.raises(InvalidInput, match="at least 4 CPU and 16 GiB"):
        await build_plan("deploy", {"profile": "gemma4-12b-qat-l4", "cpu": "2"}, deps.runtime, deps.writes.env)


async def test_moving_a_cuda13_image_to_the_l4_is_refused(deps: Any, cloud_run: CloudRunStandIn) -> None:
    await deploy(deps, {"profile": "gemma4-31b-qat-rtx", "max_model_len": 16384})
    with pytest.raises(InvalidInput) as exc:
        await build_plan("redeploy", {"gpu": "nvidia-l4", "model": "gemma-4-12b-qat"}, deps.runtime, deps.writes.env)
    assert "CUDA 13.0" in exc.value.message and "535.216.03" in exc.value.message
    assert "vllm/vllm-openai:v0.25.1-cu129" in exc.value.hint


async def test_weights_from_the_hub_count_once_and_the_sandbox_loads_what_the_plan_says(deps: Any) -> None:
    """Hub files on Cloud Run's in-memory filesystem are the loading's staging, not a second copy of it: the 26B
    QAT build the field notes loaded in 32 GiB is planned at 32 GiB, not refused as needing ~38; a memory limit
    the plan raises is one the sandbox's Cloud Run fails with its 'Memory limit ... exceeded' line."""
    env = deps.writes.env
    twelve = await build_plan("deploy", {"profile": "gemma4-12b-qat-l4"}, deps.runtime, env)
    assert main_container(twelve.spec or {})["resources"]["limits"]["memory"] == "16Gi"
    assert any("in-memory filesystem" in n and "loading peak" in n for n in twelve.notes)
    big = await build_plan("deploy", {"profile": "gemma4-26b-qat-l4"}, deps.runtime, env)
    assert big.verdict == "fits" and not [n for n in big.notes if "MODEL_BUCKET" in n and ":warning:" in n], big.notes
    assert main_container(big.spec or {})["resources"]["limits"]["memory"] == "32Gi"
    # Asked for 18 GiB (enough from a bucket, not with the files in memory), the plan raises it and says why.
    short = await build_plan("deploy", {"profile": "gemma4-26b-qat-l4", "memory": "18Gi"}, deps.runtime, env)
    assert short.verdict == "fits_with_changes" and "memory 32Gi" in short.fit_changes, short.fit_changes
    assert main_container(short.spec or {})["resources"]["limits"]["memory"] == "32Gi"
    # The sandbox loads what the plan renders, and fails the 18 GiB it raised, the way Cloud Run does.
    assert plan_startup(big.spec or {}, SERVICE, "r1").outcome == "ready"
    as_asked = copy.deepcopy(big.spec or {})
    main_container(as_asked)["resources"]["limits"]["memory"] = "18Gi"
    failed = plan_startup(as_asked, SERVICE, "r2")
    assert (failed.outcome, failed.kind) == ("failed", "container_memory_exceeded")
    assert any("Memory limit of 18432 MiB exceeded" in x.text for x in failed.lines)


async def test_a_cloud_run_deploy_is_offered_cloud_run_alternatives_only(deps: Any) -> None:
    plan = await build_plan(
        "deploy", {"profile": "gemma4-31b-qat-rtx", "gpu": "nvidia-l4"}, deps.runtime, deps.writes.env
    )
    assert plan.verdict == "does_not_fit"
    (offer,) = [n for n in plan.notes if n.startswith("Configurations that fit")]
    assert "nvidia-rtx-pro-6000" in offer and "a100" not in offer and "h100" not in offer
    with pytest.raises(InvalidInput, match="one GPU per instance"):
        await build_plan("deploy", {"profile": "gemma4-12b-qat-l4", "gpu_count": 2}, deps.runtime, deps.writes.env)


async def _update_plan(deps: Any, spec: dict[str, Any]) -> Any:
    """A plan that applies `spec` as is (what a human's own change to the service would be)."""
    from skills.targets.cloud_run.diff import fingerprint
    from skills.targets.plan import Plan

    current = await deps.runtime.get_service_spec(SERVICE)
    return Plan(
        kind="redeploy", service=SERVICE, summary="manual change", spec=spec, base_fingerprint=fingerprint(current)
    )


async def test_moving_from_the_bucket_to_the_hub_drops_the_model_volume(deps: Any, cloud_run: CloudRunStandIn) -> None:
    await deploy(deps, {"profile": "gemma4-12b-qat-l4"}, model_bucket="weights")
    assert [v["name"] for v in cloud_run.services[SERVICE]["template"]["volumes"]] == ["models"]
    plan = await deploy(deps, {"profile": "gemma4-12b-qat-l4"})
    assert "template.volumes[models].gcs.bucket" in [c.path for c in plan.changes]
    assert not cloud_run.services[SERVICE]["template"].get("volumes")
    assert not main_container(cloud_run.services[SERVICE]).get("volumeMounts")


async def test_a_redeploy_changes_the_image_only_to_a_catalog_image_that_passes_the_check(
    deps: Any, cloud_run: CloudRunStandIn
) -> None:
    """Issue 31: the cuda_incompatible fix is a redeploy with another image, through the same compatibility check."""
    await deploy(deps, {"profile": "gemma4-12b-qat-l4"})
    writes = [r for r in cloud_run.requests if r[0] != "GET"]
    # Not in the compatibility data: refused before anything is planned, whatever the string holds.
    for image in ("vllm/vllm-openai:latest", "gcr.io/acme/vllm:dev", "vllm/vllm-openai:v0.25.1-cu129; rm -rf /"):
        with pytest.raises(InvalidInput, match="compatibility data"):
            await build_plan("redeploy", {"image": image}, deps.runtime, deps.writes.env)
    # In the data, but a CUDA 13 build on the L4's driver 535: the planner's check refuses it.
    with pytest.raises(InvalidInput) as exc:
        await build_plan("redeploy", {"image": "vllm/vllm-openai:v0.25.1"}, deps.runtime, deps.writes.env)
    assert "the requested image" in exc.value.message and "535.216.03" in exc.value.message
    assert "vllm/vllm-openai:v0.25.1-cu129" in exc.value.hint
    assert [r for r in cloud_run.requests if r[0] != "GET"] == writes  # nothing was written
    # A catalog image that runs there: planned as an image change, and applied.
    plan = await build_plan("redeploy", {"image": "vllm/vllm-openai:v0.24.0-cu129"}, deps.runtime, deps.writes.env)
    assert [(c.path, c.new) for c in plan.changes if "image" in c.path] == [
        ("template.containers[0].image", "vllm/vllm-openai:v0.24.0-cu129")
    ]
    assert (await execute(deps.runtime, plan, poll_s=0.0)).ok
    assert main_container(cloud_run.services[SERVICE])["image"] == "vllm/vllm-openai:v0.24.0-cu129"

"""VLLM_METRICS_SIDECAR: deploys add the Managed Service for Prometheus sidecar that carries vLLM's /metrics to
Cloud Monitoring, through the real google-cloud-run client and the Cloud Run stand-in; the stand-in refuses the
malformed multi-container specs the Admin API refuses; redeploys and scaling keep the sidecar; off, nothing
changes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bot.sandbox.cloud_run_api import CloudRunStandIn
from handlers.reply import CONFIRM_ACTION
from skills.capacity.cost import parse_cpu
from skills.deploy.execute import execute
from skills.deploy.plan_builder import build_plan
from skills.errors import InvalidInput, UserFacingError
from skills.serving.sizes import gib
from skills.targets.cloud_run import metrics_sidecar
from skills.targets.cloud_run.render import PORT, DeployConfig, main_container, probe_for, render_service
from tests.deploy_helpers import click, command, plan_id_of

pytest_plugins = ["tests.deploy_fixtures"]
SERVICE = "vllm-gemma4"


def sidecar_on(deps: Any) -> None:
    deps.settings = deps.settings.model_copy(update={"vllm_metrics_sidecar": True})


async def run(deps: Any, kind: str, params: dict[str, Any]) -> Any:
    plan = await build_plan(kind, params, deps.runtime, deps.writes.env)
    result = await execute(deps.runtime, plan, poll_s=0.0)
    assert result.ok, result.detail
    return plan


def containers(cloud_run: CloudRunStandIn) -> list[dict[str, Any]]:
    return list(cloud_run.services[SERVICE]["template"]["containers"])


def _config() -> DeployConfig:
    """A 12B QAT service on an L4 at the instance maximum (8 vCPU, 32 GiB), with the sidecar."""
    return DeployConfig(
        service=SERVICE,
        model="gemma-4-12b-qat",
        hf_repo="google/gemma-4-12b-it-qat",
        gpu="nvidia-l4",
        max_model_len=8192,
        gpu_memory_utilization=0.9,
        max_num_seqs=4,
        cpu="8",
        memory="32Gi",
        probe=probe_for(300),
        image="vllm/vllm-openai:v0.25.1-cu129",
        metrics_sidecar=True,
    )


def test_the_sidecar_default_scrape_port_is_where_vllm_listens() -> None:
    # No RunMonitoring config is mounted: the sidecar's default endpoint (:8080/metrics) must be vLLM's port.
    cfg = _config()
    spec = render_service(cfg)
    vllm, sidecar = spec["template"]["containers"]
    assert metrics_sidecar.CONFIG_PORT == PORT == vllm["ports"][0]["containerPort"]
    assert vllm["args"][vllm["args"].index("--port") + 1] == str(metrics_sidecar.CONFIG_PORT)
    assert sidecar["name"] == "collector" and sidecar["dependsOn"] == [vllm["name"]]
    assert "ports" not in sidecar and "volumeMounts" not in sidecar and "volumes" not in spec["template"]
    assert "nvidia.com/gpu" not in sidecar["resources"]["limits"]  # the GPU stays on vLLM
    off = render_service(cfg.model_copy(update={"metrics_sidecar": False}))
    [alone] = off["template"]["containers"]  # off: the one-container spec it always was
    # At the instance maximum (8 vCPU, 32 GiB) the sidecar's share comes out of vLLM's; nothing else differs.
    assert alone["resources"]["limits"] | {"cpu": "7", "memory": "32256Mi"} == vllm["resources"]["limits"]
    assert {k: v for k, v in alone.items() if k != "resources"} == {k: v for k, v in vllm.items() if k != "resources"}
    assert {k: v for k, v in spec.items() if k != "template"} == {k: v for k, v in off.items() if k != "template"}


async def test_deploy_with_the_setting_creates_a_two_container_revision(deps: Any, cloud_run: CloudRunStandIn) -> None:
    off, _ = await command(deps, "deploy gemma4-12b-qat-l4")
    sidecar_on(deps)
    reply, _ = await command(deps, "deploy gemma4-12b-qat-l4")
    assert reply is not None and "Plan" in reply.title
    text = "\n".join((s.text or "") + (s.code or "") for s in reply.sections)
    assert "adds the Managed Service for Prometheus sidecar `collector`" in text
    assert ":8080/metrics every 30 s" in text and "roles/monitoring.metricWriter" in text
    assert "+ Prometheus sidecar 1 vCPU, 0.5 GiB" in text  # the price counts the sidecar's share
    assert "template.containers[1].image" in text  # the diff shows the new container

    def usd(r: Any) -> float:
        line = next(x for x in (r.sections[0].text or "").splitlines() if "as deployed" in x)
        return float(line.split("$", 1)[1].split("/h", 1)[0])

    # The sidecar's share is added to the bill, or taken out of vLLM's at the instance maximum (then said).
    assert usd(reply) >= usd(off)
    if usd(reply) == usd(off):
        assert "beside the Prometheus sidecar, to keep the instance within Cloud Run's 8 vCPU and 32 GiB" in text
    result, _ = await click(deps, CONFIRM_ACTION, plan_id_of(reply))
    assert result is None
    svc = cloud_run.services[SERVICE]
    assert svc["latestReadyRevision"] == svc["latestCreatedRevision"]
    vllm, sidecar = containers(cloud_run)
    assert vllm["name"] == "vllm" and vllm["ports"][0]["containerPort"] == metrics_sidecar.CONFIG_PORT
    assert sidecar["image"] == metrics_sidecar.IMAGE and sidecar["dependsOn"] == ["vllm"]
    assert sidecar["resources"]["limits"] == {"cpu": "1", "memory": "512Mi"}
    both = (vllm["resources"]["limits"], sidecar["resources"]["limits"])
    assert sum(parse_cpu(lim["cpu"]) for lim in both) <= 8 and sum(gib(lim["memory"]) for lim in both) <= 32
    # What `/gemma status` and friends read is still the serving container.
    info = await deps.runtime.get_service(SERVICE)
    assert info.image == vllm["image"] and info.cpu == vllm["resources"]["limits"]["cpu"]


async def test_redeploys_deploys_and_scaling_keep_the_one_sidecar(deps: Any, cloud_run: CloudRunStandIn) -> None:
    sidecar_on(deps)
    await run(deps, "deploy", {"profile": "gemma4-12b-qat-l4"})
    first = containers(cloud_run)
    plan = await run(deps, "redeploy", {"image": "vllm/vllm-openai:v0.24.0-cu129"})
    assert [c["name"] for c in containers(cloud_run)] == ["vllm", "collector"]
    assert containers(cloud_run)[1] == first[1]
    assert not [c.path for c in plan.changes if "containers[1]" in c.path]
    await run(deps, "scale", {"min_instances": 0, "max_instances": 2})
    assert containers(cloud_run)[1] == first[1]
    plan = await run(deps, "deploy", {"profile": "gemma4-12b-qat-l4", "max_model_len": 8192})
    assert "template.containers[0].args --max-model-len" in [c.path for c in plan.changes]
    assert not [c.path for c in plan.changes if "containers[1]" in c.path or "containers[2]" in c.path]
    assert [c["name"] for c in containers(cloud_run)] == ["vllm", "collector"]  # no second sidecar
    assert "already runs the Prometheus sidecar `collector`" in "\n".join(plan.notes)
    # `/gemma cost` prices the instance with its sidecar, as the plan did.
    reply, _ = await command(deps, "cost")
    assert reply is not None
    assert "Sidecar containers (collector): +1 vCPU, +0.5 GiB in the price." in (reply.context or "")
    vllm_limits = containers(cloud_run)[0]["resources"]["limits"]
    total = f"{parse_cpu(vllm_limits['cpu']) + 1:g} vCPU, {gib(vllm_limits['memory']) + 0.5:g} GiB"
    assert total in "\n".join(f"{k} {v}" for sec in reply.sections for k, v in (sec.fields or []))
    # With the setting off again, a deploy keeps the sidecar the service has (as it keeps any other).
    deps.settings = deps.settings.model_copy(update={"vllm_metrics_sidecar": False})
    await run(deps, "deploy", {"profile": "gemma4-12b-qat-l4"})
    assert [c["name"] for c in containers(cloud_run)] == ["vllm", "collector"]


async def test_a_sidecar_someone_added_is_kept_not_doubled(deps: Any, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service(SERVICE)  # the serving container is unnamed, as a hand-made service may be
    svc = cloud_run.services[SERVICE]
    svc["template"]["containers"][0]["name"] = "vllm-gemma4-1"  # the name Cloud Run gives an unnamed one
    theirs = {"name": "prom", "image": f"{metrics_sidecar.IMAGE_REPO}:1.1.1", "dependsOn": ["vllm-gemma4-1"]}
    svc["template"]["containers"].append(theirs)
    sidecar_on(deps)
    plan = await run(deps, "deploy", {"profile": "gemma4-12b-qat-l4"})
    names = [c["name"] for c in containers(cloud_run)]
    assert names == ["vllm", "prom"]
    # The serving container took the rendered name; what started after it follows the rename.
    assert containers(cloud_run)[1]["dependsOn"] == ["vllm"]
    assert containers(cloud_run)[1]["image"].endswith(":1.1.1")
    assert "already runs the Prometheus sidecar `prom`" in "\n".join(plan.notes)


async def test_a_different_container_named_collector_is_refused(deps: Any, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service(SERVICE)
    cloud_run.services[SERVICE]["template"]["containers"].append({"name": "collector", "image": "otel/collector:1"})
    sidecar_on(deps)
    with pytest.raises(InvalidInput, match="already has a container named `collector`"):
        await build_plan("deploy", {"profile": "gemma4-12b-qat-l4"}, deps.runtime, deps.writes.env)


async def test_with_the_setting_off_a_deploy_renders_one_container(deps: Any, cloud_run: CloudRunStandIn) -> None:
    plan = await run(deps, "deploy", {"profile": "gemma4-12b-qat-l4"})
    assert [c["name"] for c in containers(cloud_run)] == ["vllm"]
    assert "Prometheus sidecar" not in "\n".join(plan.notes) + "\n".join(plan.fit_lines)
    assert "# and container" not in plan.gcloud


# --- the stand-in refuses what the Admin API refuses --------------------------------------------------------


def two_containers() -> dict[str, Any]:
    return render_service(_config())


def _ports_on_both(s: dict[str, Any]) -> None:
    s["template"]["containers"][1]["ports"] = [{"containerPort": 9090}]


def _no_ports(s: dict[str, Any]) -> None:
    del s["template"]["containers"][0]["ports"]


def _unknown_dependency(s: dict[str, Any]) -> None:
    s["template"]["containers"][1]["dependsOn"] = ["app"]


def _self_dependency(s: dict[str, Any]) -> None:
    s["template"]["containers"][1]["dependsOn"] = ["collector"]


def _duplicate_names(s: dict[str, Any]) -> None:
    s["template"]["containers"][1]["name"] = "vllm"
    s["template"]["containers"][1]["dependsOn"] = []


def _bad_name(s: dict[str, Any]) -> None:
    s["template"]["containers"][1]["name"] = "Collector_1"


def _two_gpus(s: dict[str, Any]) -> None:
    s["template"]["containers"][1]["resources"]["limits"]["nvidia.com/gpu"] = "1"


@pytest.mark.parametrize(
    ("break_it", "says"),
    [
        (_ports_on_both, "more than one container port is set"),
        (_no_ports, "missing field(s): service.template.containers[*].ports"),
        (_unknown_dependency, "Container 'app' named in depends_on is not a container of this revision"),
        (_self_dependency, "cannot depend on itself"),
        (_duplicate_names, 'duplicate container name "vllm"'),
        (_bad_name, "Invalid container name 'Collector_1'. Must conform to RFC 1123"),
        (_two_gpus, "The GPU can only be attached to one container"),
    ],
)
async def test_the_stand_in_refuses_a_malformed_multi_container_spec(
    deps: Any, cloud_run: CloudRunStandIn, break_it: Any, says: str
) -> None:
    body = two_containers()
    await deps.runtime.apply_service(SERVICE, copy.deepcopy(body), create=True)  # well formed: accepted
    assert [c["name"] for c in containers(cloud_run)] == ["vllm", "collector"]
    del cloud_run.services[SERVICE]
    break_it(body)
    with pytest.raises(UserFacingError) as exc:
        await deps.runtime.apply_service(SERVICE, body, create=True)
    assert "rejected" in exc.value.message and says in exc.value.message, exc.value.message
    assert SERVICE not in cloud_run.services  # nothing created


async def test_the_serving_container_is_found_by_its_port(deps: Any, cloud_run: CloudRunStandIn) -> None:
    sidecar_on(deps)
    await run(deps, "deploy", {"profile": "gemma4-12b-qat-l4"})
    assert main_container(cloud_run.services[SERVICE])["name"] == "vllm"


def test_the_sidecar_takes_its_share_only_at_the_instance_maximum() -> None:
    assert metrics_sidecar.share_of(8, 32) == (7, 31.5)
    assert metrics_sidecar.share_of(4, 16) == (4, 16)  # room left: vLLM keeps its own
    assert metrics_sidecar.share_of(8, 16) == (7, 16)

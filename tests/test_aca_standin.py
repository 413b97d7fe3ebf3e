"""The Azure Container Apps ARM stand-in (bot/sandbox/aca_api.py), reached by the real azure-mgmt-appcontainers
client through the adapter over HTTPS on 127.0.0.1: a create's long-running operation polled to Succeeded, the
revision through its states and its vLLM coming up (bot/sandbox/aca_replicas.py), traffic, Single mode, scale to
zero, delete; and ARM's refusals with their codes and wordings (raw requests where the SDK would not send them)."""

from __future__ import annotations

import copy
import ssl

import httpx
import pytest

from bot.sandbox.aca_api import API_VERSION, PROVISION_S
from bot.sandbox.aca_replicas import startup_s
from bot.sandbox.lifecycle import PULL_S
from skills.errors import InvalidInput
from skills.targets.aca.api import QuotaExceeded
from tests.aca_fixtures import A100, ENV, MODEL, RG, SUB, Aca, aca_env, app_body

APP_PATH = f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.App/containerApps"


async def _created(aca: Aca, name: str = "gemma", **kw: object) -> str:
    handle = await aca.api.begin_put_app(name, app_body(aca.env_id(), **kw))  # type: ignore[arg-type]
    aca.clock.advance(PROVISION_S)
    state = await aca.done(handle)
    assert state.done and state.status == "Succeeded", state
    return handle


async def test_create_is_polled_to_succeeded_and_the_revision_comes_up() -> None:
    async with aca_env() as aca:
        body = app_body(aca.env_id())
        handle = await aca.api.begin_put_app("gemma", body)
        state = await aca.api.operation(handle)
        assert not state.done and state.status == "InProgress"
        (rev,) = await aca.api.list_revisions("gemma")
        assert rev.name.startswith("gemma--") and len(rev.name) == len("gemma--") + 7
        assert (rev.provisioning_state, rev.running_state) == ("Provisioning", "Processing")
        app = await aca.api.get_app("gemma")
        assert app is not None and app.provisioning_state == "InProgress" and app.latest_ready_revision == ""

        aca.clock.advance(PROVISION_S)
        assert (await aca.done(handle)).status == "Succeeded"
        app = await aca.api.get_app("gemma")
        assert app is not None
        assert (app.provisioning_state, app.latest_revision, app.latest_ready_revision) == (
            "Succeeded",
            rev.name,
            rev.name,
        )
        assert app.fqdn == f"gemma.{aca.standin.default_domain}" and app.workload_profile == "gpu-a100"
        rev2 = await aca.api.get_revision("gemma", rev.name)
        assert rev2 is not None
        assert (rev2.provisioning_state, rev2.running_state, rev2.replicas) == ("Provisioned", "Processing", 1)
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"{aca.replicas.endpoint_of(app.fqdn)}/health")).status_code == 503

            aca.clock.advance(startup_s(body["properties"]["template"], A100))
            rev3 = await aca.api.get_revision("gemma", rev.name)
            assert rev3 is not None
            assert (rev3.running_state, rev3.health_state, rev3.traffic_weight) == ("Running", "Healthy", 100)
            assert (await http.get(f"{aca.replicas.endpoint_of(app.fqdn)}/health")).status_code == 200
            models = (await http.get(f"{aca.replicas.endpoint_of(app.fqdn)}/v1/models")).json()
            assert models["data"][0]["id"] == MODEL
        usage = {u.name: u for u in await aca.api.usages("swedencentral")}
        assert usage["SubscriptionConsumptionNCA100Gpus"].current == 1  # the running replica's A100


async def test_a_field_the_rest_spec_lacks_is_refused_with_arm_error_body() -> None:
    async with aca_env() as aca:
        body = app_body(aca.env_id())
        body["properties"]["template"]["containers"][0]["gpu"] = 1
        with pytest.raises(InvalidInput) as err:
            await aca.api.begin_put_app("gemma", body)
        assert "ContainerAppInvalidSchema: Invalid request body for container app. " in str(err.value)
        assert "Path: $.properties.template.containers[0].gpu." in str(err.value)
        # the raw answer is ARM's error document
        async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=aca.ca)) as http:
            r = await http.put(
                f"{aca.url}{APP_PATH}/gemma",
                params={"api-version": API_VERSION},
                headers={"Authorization": "Bearer t"},
                json={**app_body(aca.env_id()), "sku": "gpu"},
            )
        assert r.status_code == 400
        assert (
            r.json()["error"]["code"] == "ContainerAppInvalidSchema" and "Path: $.sku." in r.json()["error"]["message"]
        )
        assert await aca.api.get_app("gemma") is None


async def test_api_version_and_bearer_token_are_required() -> None:
    async with aca_env() as aca, httpx.AsyncClient(verify=ssl.create_default_context(cafile=aca.ca)) as http:
        url = f"{aca.url}{APP_PATH}/gemma"
        r = await http.get(url, params={"api-version": "2024-03-01"}, headers={"Authorization": "Bearer t"})
        assert r.status_code == 400
        assert r.json() == {
            "error": {
                "code": "InvalidApiVersionParameter",
                "message": f"The api-version '2024-03-01' is invalid. The supported versions are '{API_VERSION}'.",
            }
        }
        r = await http.get(url, headers={"Authorization": "Bearer t"})
        assert (r.status_code, r.json()["error"]["code"]) == (400, "MissingApiVersionParameter")
        r = await http.get(url, params={"api-version": API_VERSION})
        assert (r.status_code, r.json()["error"]["code"]) == (401, "AuthenticationFailed")
        # the SDK's own api_version override is refused the same way
        from azure.core.exceptions import HttpResponseError
        from azure.mgmt.appcontainers.aio import ContainerAppsAPIClient

        from bot.adapters.container_apps import StaticTokenCredential

        client = ContainerAppsAPIClient(
            StaticTokenCredential(), SUB, base_url=aca.url, connection_verify=aca.ca, api_version="2025-01-01"
        )
        try:
            with pytest.raises(HttpResponseError) as err:
                await client.managed_environments.get(RG, ENV)
            assert err.value.status_code == 400 and err.value.error is not None
            assert err.value.error.code == "InvalidApiVersionParameter"
        finally:
            await client.close()


async def test_a_workload_profile_the_environment_lacks_is_refused() -> None:
    async with aca_env() as aca:
        with pytest.raises(InvalidInput) as err:
            await aca.api.begin_put_app("gemma", app_body(aca.env_id(), profile="gpu-h100"))
        assert "ContainerAppWorkloadProfileNotFound" in str(err.value)
        assert "Workload profile 'gpu-h100' was not found in managed environment 'env-gemma'" in str(err.value)


async def test_no_gpu_quota_is_quota_exceeded() -> None:
    async with aca_env(gpu_quota=0) as aca:
        with pytest.raises(QuotaExceeded) as err:
            await aca.api.begin_put_app("gemma", app_body(aca.env_id()))
        text = str(err.value)
        assert "QuotaExceeded: Operation could not be completed as it results in exceeding approved" in text
        assert "Current Limit: 0, Current Usage: 0, Additional Required: 1" in text


async def test_quota_counts_what_running_replicas_hold() -> None:
    async with aca_env(gpu_quota=1) as aca:
        await _created(aca, "one")
        with pytest.raises(QuotaExceeded, match="Current Limit: 1, Current Usage: 1, Additional Required: 1"):
            await aca.api.begin_put_app("two", app_body(aca.env_id()))


async def test_delete_is_a_long_running_operation_then_the_app_is_gone() -> None:
    async with aca_env() as aca:
        await _created(aca)
        handle = await aca.api.begin_delete_app("gemma")
        assert not (await aca.api.operation(handle)).done
        app = await aca.api.get_app("gemma")
        assert app is not None and app.provisioning_state == "Deleting"
        aca.clock.advance(10)
        state = await aca.done(handle)
        assert (state.done, state.status) == (True, "Succeeded")
        assert await aca.api.get_app("gemma") is None
        assert aca.standin.requests[-2:] != []  # the poller went through the Location URL
        assert any("containerappOperationResults" in p for _, p in aca.standin.requests)


async def test_missing_resources_are_arm_404s() -> None:
    async with aca_env() as aca, httpx.AsyncClient(verify=ssl.create_default_context(cafile=aca.ca)) as http:
        r = await http.get(
            f"{aca.url}{APP_PATH}/nope", params={"api-version": API_VERSION}, headers={"Authorization": "Bearer t"}
        )
        assert r.status_code == 404
        assert r.json()["error"] == {
            "code": "ResourceNotFound",
            "message": f"The Resource 'Microsoft.App/containerApps/nope' under resource group '{RG}' was not found. "
            "For more details please go to https://aka.ms/ARMResourceNotFoundFix",
        }
        other_rg = APP_PATH.replace(RG, "rg-other")
        r = await http.get(
            f"{aca.url}{other_rg}/nope", params={"api-version": API_VERSION}, headers={"Authorization": "Bearer t"}
        )
        assert (r.status_code, r.json()["error"]["message"]) == (404, "Resource group 'rg-other' could not be found.")


async def test_traffic_weights_must_sum_to_100_and_name_revisions_that_exist() -> None:
    async with aca_env() as aca:
        split = [{"latestRevision": True, "weight": 60}, {"latestRevision": True, "weight": 30}]
        with pytest.raises(InvalidInput, match=r"ContainerAppInvalidTrafficWeight: .*sums to 90"):
            await aca.api.begin_put_app("gemma", app_body(aca.env_id(), traffic=split))
        ghost = [{"revisionName": "gemma--ghost", "weight": 100}]
        with pytest.raises(InvalidInput, match="Revision 'gemma--ghost' in the traffic weights does not exist"):
            await aca.api.begin_put_app("gemma", app_body(aca.env_id(), traffic=ghost))
        twice = [
            {"latestRevision": True, "weight": 50, "label": "a"},
            {"latestRevision": True, "weight": 50, "label": "a"},
        ]
        with pytest.raises(InvalidInput, match="ContainerAppInvalidTrafficLabel: Traffic label 'a'"):
            await aca.api.begin_put_app("gemma", app_body(aca.env_id(), traffic=twice))
        assert await aca.api.get_app("gemma") is None  # each refusal made nothing


async def test_multiple_mode_splits_traffic_and_single_mode_deactivates_the_old_revision() -> None:
    async with aca_env(gpu_quota=3) as aca:  # Multiple mode: both revisions' minReplicas hold a GPU each
        await _created(aca, suffix="one")
        body = app_body(aca.env_id(), suffix="two", traffic=[{"revisionName": "gemma--one", "weight": 100}])
        handle = await aca.api.begin_put_app("gemma", body)
        aca.clock.advance(PROVISION_S)
        assert (await aca.done(handle)).status == "Succeeded"
        revs = {r.name: r for r in await aca.api.list_revisions("gemma")}
        assert (revs["gemma--one"].traffic_weight, revs["gemma--two"].traffic_weight) == (100, 0)
        assert revs["gemma--one"].active and revs["gemma--two"].active

        single = app_body(aca.env_id(), suffix="three", mode="Single")
        handle = await aca.api.begin_put_app("gemma", single)
        aca.clock.advance(PROVISION_S)
        assert (await aca.done(handle)).status == "Succeeded"
        revs = {r.name: r for r in await aca.api.list_revisions("gemma")}
        assert [n for n, r in revs.items() if r.active] == ["gemma--three"]
        assert revs["gemma--one"].running_state == "Stopped" and revs["gemma--three"].traffic_weight == 100


async def test_a_put_with_the_same_template_makes_no_revision() -> None:
    async with aca_env() as aca:
        await _created(aca)
        body = app_body(aca.env_id())
        body["tags"]["owner"] = "sre"
        handle = await aca.api.begin_put_app("gemma", copy.deepcopy(body))
        aca.clock.advance(5)
        assert (await aca.done(handle)).status == "Succeeded"
        assert len(await aca.api.list_revisions("gemma")) == 1


async def test_a_revision_that_fails_fails_the_operation_with_acas_error() -> None:
    async with aca_env() as aca:
        aca.standin.fail_next_revision("Operation expired")
        handle = await aca.api.begin_put_app("gemma", app_body(aca.env_id()))
        aca.clock.advance(PROVISION_S)
        state = await aca.done(handle)
        assert (state.done, state.status) == (True, "Failed")
        assert state.error == (
            "ContainerAppOperationError: Failed to provision revision for container app 'gemma'. "
            "Error details: Operation expired"
        )
        (rev,) = await aca.api.list_revisions("gemma")
        assert (rev.provisioning_state, rev.running_state, rev.health_state) == ("Failed", "Failed", "Unhealthy")
        assert rev.provisioning_error == "Operation expired"
        app = await aca.api.get_app("gemma")
        assert app is not None and app.provisioning_state == "Failed" and app.latest_ready_revision == ""


async def test_a_vllm_that_does_not_start_fails_the_revision_health() -> None:
    async with aca_env() as aca:
        aca.replicas.fail_next_start = "torch.OutOfMemoryError: CUDA out of memory."
        await _created(aca)
        aca.clock.advance(3600)
        (rev,) = await aca.api.list_revisions("gemma")
        assert (rev.provisioning_state, rev.running_state, rev.health_state) == ("Provisioned", "Failed", "Unhealthy")
        texts = [t for _, _, t in aca.replicas.console("gemma")]
        assert "torch.OutOfMemoryError: CUDA out of memory." in texts
        assert any("EngineCore failed to start." in t for t in texts) and "Container called exit(1)." not in texts


async def test_a_start_longer_than_the_startup_probe_allows_fails() -> None:
    async with aca_env() as aca:
        body = app_body(aca.env_id())
        probe = body["properties"]["template"]["containers"][0]["probes"][0]
        probe.update(initialDelaySeconds=10, periodSeconds=5, failureThreshold=4)  # 30 s: less than the load
        handle = await aca.api.begin_put_app("gemma", body)
        aca.clock.advance(PROVISION_S)
        assert (await aca.done(handle)).status == "Succeeded"
        aca.clock.advance(29)
        (rev,) = await aca.api.list_revisions("gemma")
        assert rev.running_state == "Processing"
        aca.clock.advance(1)
        (rev,) = await aca.api.list_revisions("gemma")
        assert (rev.running_state, rev.health_state) == ("Failed", "Unhealthy")
        assert aca.replicas.console("gemma")[-1][1:] == (
            "ERROR",
            "Startup probe failed 30 s after the container started.",
        )


async def test_the_console_is_vllms_start_up_on_the_containers_port() -> None:
    async with aca_env() as aca:
        body = app_body(aca.env_id())
        await _created(aca)
        aca.clock.advance(PULL_S)  # the image pulled, vLLM's first line
        first = aca.replicas.console("gemma")[0]
        assert first[2] == "[__init__.py:235] Automatically detected platform cuda."
        aca.clock.advance(startup_s(body["properties"]["template"], A100))
        lines = aca.replicas.console("gemma")
        texts = [t for _, _, t in lines]
        assert texts[-1] == "INFO:     Application startup complete."
        assert any("'model': 'google/gemma-4-12b-it'" in t and "'port': 8000" in t for t in texts)
        assert any("Loading safetensors checkpoint shards: 100% Completed" in t for t in texts)
        assert [at for at, _, _ in lines] == sorted(at for at, _, _ in lines)


async def test_a_min_zero_revision_starts_once_rests_at_zero_and_a_request_wakes_it() -> None:
    """A new revision runs a replica to become ready (ACA: a revision is ready when one of its replicas is), min
    replicas 0 or not; after the cooldown with no request it rests at zero; the next request starts one again."""
    async with aca_env() as aca:
        await _created(aca, min_replicas=0)
        up_s = startup_s(app_body(aca.env_id())["properties"]["template"], A100)
        (rev,) = await aca.api.list_revisions("gemma")
        assert (rev.replicas, rev.running_state) == (1, "Processing")
        fqdn = aca.standin.fqdn("gemma")
        async with httpx.AsyncClient() as http:
            aca.clock.advance(up_s)
            (rev,) = await aca.api.list_revisions("gemma")
            assert (rev.replicas, rev.running_state, rev.health_state) == (1, "Running", "Healthy")
            aca.clock.advance(301)  # the cooldown passes with no request
            (rev,) = await aca.api.list_revisions("gemma")
            assert (rev.replicas, rev.running_state) == (0, "Running")
            assert (await http.get(f"{aca.replicas.endpoint_of(fqdn)}/health")).status_code == 503  # cold start
            (rev,) = await aca.api.list_revisions("gemma")
            assert (rev.replicas, rev.running_state) == (1, "Processing")
            aca.clock.advance(up_s)
            assert (await http.get(f"{aca.replicas.endpoint_of(fqdn)}/health")).status_code == 200
        aca.clock.advance(301)
        (rev,) = await aca.api.list_revisions("gemma")
        assert rev.replicas == 0

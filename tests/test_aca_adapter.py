"""The ContainerApps adapter (bot/adapters/container_apps.py) on the real async SDK client against the ARM stand-in
over HTTPS: what each port method returns, operations read without blocking, and ARM's errors in the bot's terms
(NotFound, QuotaExceeded, InvalidInput with ARM's `code: message`, CloudUnavailable), secrets redacted."""

from __future__ import annotations

import asyncio
import time

import pytest
from azure.core.exceptions import HttpResponseError, ODataV4Format, ServiceRequestError

from bot.adapters.container_apps import ContainerApps, StaticTokenCredential, _explained
from bot.sandbox.aca_api import PROVISION_S
from skills.errors import CloudUnavailable, InvalidInput, NotFound
from skills.targets.aca.api import QuotaExceeded
from tests.aca_fixtures import A100, DOMAIN, ENV, GPU, LOC, QUOTA, RG, SUB, aca_env, app_body


async def test_environment_profiles_and_usages_are_read_back() -> None:
    async with aca_env(gpu_quota=4) as aca:
        env = await aca.api.get_environment()
        assert (env.name, env.location, env.provisioning_state, env.default_domain) == (ENV, LOC, "Succeeded", DOMAIN)
        assert {(p.name, p.workload_profile_type) for p in env.workload_profiles} == {
            ("Consumption", "Consumption"),
            (GPU, A100),
        }
        assert await aca.api.available_profiles(LOC) == ["Consumption", A100, "Consumption-GPU-NC8as-T4"]
        assert await aca.api.available_profiles("westus") == []
        (usage,) = await aca.api.usages(LOC)
        assert (usage.name, usage.display, usage.current, usage.limit, usage.unit) == (
            QUOTA,
            "Subscription Consumption NCA100 GPUs",
            0,
            4,
            "Count",
        )


async def test_missing_things_are_none_or_not_found() -> None:
    async with aca_env() as aca:
        assert await aca.api.get_app("gemma") is None
        other = ContainerApps(
            SUB, RG, "env-other", base_url=aca.url, credential=StaticTokenCredential(), connection_verify=aca.ca
        )
        try:
            with pytest.raises(NotFound, match=r"ResourceNotFound: The Resource 'Microsoft\.App/managedEnvironments/"):
                await other.get_environment()
        finally:
            await other.aclose()
        handle = await aca.api.begin_put_app("gemma", app_body(aca.env_id()))
        assert await aca.api.get_revision("gemma", "gemma--nope") is None
        with pytest.raises(NotFound):
            await aca.api.list_revisions("other")
        with pytest.raises(NotFound):
            await aca.api.operation("put/other#99")
        aca.clock.advance(PROVISION_S)
        assert (await aca.done(handle)).status == "Succeeded"


async def test_operation_reports_without_waiting_for_arm() -> None:
    async with aca_env() as aca:
        handle = await aca.api.begin_put_app("gemma", app_body(aca.env_id()))
        start = time.monotonic()
        states = [await aca.api.operation(handle) for _ in range(20)]
        assert time.monotonic() - start < 0.5  # reads the poller; never waits out a poll
        assert all(not s.done and s.status == "InProgress" for s in states)
        aca.clock.advance(PROVISION_S)
        done = await aca.done(handle)
        assert (done.done, done.status, done.error) == (True, "Succeeded", "")


async def test_aclose_stops_pollers_still_running() -> None:
    async with aca_env() as aca:
        handle = await aca.api.begin_put_app("gemma", app_body(aca.env_id()))
        _, task = aca.api._ops[handle]
        await aca.api.aclose()
        assert task.done()


async def test_refusals_keep_arms_code_and_message() -> None:
    async with aca_env(gpu_quota=0) as aca:
        with pytest.raises(QuotaExceeded, match=r"QuotaExceeded: Operation could not be completed"):
            await aca.api.begin_put_app("gemma", app_body(aca.env_id()))
        body = app_body(aca.env_id(), profile="Consumption")
        body["properties"]["environmentId"] = body["properties"]["environmentId"].replace(ENV, "env-other")
        with pytest.raises(InvalidInput, match="InvalidManagedEnvironmentId: Invalid ManagedEnvironmentId value '"):
            await aca.api.begin_put_app("gemma", body)
        body = app_body(aca.env_id(), profile="Consumption")
        body["properties"]["template"]["containers"][0]["image"] = ""
        with pytest.raises(
            InvalidInput, match="ContainerAppImageRequired: Container with name 'vllm' must have an 'Image' property"
        ):
            await aca.api.begin_put_app("gemma", body)


def _http_error(status: int, code: str, message: str) -> HttpResponseError:
    exc = HttpResponseError(message=f"({code}) {message}")
    exc.status_code = status
    exc.error = ODataV4Format({"error": {"code": code, "message": message}})
    return exc


@pytest.mark.parametrize(
    ("exc", "kind", "text"),
    [
        (_http_error(503, "ServiceUnavailable", "try later"), CloudUnavailable, "answered 503"),
        (_http_error(500, "InternalServerError", "boom"), CloudUnavailable, "InternalServerError: boom"),
        (ServiceRequestError("connection refused"), CloudUnavailable, "could not be reached"),
        (_http_error(409, "OperationNotAllowed", "exceeding approved Total Regional Cores quota"), QuotaExceeded, ""),
        (_http_error(409, "Conflict", "busy"), InvalidInput, "Conflict: busy"),
        (_http_error(404, "ResourceGroupNotFound", "Resource group 'x' could not be found."), NotFound, "'x'"),
    ],
)
async def test_arm_errors_map_to_the_bots_errors(exc: Exception, kind: type[Exception], text: str) -> None:
    with pytest.raises(kind) as err:
        async with _explained("container app gemma"):
            raise exc
    assert text in str(err.value)


async def test_secrets_in_arm_messages_are_redacted() -> None:
    leak = (
        "https://kv.vault.azure.net/secrets/k?sig=abcdef1234567890abcdef "
        "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc"
    )
    with pytest.raises(InvalidInput) as err:
        async with _explained("container app gemma"):
            raise _http_error(400, "ContainerAppSecretInvalid", leak)
    assert "abcdef1234567890abcdef" not in str(err.value) and "eyJzdWIiOiIxIn0" not in str(err.value)


async def test_static_token_credential_hands_out_its_token() -> None:
    cred = StaticTokenCredential("t0k")
    async with cred:
        assert (await cred.get_token("https://management.azure.com/.default")).token == "t0k"
        info = await cred.get_token_info("https://management.azure.com/.default")
        assert info.token == "t0k" and info.expires_on > time.time()
    await asyncio.sleep(0)

"""The Azure Container Apps target as a user meets it (issue 54): a console session on the sandbox, whose Azure is
the ARM, Log Analytics and Azure Monitor stand-ins over HTTPS on 127.0.0.1 answering the real Azure SDK clients.

- `/gemma fit gemma-4-e4b --gpu t4` explains the T4's missing bfloat16 and prices the T4 workload profile;
- `/gemma deploy gemma4-12b-qat-aca-a100` plans on the A100 profile with Azure's own preflight lines and the az
  equivalent, and Confirm runs through the SDK to a serving revision, in ACA's stages;
- status, revisions and cost say what the stand-in holds, in ACA's words (replicas, revisions, workload profile);
- destroy (typed confirmation) deletes the app;
- a plan refused by Azure's preflight (the environment lacks the profile; its GPU quota is 0), and a bot whose
  settings leave Azure out saying what to set;
- the MCP server reaches the ACA app through the registry, with no per-target code in handlers/."""

from __future__ import annotations

import re
from pathlib import Path

from bot.sandbox.aca_world import ENVIRONMENT
from bot.sandbox.console_session import ConsoleSession
from skills.capacity.aca_catalog import load_aca_catalog
from skills.capacity.aca_prices import aca_price
from tests.test_mcp_server import _env, _text, stdio_session
from tests.test_truthful_writes import console

__all__ = ["console"]  # a fixture, used by name

APP = "vllm-gemma4-aca"
PROFILE = "gemma4-12b-qat-aca-a100"
A100 = "Consumption-GPU-NC24-A100"


def _standin(console: ConsoleSession):  # type: ignore[no-untyped-def]
    assert console.sandbox is not None
    return console.sandbox.azure.standin


async def test_fit_on_the_t4_explains_bf16_and_prices_its_profile(console: ConsoleSession) -> None:
    out = await console.line("/gemma fit gemma-4-e4b --gpu t4")
    assert "--dtype half" in out, out
    assert "Bfloat16 is only supported on GPUs with compute capability of at least 8.0" in out, out
    t4 = aca_price("Consumption-GPU-NC8as-T4")
    assert t4.per_replica_usd_per_hour is not None
    assert f"${t4.per_replica_usd_per_hour:.2f}/h" in out, out  # the one ACA price, as fit shows it
    assert "Consumption-GPU-NC8as-T4" in out and "/M output tokens" in out, out


async def test_an_a100_profile_deploys_through_the_sdk_then_status_cost_and_destroy(console: ConsoleSession) -> None:
    plan = await console.line(f"/gemma deploy {PROFILE}")
    assert plan.startswith(f"Plan: Deploy `{PROFILE}`"), plan
    assert f"to Azure Container Apps app `{APP}` (new app)" in plan, plan
    assert f"✓ environment `{ENVIRONMENT}` has workload profile" in plan, plan
    assert re.search(rf"✓ \w+ offers {A100}", plan), plan
    assert "✓ `ManagedEnvironmentConsumptionNCA100Gpus`" in plan, plan
    assert f"az containerapp create --name {APP}" in plan and f"--workload-profile-name {A100}" in plan, plan
    out = await console.line("click Confirm")
    assert f"deploy `{APP}`: ready" in out, out
    assert "replica starting" in out and "instance starting" not in out, out  # ACA's words for the stage
    app = _standin(console).apps[APP]
    [revision] = app.revisions.values()  # what Azure holds: one revision, the one the bot says serves
    assert f"revision `{revision.name}` is ready and serving 100% of traffic" in out, out

    status = await console.line(f"/gemma status {APP} --fresh")
    assert f"{APP}: " in status.splitlines()[0], status
    assert "rolling out" not in status.splitlines()[0], status
    assert f"latest ready `{revision.name}`" in status, status
    assert f"workload profile `{A100}`" in status and "24 vCPU, 220 GiB per replica" in status, status
    assert "Azure Monitor (last" in status and "Cloud Monitoring" not in status, status
    assert "min-instances" not in status, status

    revisions = await console.line(f"/gemma revisions {APP}")
    assert revision.name in revisions and "100% traffic" in revisions, revisions

    cost = await console.line(f"/gemma cost {APP}")
    each = aca_price(A100, _standin(console).location).per_replica_usd_per_hour
    assert each is not None
    assert cost.startswith(f"{APP}: ${each:.2f}/hour per running replica"), cost
    assert "slice" not in cost and "min-replicas 0" in cost, cost

    console.modal_answer = APP
    plan = await console.line(f"/gemma destroy {APP}")
    assert f"az containerapp delete --name {APP}" in plan, plan
    out = await console.line("click Destroy…")
    assert f"destroy `{APP}`: deleted" in out, out
    assert APP not in _standin(console).apps
    gone = await console.line(f"/gemma status {APP}")
    assert "does not exist" in gone, gone


async def test_azures_preflight_refuses_what_the_environment_cannot_run(console: ConsoleSession) -> None:
    standin = _standin(console)
    quota = load_aca_catalog().profile(A100).quota_usage
    assert quota is not None
    standin.set_usage(quota, 0)
    plan = await console.line(f"/gemma deploy {PROFILE}")
    assert f"✗ `{quota}` of `{ENVIRONMENT}`: 0 used of 0" in plan, plan
    assert "Portal" in plan or "support request" in plan, plan  # how to ask for more
    assert "click Confirm" not in plan.split("Preflight")[-1] or "Preflight failed" in plan, plan

    del standin.profiles[A100]  # the environment without the GPU profile
    plan = await console.line(f"/gemma deploy {PROFILE}")
    assert f"✗ environment `{ENVIRONMENT}` has no {A100} workload profile" in plan, plan
    assert "az containerapp env workload-profile add" in plan, plan
    assert APP not in standin.apps


async def test_flags_of_other_targets_are_refused_before_azure_is_asked(console: ConsoleSession) -> None:
    before = len(_standin(console).requests)
    out = await console.line(f"/gemma deploy {PROFILE} --zone us-east5-b")
    assert "Not settings of an Azure Container Apps deploy" in out and "--zone" in out, out
    assert len(_standin(console).requests) == before  # refused here, nothing sent to ARM


async def test_mcp_reaches_the_aca_app_through_the_registry(tmp_path: Path) -> None:
    async with stdio_session(tmp_path, _env()) as session:
        fit = await session.call_tool("fit", {"model": "gemma-4-e4b", "gpu": "t4"})
        assert not fit.is_error, _text(fit)
        assert fit.structured_content["aca_profile"] == "Consumption-GPU-NC8as-T4"
        status = await session.call_tool("status", {"service": APP})
        assert status.is_error and "does not exist" in _text(status), _text(status)  # asked Azure, not Cloud Run
        proposed = await session.call_tool("deploy", {"profile": PROFILE})
        assert not proposed.is_error, _text(proposed)
        assert "Azure Container Apps app" in _text(proposed), _text(proposed)


async def test_a_bot_whose_settings_leave_azure_out_says_what_to_set(settings) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from bot.wiring import build_deps, close_deps
    from skills.errors import InvalidInput

    deps = build_deps(settings.model_copy(update={"azure_subscription_id": ""}))
    try:
        with pytest.raises(InvalidInput) as refused:
            deps.targets.for_kind("azure-container-apps")
        assert "not set up" in refused.value.message
        assert "AZURE_SUBSCRIPTION_ID" in (refused.value.hint or ""), refused.value.hint
    finally:
        await close_deps(deps)

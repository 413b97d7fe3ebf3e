"""ACA sandbox scenarios reach the bot as Azure Monitor alerts (issue 55): each scenario breaks the sandbox's Container
Apps app by hand (straight to the ARM stand-in), waits for the failure by the stand-in's rules, and POSTs the common
alert schema to the bot's `/alerts/azure`; the incident thread that opens leads its findings with the scenario's
diagnosis kind, read from the app's logs in the sandbox's Log Analytics through the ACA target. The sandbox's clock is
stopped: the test moves it (as the real clock would at SANDBOX_SPEED) while a scenario runs."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from bot.deps import Deps
from bot.sandbox.aca_scenarios import ACA_SCENARIOS, PROFILE_A100, SERVICE, T4, app_body, arm
from bot.sandbox.attach import attach_console, build_sandbox_deps
from bot.sandbox.clock import SandboxClock
from bot.sandbox.cloud import Sandbox
from bot.settings import load_settings
from bot.wiring import close_deps
from skills.targets.aca.target import KIND as ACA_KIND
from tests.conftest import REDIS_URL
from tests.deploy_helpers import RecordingResponder, command
from tests.eventually import eventually
from tests.test_canary import shown


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    sb = Sandbox(clock=SandboxClock(speed=0), image=load_settings().vllm_image).start()
    yield sb
    sb.close()


@pytest.fixture
async def wired(sandbox: Sandbox, key_prefix: str, redis_client: Any) -> AsyncIterator[tuple[Deps, RecordingResponder]]:
    base = load_settings(key_prefix=key_prefix, redis_url=REDIS_URL, deployer_user_ids="UDEPLOYER")
    deps = build_sandbox_deps(sandbox.configure(base), sandbox, None)
    responder = RecordingResponder()
    await attach_console(deps, responder)
    yield deps, responder
    await sandbox.aclose()
    await close_deps(deps)


async def fire(sandbox: Sandbox, name: str, step_s: float = 5.0) -> list[str]:
    """Run the scenario while the sandbox's clock moves `step_s` every 10 ms of real time; what it narrated."""
    said: list[str] = []

    async def say(text: str) -> None:
        said.append(text)

    task = asyncio.ensure_future(sandbox.fire(name, say))
    while not task.done():
        sandbox.clock.advance(step_s)
        await asyncio.sleep(0.01)
    await task
    return said


def thread_of(responder: RecordingResponder) -> str:
    """Everything the incident's header and thread replies showed (posts and their edits)."""
    return "\n".join(shown(r) for _, r, _ in responder.posts) + "\n" + "\n".join(shown(r) for _, r in responder.updates)


def leading_kind(text: str) -> str:
    findings = text[text.index("finding(s)") :] if "finding(s)" in text else ""
    first = re.search(r"`([a-z0-9_]+)`", findings)
    return first.group(1) if first else ""


@pytest.mark.parametrize("name", sorted(ACA_SCENARIOS))
async def test_each_aca_scenario_opens_an_incident_whose_findings_name_its_kind(
    name: str, sandbox: Sandbox, wired: tuple[Deps, RecordingResponder]
) -> None:
    deps, responder = wired
    assert deps.targets.for_service(SERVICE).kind == ACA_KIND  # the app's logs are read through the ACA target
    said = await fire(sandbox, name)
    text = thread_of(responder)
    assert "FIRING" in text and SERVICE in text, f"{name}: no incident thread\n{said}\n{text}"
    assert "not a service this bot manages" not in text
    scenario = ACA_SCENARIOS[name]
    assert scenario.alert in text, text
    assert leading_kind(text) == scenario.kind, f"{name}: findings do not lead with {scenario.kind}\n{said}\n{text}"
    if name != "aca-quota-zero":  # the hand deploy's revision is what changed (ARM refused the quota one: none)
        assert "outside the bot" in text and "likely cause" in text, text


async def test_a_fixed_revision_resolves_the_incident_through_azure_monitors_resolved(
    sandbox: Sandbox, wired: tuple[Deps, RecordingResponder]
) -> None:
    _, responder = wired
    await fire(sandbox, "aca-bf16-on-t4")
    assert not any("RESOLVED" in r.title for _, r in responder.updates)
    # The teammate fixes it by hand: the same app with --dtype half, a new revision that provisions and serves.
    body = app_body(sandbox.azure, profile=T4, model="gemma-4-e4b")
    body["properties"]["template"]["containers"][0]["args"] += ["--dtype", "half"]
    resp = await arm(sandbox.azure, "PUT", body=body)
    assert resp.status_code == 200, resp.text

    def resolved() -> bool:
        sandbox.clock.advance(5.0)
        return any(r.title.startswith(":white_check_mark: RESOLVED: vllm-replica-errors") for _, r in responder.updates)

    assert await eventually(resolved, timeout=30.0)
    assert sandbox.azure_open == {}  # the sandbox's Azure Monitor sent the Resolved of its one open alert


async def test_with_the_quota_at_zero_the_bots_own_plan_is_refused_too(
    sandbox: Sandbox, wired: tuple[Deps, RecordingResponder]
) -> None:
    deps, _ = wired
    said = await fire(sandbox, "aca-quota-zero")
    assert "refused at plan time" in said[0]  # what the scenario tells the user, checked here
    reply, responder = await command(deps, f"deploy {PROFILE_A100}")
    text = "\n".join(shown(r) for r in [*([reply] if reply else []), *responder.replies])
    assert "ManagedEnvironmentConsumptionNCA100Gpus` of `gemma-env`: 0 used of 0" in text, text


def test_the_scenario_list_names_each_aca_scenario_and_the_alert_it_sends(sandbox: Sandbox) -> None:
    listed = {s.name: s for s in sandbox.scenario_list()}
    for name, scenario in ACA_SCENARIOS.items():
        assert listed[name].alert == scenario.alert and listed[name].kind == scenario.kind


async def test_a_hand_deploy_arm_refuses_leaves_no_failure_seeded_for_the_next_deploy(
    sandbox: Sandbox, wired: tuple[Deps, RecordingResponder]
) -> None:
    await fire(sandbox, "aca-quota-zero")
    for name in ("aca-image-pull", "aca-bf16-on-t4"):  # both need a GPU: ARM refuses them at 0
        said = await fire(sandbox, name)
        assert "ARM refused" in said[-1] and "QuotaExceeded" in said[-1], said
    assert sandbox.azure.replicas.fail_next_start == ""
    assert sandbox.azure.standin._fail_next == []


async def test_two_failures_in_a_row_each_get_the_diagnosis_of_their_own_revision(
    sandbox: Sandbox, wired: tuple[Deps, RecordingResponder]
) -> None:
    _, responder = wired
    await fire(sandbox, "aca-bf16-on-t4")
    first = len(responder.posts)
    await fire(sandbox, "aca-probe-timeout")  # the bf16 revision's lines are still in the alert's window
    second = "\n".join(shown(r) for _, r, _ in responder.posts[first:])
    assert "FIRING: aca-system-errors" in second, second
    assert leading_kind(second) == "startup_probe_timeout", second
    assert "bf16_unsupported" not in second, second

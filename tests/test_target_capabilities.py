"""Commands adapt to the serving target's capabilities (skills/targets/port.py): beside the Cloud Run service, a
service on a second target without revisions, traffic split or scale to zero (tests/fake_target.py), driven
through the same commands and buttons as a user would."""

from __future__ import annotations

from typing import Any

import pytest

from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.model_server import ModelServerStandIn
from handlers.reply import CONFIRM_ACTION
from skills.errors import InvalidInput
from skills.serving.profiles import DEFAULT_TARGET, load_profiles
from skills.targets.registry import Targets
from tests.deploy_helpers import click, command, plan_id_of
from tests.fake_target import KIND, NoRevisionsTarget

pytest_plugins = ["tests.deploy_fixtures"]

SERVICE = "tpu-svc"


@pytest.fixture
def fake(deps: Any, model_server: ModelServerStandIn) -> NoRevisionsTarget:
    """The fake target wired beside Cloud Run, serving `tpu-svc` (the way bot/wiring.py would wire another)."""
    target = NoRevisionsTarget(endpoint=model_server.base_url)  # type: ignore[attr-defined]
    target.seed(SERVICE, min_nodes=1, max_nodes=1)
    deps.extra_targets[KIND] = target
    deps.service_targets[SERVICE] = KIND
    return target


def _text(reply: Any) -> str:
    return "\n".join([reply.title, *(s.text or "" for s in reply.sections), *(s.code or "" for s in reply.sections)])


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (f"rollback --service {SERVICE}", "which has no revisions"),
        (f"rollback some-revision --service {SERVICE}", "which has no revisions"),
        (f"revisions {SERVICE}", "which has no revisions"),
        (f"logs {SERVICE} --revision r-1", "which has no revisions"),
        (f"diagnose {SERVICE} --revision r-1", "which has no revisions"),
        (f"scale 0 2 --service {SERVICE}", "which cannot scale to zero"),
        (f"deploy gemma4-12b-qat-l4 --canary 10 --service {SERVICE}", "which cannot split traffic"),
    ],
)
async def test_a_command_the_target_cannot_do_says_so_and_asks_nothing(
    deps: Any, fake: NoRevisionsTarget, cloud_run: CloudRunStandIn, text: str, says: str
) -> None:
    reply, _ = await command(deps, text)
    assert reply is not None
    assert reply.title.startswith(":warning:") and f"`{SERVICE}` runs on Fake Queued VMs, {says}" in reply.title
    assert not any(b.action_id == CONFIRM_ACTION for b in reply.buttons), "no plan to confirm"
    assert fake.calls == [], "refused before anything was asked of the target"
    assert cloud_run.requests == [], "nor of Cloud Run"


async def test_a_profile_for_another_target_is_refused_on_the_service(
    deps: Any, fake: NoRevisionsTarget, cloud_run: CloudRunStandIn
) -> None:
    reply, _ = await command(deps, f"deploy gemma4-12b-qat-l4 --service {SERVICE}")
    assert reply is not None
    assert reply.title == (
        f":warning: Profile `gemma4-12b-qat-l4` deploys to `cloud-run`, not to Fake Queued VMs (`{SERVICE}`)."
    ), reply.title
    assert fake.calls == [] and cloud_run.requests == []


async def test_a_resize_on_the_target_is_its_plan_and_shows_its_queued_phases(
    deps: Any, fake: NoRevisionsTarget, cloud_run: CloudRunStandIn
) -> None:
    reply, _ = await command(deps, f"scale 1 2 --service {SERVICE}")
    assert reply is not None and not reply.title.startswith(":warning:"), reply.title
    shown = _text(reply)
    assert "nodes.max: 1 -> 2" in shown and "fakectl resize tpu-svc --min 1 --max 2" in shown
    assert "fakectl equivalent" in [s.heading for s in reply.sections]
    result, progress = await click(deps, CONFIRM_ACTION, plan_id_of(reply))
    assert result is None
    titles = progress.titles()
    phases = [t for t in titles if ": QUEUED" in t or ": PROVISIONING" in t]
    assert phases and ": QUEUED" in phases[0] and ": PROVISIONING" in phases[-1], titles
    assert titles[-1].startswith(f":white_check_mark: scale `{SERVICE}`: ready ("), titles
    assert f"`{SERVICE}` is ready at {fake.endpoint}" in _text(progress.updates[-1][1])
    assert fake.specs[SERVICE]["nodes"] == {"min": 1, "max": 2}
    assert not any(c.startswith(("list_revisions", "get_revision")) for c in fake.calls)
    assert [r for r in cloud_run.requests if r[0] != "GET"] == [], "Cloud Run is not touched"


async def test_status_of_the_target_shows_its_endpoint_and_no_revisions(
    deps: Any, fake: NoRevisionsTarget, model_server: ModelServerStandIn
) -> None:
    reply, _ = await command(deps, f"status {SERVICE} --fresh")
    assert reply is not None and reply.title == f":large_green_circle: {SERVICE}: ready", reply.title
    fields = [f for s in reply.sections for f in s.fields or []]
    assert ("URL", model_server.base_url) in fields  # type: ignore[attr-defined]
    assert "Revisions" not in [name for name, _ in fields]


async def test_the_cloud_run_service_keeps_its_revisions_beside_the_fake(
    deps: Any, fake: NoRevisionsTarget, cloud_run: CloudRunStandIn
) -> None:
    cloud_run.seed_service("vllm-gemma4")
    reply, _ = await command(deps, "revisions")
    assert reply is not None and reply.title == ":card_index: Revisions of `vllm-gemma4`", reply.title
    status, _ = await command(deps, "status --fresh")
    assert status is not None
    assert "Revisions" in [name for s in status.sections for name, _ in s.fields or []]
    assert fake.calls == []


def test_profiles_name_their_target_cloud_run_when_unstated() -> None:
    profiles = load_profiles()
    # GPU profiles state no target: Cloud Run; the Cloud TPU profiles (issue 37) and the Azure Container Apps ones
    # (issue 54, with their workload profile) name theirs.
    plain = [p for p in profiles.values() if p.tpu is None and p.aca_profile is None]
    assert profiles and {p.target for p in plain} == {DEFAULT_TARGET} == {"cloud-run"}
    assert {p.target for p in profiles.values() if p.aca_profile is not None} == {"azure-container-apps"}
    assert {p.target for p in profiles.values() if p.tpu is not None} == {"cloud-tpu"}


def test_the_registry_refuses_an_unwired_target() -> None:
    fake = NoRevisionsTarget(endpoint="http://127.0.0.1:1")
    with pytest.raises(ValueError, match="not wired: tpu"):
        Targets(by_kind={KIND: fake}, default_kind=KIND, services={"a": "tpu"})
    targets = Targets(by_kind={KIND: fake}, default_kind=KIND)
    with pytest.raises(InvalidInput, match="No serving target `tpu`"):
        targets.for_kind("tpu")
    assert targets.for_service("anything") is fake

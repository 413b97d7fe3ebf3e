"""The gcloud equivalent of a plan changes what the plan changes (issue 48): read off the plan as posted, every
line of its change list is expressed by the commands it prints (args, probe, scaling, traffic, tags), so an
operator who runs them gets what the bot would do. After failed revisions and a rollback, a scale builds on the
serving revision (args, probe and traffic change too); a canary's promote and roll back remove its tags."""

from __future__ import annotations

from bot.deps import Deps
from bot.sandbox.cloud import Sandbox
from bot.sandbox.console_session import ConsoleSession
from handlers.render_text import to_text
from handlers.reply import CONFIRM_ACTION, PLAN_ACTION
from tests.deploy_helpers import click, command, plan_id_of
from tests.test_canary import button, canary_thread, deps, run_on_clock, sandbox, traffic
from tests.test_console_model import MODEL
from tests.test_truthful_writes import console

__all__ = ["console", "deps", "sandbox", "unexpressed"]  # fixtures, used by name; the oracle

# One oracle for the suite and the model-based bench: read off the plan's text, never the code that wrote it.
unexpressed = MODEL.unexpressed
_section = MODEL.section


async def test_a_scale_after_a_rollback_prints_the_commands_of_every_change(console: ConsoleSession) -> None:
    await console.line("/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384")
    await console.line("click Confirm")
    await console.line("/gemma sandbox kv-cache-too-small")  # a failed revision: the template is not what serves
    await console.line("/gemma rollback")
    await console.line("click Confirm")
    plan = await console.line("/gemma scale 0 2")
    assert "on the serving revision" in plan, plan
    assert unexpressed(plan) == [], plan
    assert "--to-latest" in _section(plan, "gcloud equivalent")  # traffic follows the new revision


async def test_a_canary_promote_and_roll_back_remove_its_tags(deps: Deps, sandbox: Sandbox) -> None:
    sandbox.fleet.arm("canary-holds")
    baseline = next(iter(traffic(sandbox)))
    _, proposal = await canary_thread(deps, sandbox)
    canary = next(r for r in traffic(sandbox) if r != baseline)
    for label, to in (("Promote", canary), ("Roll back", baseline)):
        plan, _ = await click(deps, PLAN_ACTION, button(proposal, label))
        assert plan is not None
        text = to_text(plan)
        assert unexpressed(text) == [], text
        gcloud = _section(text, "gcloud equivalent")
        assert f"--to-revisions={to}=100" in gcloud and "--remove-tags=canary,stable" in gcloud, gcloud


async def test_a_scale_after_a_promote_moves_traffic_to_the_scaled_revision(deps: Deps, sandbox: Sandbox) -> None:
    """Promote pins traffic to the canary revision; instance limits live in the revision, so a scale that left
    the pin would change nothing that serves: its plan moves traffic to the new revision, and says how."""
    sandbox.fleet.arm("canary-holds")
    baseline = next(iter(traffic(sandbox)))
    _, proposal = await canary_thread(deps, sandbox)
    canary = next(r for r in traffic(sandbox) if r != baseline)
    plan, _ = await click(deps, PLAN_ACTION, button(proposal, "Promote"))
    assert plan is not None
    await run_on_clock(sandbox, click(deps, CONFIRM_ACTION, plan_id_of(plan)))
    assert traffic(sandbox) == {canary: 100}
    scale, _ = await command(deps, "scale 0 2")
    text = to_text(scale)  # type: ignore[arg-type]
    assert f"~ traffic: {canary}=100% -> latest=100%" in text, text
    assert unexpressed(text) == [] and "--to-latest" in _section(text, "gcloud equivalent"), text


async def test_a_canary_after_a_rollback_deploys_without_traffic_then_splits(console: ConsoleSession) -> None:
    """After a rollback pins traffic, a canary's gcloud is the deploy (no traffic, tagged), then the split: the
    canary's flags belong to `gcloud run deploy`, never to another command of the plan."""
    await console.line("/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384")
    await console.line("click Confirm")
    await console.line("/gemma rollback")
    await console.line("click Confirm")
    plan = await console.line("/gemma deploy gemma4-12b-qat-l4 --max-model-len 8192 --canary 10")
    gcloud = _section(plan, "gcloud equivalent")
    deploy, _, split = gcloud.partition("gcloud run services update-traffic")
    assert "gcloud run deploy" in deploy and "--no-traffic --tag=canary --revision-suffix=" in deploy, gcloud
    assert "--no-traffic" not in split and "--to-revisions=" in split, gcloud
    assert unexpressed(plan) == [], plan


async def test_a_canary_of_another_profile_says_which_annotations_no_flag_sets(console: ConsoleSession) -> None:
    """A canary of another profile changes the bot's own annotations (model, profile): no gcloud flag sets them,
    so its gcloud says so, as every other plan's does (found by the console model's long run)."""
    plan = await console.line("/gemma deploy gemma4-26b-qat-l4 --canary 10")
    assert "annotations.gemma-sre/profile" in _section(plan, "Changes to the running service"), plan
    assert "no gcloud flag sets them" in _section(plan, "gcloud equivalent"), plan
    assert unexpressed(plan) == [], plan


async def test_a_scale_after_a_failed_hand_deploy_says_what_it_builds_on(console: ConsoleSession) -> None:
    """Traffic to LATEST serves the latest ready revision once the latest created one failed: a scale then builds
    on that one, and says so, rather than diffing against the failed template unsaid (found by the console model)."""
    await console.line("/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384")
    await console.line("click Confirm")
    await console.line("/gemma sandbox kv-cache-too-small")  # a failed revision: the template is not what serves
    serving = next(r for r, p in console.traffic().items() if p == 100)
    plan = await console.line("/gemma scale 0 2")
    assert f"serving revision `{serving}`" in plan, plan
    assert unexpressed(plan) == [], plan

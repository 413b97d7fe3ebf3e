"""One authorization rule for everything that writes, costs money or wakes the model (writes, bench, eval,
health's completion, and their cancels): the deployer check, Slack user group included; no deployers
configured means nobody, not everybody. Eval is planned, confirmed and serialised like bench."""

from __future__ import annotations

from typing import Any

from bot.sandbox.openai_script import OpenAIScript
from bot.sandbox.scripted_models import POLICIES
from bot.sandbox.slack_api import SlackStandIn
from bot.slack_app import make_web_client
from handlers.context import ActionContext, CommandContext
from handlers.registry import load_all
from handlers.reply import Reply
from handlers.router import run_action, run_command
from tests.observe_fixtures import RecordingResponder, deps_for, running_sim  # noqa: F401

pytest_plugins = ["tests.agent_fixtures"]
load_all()

GROUP = "S0DEPLOYERS"


def _cmd(deps: Any, user: str, name_args: list[str], responder: RecordingResponder | None = None) -> CommandContext:
    return CommandContext(
        deps=deps, responder=responder or RecordingResponder(), user_id=user, channel_id="C1", args=name_args
    )


def _act(deps: Any, user: str, button: Any, responder: RecordingResponder | None = None) -> ActionContext:
    return ActionContext(
        deps=deps,
        responder=responder or RecordingResponder(),
        user_id=user,
        channel_id="C1",
        action_id=button.action_id,
        value=button.value,
    )


def _button(reply: Reply | None, label: str) -> Any:
    assert reply is not None
    return next(b for b in reply.buttons if b.label == label)


BENCH = ["--concurrency", "1", "--context", "32", "--output", "8", "--requests", "2"]


async def test_bench_with_deployers_as_a_user_group_only(deps_for, slack: SlackStandIn) -> None:  # noqa: F811
    slack.usergroups[GROUP] = ["UGROUPED"]
    with running_sim(ttft_s=0.01) as (sim, url):
        deps = deps_for(url, deployer_user_ids="", deployer_usergroup_id=GROUP)
        deps.chat = make_web_client(deps.settings)
        plan = await run_command(_cmd(deps, "UGROUPED", BENCH), "bench")
        run = _button(plan, "Run benchmark")
        denied = await run_action(_act(deps, "UOUTSIDER", run))
        assert denied is not None and "not allowed" in denied.title.lower(), denied.title
        assert sim.state.requests == 0
        assert await run_action(_act(deps, "UGROUPED", run)) is None  # a group member may
        await deps.drain(timeout_s=60)
    assert sim.state.requests > 0


async def test_no_deployers_configured_lets_nobody_run_a_benchmark(deps_for) -> None:  # noqa: F811
    with running_sim(ttft_s=0.01) as (sim, url):
        deps = deps_for(url, deployer_user_ids="", deployer_usergroup_id="")
        plan = await run_command(_cmd(deps, "UANYONE", BENCH), "bench")
        denied = await run_action(_act(deps, "UANYONE", _button(plan, "Run benchmark")))
        assert denied is not None and "DEPLOYER_USER_IDS" in (denied.title + str(denied.sections))
        await deps.drain(timeout_s=10)
    assert sim.state.requests == 0


async def test_only_the_author_or_a_deployer_cancels_a_bench_plan(deps_for) -> None:  # noqa: F811
    with running_sim(ttft_s=0.01) as (_, url):
        deps = deps_for(url)  # deployer: UDEPLOYER
        plan = await run_command(_cmd(deps, "UDEPLOYER", BENCH), "bench")
        cancel = _button(plan, "Cancel")
        refused = await run_action(_act(deps, "UOTHER", cancel))
        assert refused is not None and "cancel" in refused.title.lower() and "nothing was run" not in refused.title
        # The plan is still there: its author can run it.
        assert await run_action(_act(deps, "UDEPLOYER", _button(plan, "Run benchmark"))) is None
        await deps.drain(timeout_s=60)


async def test_health_completion_needs_a_deployer(deps_for) -> None:  # noqa: F811
    with running_sim(ttft_s=0.01) as (sim, url):
        deps = deps_for(url)
        refused = await run_command(_cmd(deps, "UOTHER", []), "health")
        assert refused is not None and "not allowed" in refused.title.lower()
        assert sim.state.requests == 0  # no completion reached the model
        ok = await run_command(_cmd(deps, "UDEPLOYER", []), "health")
    assert ok is not None and "Deep health" in ok.title and sim.state.requests > 0


async def test_eval_is_planned_confirmed_by_a_deployer_and_serialised(make_deps: Any, script: OpenAIScript) -> None:
    script.otherwise = POLICIES["good"]
    deps = make_deps()  # deployer: UDEPLOYER
    responder = RecordingResponder()
    plan = await run_command(_cmd(deps, "UOTHER", ["example-healthy"], responder), "eval")
    assert plan is not None and responder.posts == {}, "eval ran without a confirmation"
    assert script.requests == []  # nothing reached the model yet
    run = _button(plan, "Run evaluation")
    denied = await run_action(_act(deps, "UOTHER", run, responder))
    assert denied is not None and "not allowed" in denied.title.lower()
    assert responder.posts == {} and script.requests == []
    cancel_by_other = await run_action(_act(deps, "UTHIRD", _button(plan, "Cancel"), responder))
    assert cancel_by_other is not None and "cancel" in cancel_by_other.title.lower()

    second = await run_command(_cmd(deps, "UDEPLOYER", ["example-healthy"], responder), "eval")
    assert await run_action(_act(deps, "UDEPLOYER", run, responder)) is None
    busy = await run_action(_act(deps, "UDEPLOYER", _button(second, "Run evaluation"), responder))
    assert busy is not None and "Another evaluation is running" in busy.title
    again = await run_action(_act(deps, "UDEPLOYER", run, responder))
    assert again is not None and "already used" in again.title  # a double click runs once
    await deps.drain(timeout_s=120)
    card = next(r for _, r in responder.threads if r.title.startswith(":bar_chart:"))
    assert "100%" in card.title


async def test_a_timed_query_needs_a_deployer(deps_for) -> None:  # noqa: F811
    """`/gemma query` sends a real completion too: the same rule as health's."""
    with running_sim(ttft_s=0.01) as (sim, url):
        deps = deps_for(url)
        refused = await run_command(_cmd(deps, "UOTHER", ["hello"]), "query")
        assert refused is not None and "not allowed" in refused.title.lower()
        assert sim.state.requests == 0
        ok = await run_command(_cmd(deps, "UDEPLOYER", ["hello"]), "query")
    assert ok is not None and "not allowed" not in ok.title.lower() and sim.state.requests > 0

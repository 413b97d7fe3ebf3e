"""/gemma analyze, /gemma ask and thread follow-ups, through the command router with a recording responder."""

from __future__ import annotations

import json
from typing import Any

from bot.sandbox.openai_script import TOOL_CHOICE_400, OpenAIScript, call, fail, say
from handlers.context import CommandContext
from handlers.conversation import on_thread_reply
from handlers.registry import load_all
from handlers.render_slack import to_blocks
from handlers.reply import PLAN_ACTION
from handlers.router import run_command
from tests.agent_helpers import RecordingResponder, plan_json

pytest_plugins = ["tests.agent_fixtures"]
load_all()


def ctx(deps: Any, responder: RecordingResponder, *args: str) -> CommandContext:
    return CommandContext(deps=deps, responder=responder, user_id="U123", channel_id="C1", args=list(args))


async def test_analyze_posts_a_plan_with_one_button_per_action(make_deps: Any, script: OpenAIScript) -> None:
    script.push(call("list_revisions"), say(plan_json()))
    deps = make_deps()
    responder = RecordingResponder()
    assert await run_command(ctx(deps, responder, "--since", "2h"), "analyze") is None
    (header, header_thread, ts), (plan, plan_thread, _) = responder.posts
    assert header_thread is None and "last 120 min" in header.title
    assert plan_thread == ts
    assert "remediation plan (high confidence)" in plan.title
    assert [json.loads(b.value) for b in plan.buttons if b.action_id == PLAN_ACTION] == [
        {"action": "redeploy", "params": {"kv_cache_dtype": "fp8", "max_model_len": 8192}}
    ]
    assert "list_revisions" in (plan.context or "")


async def test_analyze_rejects_bad_arguments_without_calling_the_model(make_deps: Any, script: OpenAIScript) -> None:
    deps = make_deps()
    responder = RecordingResponder()
    reply = await run_command(ctx(deps, responder, "--since", "forever"), "analyze")
    assert reply is not None and "Cannot read --since" in reply.title
    reply = await run_command(ctx(deps, responder, "--verbose"), "analyze")
    # Wording from the shared parser (was "Unexpected argument '--verbose'"), now with the command's usage.
    assert reply is not None and "Unknown option `--verbose`" in reply.title
    assert reply.sections[0].text == "Usage: `/gemma analyze [--since DURATION]`"
    assert script.chat_requests == [] and responder.posts == []


async def test_ask_answers_in_a_thread_and_follow_ups_continue_it(make_deps: Any, script: OpenAIScript) -> None:
    script.push(
        call("service_status"),
        say("The service is *ready*: min 0, max 1 instance. <!channel>", reasoning="hidden chain of thought"),
        say("Yes: it scales to zero, so expect a cold start of several minutes."),
    )
    deps = make_deps()
    responder = RecordingResponder()
    await run_command(ctx(deps, responder, "is", "the", "service", "up?"), "ask")
    (header, _, ts), (answer, thread, _) = responder.posts
    assert "asked: is the service up?" in header.title and thread == ts
    text = answer.sections[0].text or ""
    assert "The service is *ready*" in text
    slack_text = json.dumps(to_blocks(answer)[1])  # escaped once, at the Slack render boundary
    assert "<!channel>" not in slack_text and "&lt;!channel&gt;" in slack_text  # no pings from model output
    assert "hidden chain of thought" not in text

    await on_thread_reply(deps, responder, "C1", ts, "U123", "will it be slow to wake?")
    follow_up = script.chat_requests[-1]["messages"]
    roles = [m["role"] for m in follow_up]
    assert roles == ["system", "user", "assistant", "user"]  # history, without the tool traffic
    assert "is the service up?" in follow_up[1]["content"]
    assert follow_up[-1]["content"] == "will it be slow to wake?"
    assert responder.posts[-1][1] == ts and "cold start" in (responder.posts[-1][0].sections[0].text or "")
    # The history lives in Redis with a TTL.
    ttl = await deps.redis.ttl(deps.settings.key("conv", ts))
    assert 0 < ttl <= deps.settings.conversation_ttl_s


async def test_replies_in_other_threads_are_ignored(make_deps: Any, script: OpenAIScript) -> None:
    deps = make_deps()
    responder = RecordingResponder()
    await on_thread_reply(deps, responder, "C1", "1699999999.000100", "U123", "hello?")
    assert responder.posts == [] and script.chat_requests == []


async def test_ask_turns_a_change_tool_call_into_a_button_not_a_write(
    make_deps: Any, script: OpenAIScript, cloud_run: Any
) -> None:
    script.push(call("scale", {"min_instances": 1, "max_instances": 2, "reason": "avoid cold starts"}), say("Done."))
    deps = make_deps()
    responder = RecordingResponder()
    writes = [r for r in cloud_run.requests if r[0] != "GET"]
    await run_command(ctx(deps, responder, "keep", "one", "instance", "warm"), "ask")
    answer = responder.posts[-1][0]
    assert [json.loads(b.value) for b in answer.buttons] == [
        {"action": "scale", "params": {"max_instances": 2, "min_instances": 1}}
    ]
    assert [r for r in cloud_run.requests if r[0] != "GET"] == writes
    tool_result = next(m for m in script.chat_requests[1]["messages"] if m["role"] == "tool")
    assert "NOT executed" in tool_result["content"]


async def test_ask_when_tool_calling_is_disabled_says_which_flags(make_deps: Any, script: OpenAIScript) -> None:
    script.push(fail(400, TOOL_CHOICE_400))
    deps = make_deps()
    responder = RecordingResponder()
    await run_command(ctx(deps, responder, "why", "so", "slow?"), "ask")
    err = responder.posts[-1][0]
    assert "refused tool calling" in err.title
    assert "--enable-auto-tool-choice --tool-call-parser gemma4" in (err.sections[0].text or "")


async def test_ask_without_a_question_is_refused(make_deps: Any, script: OpenAIScript) -> None:
    deps = make_deps()
    responder = RecordingResponder()
    reply = await run_command(ctx(deps, responder), "ask")
    assert reply is not None and "Nothing to ask" in reply.title and responder.posts == []

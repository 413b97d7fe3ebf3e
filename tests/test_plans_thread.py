# ruff: noqa: F811  (the `slack` fixture imported from tests.alerts_fixtures is used by name)
"""Actions proposed in an incident thread run in that thread: plan, Confirm, progress and result.

All real: the ASGI app (bot/web.py) with Bolt checking signatures, the alert webhook -> Redis Stream ->
workers that open the incident thread, slack-sdk against the Slack stand-in, google-cloud-run against the
Cloud Run stand-in.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from bot.alert_queue import AlertQueue, build_alert_queue
from bot.deps import Deps
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.slack_api import Fault
from bot.sandbox.slack_signing import command_body, signed_headers
from bot.settings import Settings
from bot.web import create_app
from handlers.commands.plans import DESTROY_OPEN_ACTION, DESTROY_SUBMIT_ACTION
from handlers.reply import CANCEL_ACTION, CONFIRM_ACTION, PLAN_ACTION, Reply, plan_button
from skills.audit import latest
from skills.incidents.model import Alert, Incident
from tests.alerts_fixtures import (
    PostsSlack,
    basic,
    eventually,
    header_ts,
    make_deps,
    payload,
    slack,  # noqa: F401  (overrides conftest's: records accepted posts)
    thread_replies,
    tuned,
)
from tests.conftest import SIGNING_SECRET

SCALE = {"min_instances": 1, "max_instances": 3}


@dataclass
class Bot:
    client: httpx.AsyncClient
    queue: AlertQueue
    deps: Deps
    slack: PostsSlack


async def proposes(inc: Incident, alert: Alert) -> AsyncIterator[Reply]:
    """Stands in for the agent's plan: proposed actions as plan buttons, as skills/incidents/threads.py renders them."""
    reply = Reply(title=":brain: Plan (high confidence): scale out, or redeploy with a shorter context")
    reply.buttons.append(plan_button("scale", SCALE, "Plan scale"))
    reply.buttons.append(plan_button("deploy", {"profile": "gemma4-12b-qat-l4", "max_model_len": "8192"}))
    reply.buttons.append(plan_button("destroy", {}))
    yield reply


@pytest.fixture
async def bot(settings: Settings, redis_client: Any, slack: PostsSlack) -> AsyncIterator[Bot]:
    deps = make_deps(tuned(settings, deploy_poll_s=0.01))
    queue = build_alert_queue(deps, proposes, concurrency=1)
    app = create_app(deps)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test")
    await queue.start()
    yield Bot(client, queue, deps, slack)
    await queue.stop()
    await client.aclose()
    await deps.drain()
    await deps.redis.aclose()


def text_of(msg: dict[str, Any]) -> str:
    return msg.get("text", "") + json.dumps(msg.get("blocks", []))


def button_value(msg: dict[str, Any], action_id: str) -> str:
    for block in msg.get("blocks", []):
        for el in block.get("elements", []):
            if el.get("action_id") == action_id:
                return str(el["value"])
    raise AssertionError(f"no {action_id} button in {text_of(msg)[:300]}")


def plan_value(msg: dict[str, Any], kind: str) -> str:
    """The value of the plan button proposing `kind` (its label names it; the value is an id into Redis)."""
    for block in msg.get("blocks", []):
        for el in block.get("elements", []):
            if el.get("action_id") == PLAN_ACTION and kind in el["text"]["text"]:
                return str(el["value"])
    raise AssertionError(f"no plan button for {kind} in {text_of(msg)[:300]}")


def button_values(msg: dict[str, Any], action_id: str) -> list[str]:
    return [
        str(el["value"])
        for block in msg.get("blocks", [])
        for el in block.get("elements", [])
        if el.get("action_id") == action_id
    ]


def click_body(
    action_id: str,
    value: str,
    channel: str,
    message_ts: str,
    thread_ts: str | None,
    user: str,
    trigger: str,
    response_url: str,
) -> str:
    """A block_actions payload as Slack sends it for a button; message.thread_ts only inside a thread."""
    message: dict[str, Any] = {"ts": message_ts, "text": ""}
    if thread_ts:
        message["thread_ts"] = thread_ts
    payload_ = {
        "type": "block_actions",
        "team": {"id": "T0001"},
        "user": {"id": user},
        "api_app_id": "A1",
        "trigger_id": trigger,
        "channel": {"id": channel},
        "response_url": response_url,
        "message": message,
        "actions": [
            {"type": "button", "action_id": action_id, "value": value, "block_id": "b1", "action_ts": str(time.time())}
        ],
    }
    return urlencode({"payload": json.dumps(payload_)})


async def click(
    bot: Bot,
    action_id: str,
    value: str,
    message_ts: str,
    thread_ts: str | None,
    trigger: str,
    user: str = "UDEPLOYER",
    channel: str | None = None,
) -> None:
    body = click_body(
        action_id,
        value,
        channel or bot.slack.channel_id("#gemma-alerts"),
        message_ts,
        thread_ts,
        user,
        trigger,
        bot.slack.response_url(trigger),
    )
    resp = await bot.client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
    assert resp.status_code == 200, resp.text


async def incident_with_plan(bot: Bot) -> tuple[str, dict[str, Any]]:
    """Fire an alert; return the incident thread's ts and the thread message carrying the plan buttons."""
    resp = await bot.client.post("/alerts/gcp", json=payload("gcp-monitoring-open.json"), headers=basic())
    assert resp.status_code == 202
    proposal = await eventually(lambda: [m for m in bot.slack.posted if "Plan (high confidence)" in text_of(m)])
    assert proposal, "the incident thread never got its proposed actions"
    thread = header_ts(bot.slack)
    assert proposal[0]["thread_ts"] == thread
    return thread, proposal[0]


def in_thread(bot: Bot, thread: str, needle: str) -> list[dict[str, Any]]:
    return [m for m in thread_replies(bot.slack, thread) if needle in text_of(m)]


def updates_of(bot: Bot, ts: str) -> list[dict[str, Any]]:
    return [u for u in bot.slack.of("chat.update") if u.get("ts") == ts]


async def test_action_clicked_in_incident_thread_plans_confirms_and_reports_in_that_thread(
    bot: Bot, cloud_run: CloudRunStandIn
) -> None:
    cloud_run.seed_service("vllm-gemma4", ready=True, min_instances=0, max_instances=1)
    thread, proposal = await incident_with_plan(bot)
    scale_value = plan_value(proposal, "scale")

    await click(bot, PLAN_ACTION, scale_value, proposal["ts"], thread, "trig-plan")
    [plan_msg] = await eventually(lambda: in_thread(bot, thread, ":clipboard: Plan: "))
    assert plan_msg["thread_ts"] == thread  # the plan is a reply in the incident thread
    assert plan_msg["channel"] == bot.slack.channel_id("#gemma-alerts")
    assert not bot.slack.responses, "the plan went to the response URL instead of the thread"
    plan_id = button_value(plan_msg, CONFIRM_ACTION)
    assert not [r for r in cloud_run.requests if r[0] != "GET"], "planning must not write"

    # Confirm on the plan message (itself a thread reply, so Slack sends message.thread_ts = the thread)
    await click(bot, CONFIRM_ACTION, plan_id, plan_msg["ts"], thread, "trig-confirm")
    [done_line] = await eventually(lambda: in_thread(bot, thread, "Action done: scale"))
    assert "confirmed by <@UDEPLOYER>" in text_of(done_line)
    [progress] = in_thread(bot, thread, "submitted")
    assert progress["thread_ts"] == thread
    final = updates_of(bot, progress["ts"])[-1]
    assert ":white_check_mark:" in final["text"] and "ready" in final["text"], final["text"]
    # the spent plan lost its buttons, in place
    spent = updates_of(bot, plan_msg["ts"])[-1]
    assert "confirmed by <@UDEPLOYER>" in text_of(spent) and CONFIRM_ACTION not in text_of(spent)
    # nothing of it went to the channel's top level: the only top-level message is the incident header
    assert [m["ts"] for m in bot.slack.posted if not m.get("thread_ts")] == [thread]
    scaling = cloud_run.services["vllm-gemma4"]["template"]["scaling"]
    assert (scaling["minInstanceCount"], scaling["maxInstanceCount"]) == (1, 3)
    [entry] = await latest(bot.deps.redis, bot.deps.settings.key("audit"))
    assert (entry.action, entry.result, entry.user_id) == ("scale", "ok", "UDEPLOYER")


async def test_failed_action_reports_its_reason_in_the_incident_thread(bot: Bot, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service("vllm-gemma4")
    cloud_run.next_revision_outcome = "probe_failed"
    thread, proposal = await incident_with_plan(bot)
    deploy_value = plan_value(proposal, "deploy")
    await click(bot, PLAN_ACTION, deploy_value, proposal["ts"], thread, "trig-plan-d")
    [plan_msg] = await eventually(lambda: in_thread(bot, thread, ":clipboard: Plan: "))
    # a click by someone without the deployer role is refused (to them only) and changes nothing
    await click(bot, CONFIRM_ACTION, button_value(plan_msg, CONFIRM_ACTION), plan_msg["ts"], thread, "t-x", "UOTHER")
    [refusal] = await eventually(lambda: bot.slack.responses)
    assert "not allowed" in refusal["text"] and refusal["response_type"] == "ephemeral"
    assert not in_thread(bot, thread, "submitted")

    await click(bot, CONFIRM_ACTION, button_value(plan_msg, CONFIRM_ACTION), plan_msg["ts"], thread, "t-ok")
    [failed_line] = await eventually(lambda: in_thread(bot, thread, "Action failed: deploy"))
    assert "startup probe" in text_of(failed_line), text_of(failed_line)
    [progress] = in_thread(bot, thread, "submitted")
    final = updates_of(bot, progress["ts"])[-1]
    assert final["text"].startswith(":x:") and "HEALTH_CHECK_CONTAINER_ERROR" in text_of(final)


async def test_destroy_confirmed_in_the_modal_reports_in_the_thread_it_was_asked_from(
    bot: Bot, cloud_run: CloudRunStandIn
) -> None:
    cloud_run.seed_service("vllm-gemma4")
    thread, proposal = await incident_with_plan(bot)
    destroy_value = plan_value(proposal, "destroy")
    await click(bot, PLAN_ACTION, destroy_value, proposal["ts"], thread, "trig-plan-x")
    [plan_msg] = await eventually(lambda: in_thread(bot, thread, ":clipboard: Plan: "))
    await click(bot, DESTROY_OPEN_ACTION, button_value(plan_msg, DESTROY_OPEN_ACTION), plan_msg["ts"], thread, "t-o")
    [opened] = await eventually(lambda: bot.slack.of("views.open"))
    view = opened["view"]
    # the modal's submission carries no message or thread, only the private_metadata we put in the view
    submission = {
        "type": "view_submission",
        "team": {"id": "T0001"},
        "user": {"id": "UDEPLOYER"},
        "api_app_id": "A1",
        "trigger_id": "trig-submit",
        "view": {
            "id": "V0001",
            "type": "modal",
            "callback_id": DESTROY_SUBMIT_ACTION,
            "private_metadata": view["private_metadata"],
            "state": {"values": {"service_name": {"value": {"type": "plain_text_input", "value": "vllm-gemma4"}}}},
        },
    }
    body = urlencode({"payload": json.dumps(submission)})
    resp = await bot.client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
    assert resp.status_code == 200
    [done_line] = await eventually(lambda: in_thread(bot, thread, "Action done: destroy"))
    assert done_line["thread_ts"] == thread
    [progress] = in_thread(bot, thread, "submitted")
    assert "deleted" in updates_of(bot, progress["ts"])[-1]["text"]
    assert "vllm-gemma4" not in cloud_run.services
    assert "confirmed by" in text_of(updates_of(bot, plan_msg["ts"])[-1])  # the plan message, edited in place


async def test_slash_command_plan_still_answers_the_command_and_confirms_in_its_own_thread(
    bot: Bot, cloud_run: CloudRunStandIn
) -> None:
    cloud_run.seed_service("vllm-gemma4")
    body = command_body("scale 1 2", bot.slack.response_url("cmd"), trigger_id="trig-cmd", user_id="UDEPLOYER")
    resp = await bot.client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
    assert resp.status_code == 200
    [answer] = await eventually(lambda: bot.slack.responses)
    assert answer["_rid"] == "cmd" and "Plan: " in text_of(answer)
    assert not bot.slack.posted  # the plan is the command's answer, not a channel post
    plan_id = button_value(answer, CONFIRM_ACTION)
    # Slack gives the response-URL message a ts; it is top level (no thread_ts)
    await click(bot, CONFIRM_ACTION, plan_id, "1700009999.000100", None, "trig-c-ok", channel="C1")
    [progress] = await eventually(lambda: [m for m in bot.slack.posted if "submitted" in text_of(m)])
    assert progress["thread_ts"] == "1700009999.000100"  # a thread under the plan message, as before
    assert await eventually(
        lambda: ":white_check_mark:" in (updates_of(bot, progress["ts"]) or [{}])[-1].get("text", "")
    ), "the success update never came"
    assert not [m for m in bot.slack.posted if "Action done" in text_of(m)]  # not an incident: no extra line
    # a second click on the spent plan's Cancel is answered, not run
    await click(bot, CANCEL_ACTION, plan_id, "1700009999.000100", None, "trig-c-cancel", channel="C1")
    assert await eventually(lambda: len(bot.slack.responses) == 2)
    assert "no longer pending" in bot.slack.responses[-1]["text"]


async def test_confirm_whose_progress_cannot_be_posted_runs_nothing_and_can_be_retried(
    bot: Bot, cloud_run: CloudRunStandIn
) -> None:
    cloud_run.seed_service("vllm-gemma4", min_instances=0, max_instances=1)
    thread, proposal = await incident_with_plan(bot)
    scale_value = plan_value(proposal, "scale")
    await click(bot, PLAN_ACTION, scale_value, proposal["ts"], thread, "trig-plan-f")
    [plan_msg] = await eventually(lambda: in_thread(bot, thread, ":clipboard: Plan: "))
    plan_id = button_value(plan_msg, CONFIRM_ACTION)
    bot.slack.inject("chat.postMessage", Fault(status=200, error="not_in_channel"))
    await click(bot, CONFIRM_ACTION, plan_id, plan_msg["ts"], thread, "trig-c-fail")
    [failed] = await eventually(lambda: bot.slack.responses)
    assert "failed (error id" in failed["text"] and failed["response_type"] == "ephemeral"
    shown = failed["text"] + str(failed.get("blocks"))
    assert "Slack refused the call (not_in_channel)" in shown and "/invite @gemma-sre" in shown
    assert not [r for r in cloud_run.requests if r[0] != "GET"], "nothing may run when its progress has nowhere to go"
    assert not await bot.deps.redis.exists(bot.deps.settings.key("lock", "service", "vllm-gemma4"))
    # the same plan can be confirmed again once Slack takes the post
    await click(bot, CONFIRM_ACTION, plan_id, plan_msg["ts"], thread, "trig-c-retry")
    assert await eventually(lambda: in_thread(bot, thread, "Action done: scale"))
    scaling = cloud_run.services["vllm-gemma4"]["template"]["scaling"]
    assert (scaling["minInstanceCount"], scaling["maxInstanceCount"]) == (1, 3)

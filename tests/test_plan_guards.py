# ruff: noqa: F811  (the `slack` and `bot` fixtures are imported and used by name)
"""Small holes, closed, through HTTP: Cancel only by the plan's author or a deployer; a plan is bound to the
channel and thread it was made in; service names are checked before any Cloud Run call; refusals go only to
the person who clicked (ephemeral responses, inline modal errors), never to the channel."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.slack_signing import command_body, signed_headers
from handlers.commands.plans import DESTROY_SUBMIT_ACTION
from handlers.reply import CANCEL_ACTION, CONFIRM_ACTION, PLAN_ACTION
from skills.audit import latest
from tests.alerts_fixtures import eventually, slack  # noqa: F401
from tests.conftest import SIGNING_SECRET
from tests.test_plans_thread import (  # noqa: F401
    Bot,
    bot,
    button_value,
    click,
    in_thread,
    incident_with_plan,
    plan_value,
    text_of,
)

PLAN_TS = "1700009999.000100"  # the ts Slack gives the response-URL message carrying the plan


def _id(answer: dict[str, Any]) -> str:
    for block in answer.get("blocks", []):
        for el in block.get("elements", []):
            if el.get("action_id") == CONFIRM_ACTION:
                return str(el["value"])
    raise AssertionError("no Confirm button")


def _not_in_channel(bot: Bot, needle: str) -> bool:
    return not [m for m in bot.slack.posted if needle in text_of(m)]


async def test_cancel_is_for_the_author_and_deployers_only(bot: Bot, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service("vllm-gemma4")
    plan_id = _id((await _scale(bot))[0])
    await click(bot, CANCEL_ACTION, plan_id, PLAN_TS, None, "t-x1", user="UBYSTANDER", channel="C1")
    [refusal] = await eventually(lambda: [r for r in bot.slack.responses if r["_rid"] == "t-x1"])
    assert refusal["response_type"] == "ephemeral" and "Only <@UAUTHOR>" in refusal["text"]
    assert _not_in_channel(bot, "Only <@UAUTHOR>")
    assert await bot.deps.redis.exists(bot.deps.settings.key("plan", plan_id)), "a refused cancel changed something"
    audit = await latest(bot.deps.redis, bot.deps.settings.key("audit"))
    assert audit[0].result == "refused" and audit[0].user_id == "UBYSTANDER"
    # the author can
    await click(bot, CANCEL_ACTION, plan_id, PLAN_TS, None, "t-x2", user="UAUTHOR", channel="C1")
    [done] = await eventually(lambda: [r for r in bot.slack.responses if r["_rid"] == "t-x2"])
    assert "Cancelled plan" in done["text"]
    assert not await bot.deps.redis.exists(bot.deps.settings.key("plan", plan_id))


async def test_a_deployer_may_cancel_someone_elses_plan(bot: Bot, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service("vllm-gemma4")
    plan_id = _id((await _scale(bot))[0])
    await click(bot, CANCEL_ACTION, plan_id, PLAN_TS, None, "t-d1", user="UDEPLOYER", channel="C1")
    [done] = await eventually(lambda: [r for r in bot.slack.responses if r["_rid"] == "t-d1"])
    assert "Cancelled plan" in done["text"]


async def test_confirm_from_another_channel_or_thread_is_refused(bot: Bot, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service("vllm-gemma4", min_instances=0, max_instances=1)
    plan_id = _id((await _scale(bot))[0])
    await click(bot, CONFIRM_ACTION, plan_id, "1700000555.000100", None, "t-c1", channel="COTHER")
    await click(bot, CONFIRM_ACTION, plan_id, "1700000556.000100", "1700000001.000100", "t-c2", channel="C1")

    def refusals() -> list[dict[str, Any]]:
        return [r for r in bot.slack.responses if r["_rid"] in ("t-c1", "t-c2")]

    assert await eventually(lambda: len(refusals()) == 2), refusals()
    assert {r["response_type"] for r in refusals()} == {"ephemeral"}
    texts = " ".join(r["text"] for r in refusals())
    assert "another channel" in texts and "another thread" in texts
    assert not [r for r in cloud_run.requests if r[0] != "GET"], "a misplaced confirm wrote"
    # the plan is still pending and its own button works
    await click(bot, CONFIRM_ACTION, plan_id, PLAN_TS, None, "t-c3", channel="C1")
    assert await eventually(lambda: [r for r in cloud_run.requests if r[0] == "PATCH"])


async def test_a_plan_made_in_a_thread_is_refused_from_the_channels_top_level(
    bot: Bot, cloud_run: CloudRunStandIn
) -> None:
    cloud_run.seed_service("vllm-gemma4", min_instances=0, max_instances=1)
    thread, proposal = await incident_with_plan(bot)
    await click(bot, PLAN_ACTION, plan_value(proposal, "scale"), proposal["ts"], thread, "t-p")
    [plan_msg] = await eventually(lambda: in_thread(bot, thread, ":clipboard: Plan: "))
    plan_id = button_value(plan_msg, CONFIRM_ACTION)
    # the same channel, but a click from its top level (no message.thread_ts): a copied button or forged payload
    await click(bot, CONFIRM_ACTION, plan_id, "1700000777.000100", None, "t-top")
    await click(bot, CANCEL_ACTION, plan_id, "1700000778.000100", None, "t-top-cancel")
    [confirm_refused] = await eventually(lambda: [r for r in bot.slack.responses if r["_rid"] == "t-top"])
    [cancel_refused] = await eventually(lambda: [r for r in bot.slack.responses if r["_rid"] == "t-top-cancel"])
    for refusal in (confirm_refused, cancel_refused):
        assert refusal["response_type"] == "ephemeral" and "another thread" in refusal["text"], refusal
    assert not [r for r in cloud_run.requests if r[0] != "GET"], "a confirm from the top level wrote"
    assert await bot.deps.redis.exists(bot.deps.settings.key("plan", plan_id)), "a refused click consumed the plan"
    # from its own thread it still works
    await click(bot, CONFIRM_ACTION, plan_id, plan_msg["ts"], thread, "t-in-thread")
    assert await eventually(lambda: in_thread(bot, thread, "Action done: scale"))


async def _scale(bot: Bot) -> list[dict[str, Any]]:
    body = command_body("scale 1 2", bot.slack.response_url("cmd"), trigger_id="t-cmd", user_id="UAUTHOR")
    resp = await bot.client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
    assert resp.status_code == 200
    return list(await eventually(lambda: [r for r in bot.slack.responses if r["_rid"] == "cmd"]))


async def test_bad_service_names_are_clear_errors_before_any_cloud_call(bot: Bot, cloud_run: CloudRunStandIn) -> None:
    for i, text in enumerate(
        ["status ../x", "scale 1 2 --service ../x", "destroy Bad_Name", "cost -x-", "revisions a-"]
    ):
        body = command_body(text, bot.slack.response_url(f"n{i}"), trigger_id=f"t-n{i}", user_id="UDEPLOYER")
        await bot.client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
    answers = await eventually(lambda: len(bot.slack.responses) >= 5 and bot.slack.responses, timeout=15)
    for a in answers:
        if "-x-" in a["text"]:  # a leading dash makes it an option to the command's parser (wording changed)
            assert "Unknown option `-x-`" in a["text"] and "Usage: `/gemma cost [SERVICE]`" in json.dumps(a), a
        else:
            assert "is not a Cloud Run service name" in a["text"], a["text"]
    assert cloud_run.requests == [], "a bad name reached Cloud Run"


def _submission(view_meta: str, typed: str | None, user: str) -> str:
    return urlencode(
        {
            "payload": json.dumps(
                {
                    "type": "view_submission",
                    "team": {"id": "T0001"},
                    "user": {"id": user},
                    "api_app_id": "A1",
                    "trigger_id": f"trig-{user}-{typed}",
                    "view": {
                        "id": "V0001",
                        "type": "modal",
                        "callback_id": DESTROY_SUBMIT_ACTION,
                        "private_metadata": view_meta,
                        "state": {"values": {"service_name": {"value": {"type": "plain_text_input", "value": typed}}}},
                    },
                }
            )
        }
    )


async def test_destroy_modal_refusals_are_inline_and_never_in_the_channel(bot: Bot, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service("vllm-gemma4")
    body = command_body("destroy", bot.slack.response_url("cmd"), trigger_id="t-dx", user_id="UDEPLOYER")
    await bot.client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
    [answer] = await eventually(lambda: [r for r in bot.slack.responses if r["_rid"] == "cmd"])
    plan_id = next(
        el["value"]
        for b in answer.get("blocks", [])
        for el in b.get("elements", [])
        if "destroy_open" in el["action_id"]
    )
    meta = json.dumps({"plan_id": plan_id, "channel_id": "C1", "thread_ts": ""})
    # an empty field comes as "" or, as Slack sends an input left blank, null; a name is never guessed
    refused = [("vllm-gemma", "UDEPLOYER", "does not match"), ("vllm-gemma4", "UNOBODY", "not allowed")]
    refused += [("", "UDEPLOYER", "does not match"), ("  ", "UDEPLOYER", "does not match")]
    refused += [(None, "UDEPLOYER", "does not match")]
    for typed, user, why in refused:
        body = _submission(meta, typed, user)
        resp = await bot.client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
        assert resp.status_code == 200
        data = resp.json()
        assert data["response_action"] == "errors" and why in data["errors"]["service_name"], data
    await bot.deps.drain()
    assert "vllm-gemma4" in cloud_run.services
    assert _not_in_channel(bot, "does not match") and _not_in_channel(bot, "not allowed")
    assert not bot.slack.of("chat.postMessage") or all(
        "not allowed" not in text_of(m) for m in bot.slack.of("chat.postMessage")
    )
    # the right name from a deployer goes through
    body = _submission(meta, "vllm-gemma4", "UDEPLOYER")
    resp = await bot.client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
    assert resp.status_code == 200 and not resp.content
    assert await eventually(lambda: "vllm-gemma4" not in cloud_run.services, timeout=15)

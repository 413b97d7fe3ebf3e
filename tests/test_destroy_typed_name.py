# ruff: noqa: F811  (the `slack` and `bot` fixtures are imported and used by name)
"""A destroy runs only when the service's name was typed: no name at all (the form's field missing), an empty one
or blanks are refused like a wrong one, by the skill itself, whatever the surface in front of it checked (issue
44: the surfaces' own checks masked this one, and a precheck that let a missing name through went unnoticed).

The surfaces never hand the skill a missing name: the modal's submission reads a missing or null field as ""
(handlers/commands/plans.py, bot/slack_app.py `_form_values`), the plain Confirm button refuses a destroy plan
before it reaches the check (`on_confirm`), and MCP never asks its client about a destroy. So the first test
drives the real Slack surface, and the second asks the skill's own check directly with no name at all."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest

from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.slack_signing import command_body, signed_headers
from handlers.commands.plans import DESTROY_OPEN_ACTION, DESTROY_SUBMIT_ACTION
from handlers.reply import CONFIRM_ACTION
from skills.deploy.confirm import Refused, claim, precheck
from tests.alerts_fixtures import eventually, slack  # noqa: F401
from tests.conftest import SIGNING_SECRET
from tests.test_plans_thread import Bot, bot, button_value, click, text_of  # noqa: F401
from tests.test_write_gate import _gate, _plan

pytest_plugins = ["tests.deploy_fixtures"]

PLAN_TS = "1700009999.000100"  # the ts Slack gives the response-URL message carrying the plan


def _submission(meta: str, state: dict[str, Any] | None, trigger: str) -> str:
    """A destroy modal's view_submission as Slack sends it; `state` None: no state at all in the view."""
    view: dict[str, Any] = {
        "id": "V0001",
        "type": "modal",
        "callback_id": DESTROY_SUBMIT_ACTION,
        "private_metadata": meta,
    }
    if state is not None:
        view["state"] = state
    payload = {
        "type": "view_submission",
        "team": {"id": "T0001"},
        "user": {"id": "UDEPLOYER"},
        "api_app_id": "A1",
        "trigger_id": trigger,
        "view": view,
    }
    return urlencode({"payload": json.dumps(payload)})


async def test_no_name_typed_in_slack_is_refused_and_deletes_nothing(bot: Bot, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service("vllm-gemma4")
    body = command_body("destroy", bot.slack.response_url("cmd"), trigger_id="t-dx", user_id="UDEPLOYER")
    await bot.client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
    [answer] = await eventually(lambda: [r for r in bot.slack.responses if r["_rid"] == "cmd"])
    plan_id = button_value(answer, DESTROY_OPEN_ACTION)
    meta = json.dumps({"plan_id": plan_id, "channel_id": "C1", "thread_ts": ""})
    missing: dict[str, dict[str, Any] | None] = {
        "no-field": {"values": {}},  # the name block absent from the submitted values
        "no-state": None,  # no state at all
        "empty": {"values": {"service_name": {"value": {"type": "plain_text_input", "value": ""}}}},
    }
    for trigger, state in missing.items():
        body = _submission(meta, state, trigger)
        resp = await bot.client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
        assert resp.status_code == 200
        assert resp.content, f"{trigger}: the modal was accepted with no name typed"
        data = resp.json()  # shown inside the modal, to this user only
        assert data["response_action"] == "errors", (trigger, data)
        assert data["errors"]["service_name"] == (
            "The name typed does not match `vllm-gemma4`; nothing was deleted. Type the service name exactly to "
            "confirm."
        ), (trigger, data)
    # A forged Confirm click on the destroy plan carries no name at all: refused, to the clicker only.
    await click(bot, CONFIRM_ACTION, plan_id, PLAN_TS, None, "t-forged", channel="C1")
    [refusal] = await eventually(lambda: [r for r in bot.slack.responses if r["_rid"] == "t-forged"])
    assert refusal["response_type"] == "ephemeral", refusal
    assert "typing the service name" in refusal["text"] or "does not match" in refusal["text"], refusal
    await bot.deps.drain()
    assert "vllm-gemma4" in cloud_run.services
    assert not [r for r in cloud_run.requests if r[0] != "GET"], "a refused destroy wrote"
    assert not [m for m in bot.slack.posted if "does not match" in text_of(m) or "submitted" in text_of(m)]
    # The plan was live all along: the right name, from the same modal, deletes the service.
    state = {"values": {"service_name": {"value": {"type": "plain_text_input", "value": "vllm-gemma4"}}}}
    body = _submission(meta, state, "t-ok")
    resp = await bot.client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
    assert resp.status_code == 200 and not resp.content
    assert await eventually(lambda: "vllm-gemma4" not in cloud_run.services, timeout=15)


@pytest.mark.parametrize("typed", [None, "", "   "], ids=["missing", "empty", "blanks"])
async def test_a_destroy_with_no_name_typed_is_refused_and_keeps_its_plan(deps: Any, typed: str | None) -> None:
    gate = _gate(deps)
    destroy = await _plan(gate, kind="destroy", summary="destroy")
    with pytest.raises(Refused) as before:
        await precheck(gate, destroy.id, "UDEP", typed)
    assert before.value.message == "The name typed does not match `vllm-gemma4`; nothing was deleted."
    with pytest.raises(Refused):
        await claim(gate, destroy.id, "UDEP", typed)
    assert await gate.plans.get(destroy.id) is not None  # still there: the right name can still confirm it
    await precheck(gate, destroy.id, "UDEP", "vllm-gemma4")

"""MCP plan_status answers only the caller that proposed the plan (issue 45, item 3), through the MCP SDK client
against `gemma-sre mcp --http` on the shared Redis: another token holder asking about a pending MCP plan, a running
one, or a plan a Slack user made gets exactly the answer an id that never existed gets."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import redis.asyncio as redis
from mcp import ClientSession

from skills.deploy.plans import PlanStore
from skills.targets.plan import Plan
from tests.eventually import eventually
from tests.test_mcp_server import (  # noqa: F401  (http_server: the fixture)
    DEPLOY,
    _status_of,
    _text,
    http_server,
    http_session,
    http_up,
)

NEVER = "0123456789ab"  # a well-formed plan id nobody proposed


async def _yes(ctx: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"confirm": True})


async def _refused_as_unknown(session: ClientSession, plan_id: str) -> None:
    never = await session.call_tool("plan_status", {"plan_id": NEVER})
    asked = await session.call_tool("plan_status", {"plan_id": plan_id})
    assert never.is_error and "expired (or never existed)" in _text(never)
    assert asked.is_error and asked.structured_content is None
    assert _text(asked) == _text(never).replace(NEVER, plan_id)  # not a word more: its existence stays unsaid


async def test_plan_status_answers_only_the_proposer(
    http_server: tuple[str, dict[str, str]],  # noqa: F811
    redis_client: redis.Redis,
    key_prefix: str,
) -> None:
    url, tokens = http_server
    # A plan a Slack user made (/gemma scale): the store the deployed bot and this server share.
    slack_plan = Plan(kind="scale", service="vllm-gemma4", summary="scale vllm-gemma4 to 0-2", created_by="U5")
    await PlanStore(redis_client, f"{key_prefix}:plan", 600).save(slack_plan)
    await http_up(url)

    async with http_session(url, tokens["U2"]) as u2:
        proposed = await u2.call_tool("deploy", DEPLOY)
        assert not proposed.is_error, _text(proposed)
        pending_id = proposed.structured_content["plan"]["id"]

    # U1, a deployer, confirms its own plan through elicitation: it runs, U1 follows it, nobody else can.
    async with http_session(url, tokens["U1"], _yes) as u1:
        proposed = await u1.call_tool("deploy", DEPLOY)
        assert proposed.structured_content["state"] == "confirmed", _text(proposed)
        running_id = proposed.structured_content["plan"]["id"]
        for other in (pending_id, slack_plan.id):
            await _refused_as_unknown(u1, other)

        async def done() -> dict[str, Any] | None:
            s = await _status_of(u1, running_id)
            return s if s["state"] in ("succeeded", "failed") else None

        final = await eventually(done, timeout=90)
        assert final["state"] == "succeeded" and final["confirmed_by"] == "U1", final

    async with http_session(url, tokens["U2"]) as u2:
        await _refused_as_unknown(u2, running_id)  # confirmed and done: still only its proposer's
        await _refused_as_unknown(u2, slack_plan.id)
        own = await _status_of(u2, pending_id)
        assert own["state"] == "pending" and own["plan"]["created_by"] == "U2"

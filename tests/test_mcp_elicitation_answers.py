"""MCP elicitation runs a write only on the client's human's explicit yes: an accepted form whose "confirm" box is
unticked, a decline, a cancel and an accepted form with no content each leave the plan pending and the service as
it was (issue 44: no test declined or unticked, and dropping the tick check ran the write)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types

from tests.test_mcp_server import DEPLOY, _env, _status_of, _text, stdio_session

ANSWERS = [
    types.ElicitResult(action="accept", content={"confirm": False}),
    types.ElicitResult(action="decline"),
    types.ElicitResult(action="cancel"),
    types.ElicitResult(action="accept", content={}),
]


async def test_only_an_accepted_ticked_confirm_runs_the_write(tmp_path: Path) -> None:
    answers = list(ANSWERS)
    asked: list[str] = []
    schemas: list[dict[str, Any]] = []

    async def elicit(ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        schemas.append(params.requested_schema)
        return answers.pop(0)

    env = _env(DEPLOYER_USER_IDS="U1", MCP_STDIO_USER="U1")
    async with stdio_session(tmp_path, env, elicit) as session:
        before = await session.call_tool("revisions", {})
        assert not before.is_error, _text(before)
        plan_ids = []
        for answer in ANSWERS:
            proposed = await session.call_tool("deploy", DEPLOY)
            assert not proposed.is_error, _text(proposed)
            assert proposed.structured_content["state"] == "pending", (answer, _text(proposed))
            assert "Not confirmed in the client" in _text(proposed)
            plan_ids.append(proposed.structured_content["plan"]["id"])
        assert len(asked) == len(ANSWERS) and not answers  # the human was asked each time
        # The form the client shows its human: one required box, labelled, that says what ticking it does.
        confirm = schemas[0]["properties"]["confirm"]
        assert schemas[0]["required"] == ["confirm"] and confirm["type"] == "boolean"
        assert confirm["title"].strip() and confirm["description"].strip()
        for plan_id in plan_ids:
            status = await _status_of(session, plan_id)
            assert status["state"] == "pending" and status["plan"]["id"] == plan_id  # what waits, in full
        after = await session.call_tool("revisions", {})
    names = [[r["name"] for r in res.structured_content["revisions"]] for res in (before, after)]
    assert names[0] == names[1]  # no revision was made


async def test_a_client_that_cannot_be_asked_gets_a_pending_plan_and_no_error(tmp_path: Path) -> None:
    """A client without elicitation (no callback: the SDK then declares no such capability) is never asked."""
    env = _env(DEPLOYER_USER_IDS="U1", MCP_STDIO_USER="U1")
    async with stdio_session(tmp_path, env) as session:
        proposed = await session.call_tool("deploy", DEPLOY)
    assert not proposed.is_error, _text(proposed)
    assert proposed.structured_content["state"] == "pending"
    assert "could not be asked" not in _text(proposed) and "Not confirmed" not in _text(proposed)

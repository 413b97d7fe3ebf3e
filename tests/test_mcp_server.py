"""`gemma-sre mcp` driven by the MCP SDK's own client, the way a coding agent runs it: a subprocess over stdio
(the sandbox, with Slack's stand-in as the workspace) and over streamable HTTP with bearer tokens.

What must hold: the tools' schemas are the commands' declared models; reads answer with typed results; a write
only ever becomes a pending plan posted to the operations channel, which a deployer confirms with the Slack button
(or, where enabled, the client's human through elicitation, never for destroy); plan_status follows it to ready.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import jsonschema
import mcp_types as types
import pytest
import redis.asyncio as redis
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from bot.mcp_tools import build_tools
from bot.sandbox.slack_api import SlackStandIn
from bot.sandbox.slack_signing import action_body, signed_headers
from handlers.arg_models import AuditArgs, BenchArgs, LogsArgs, QueryArgs
from handlers.declared_args import to_argv, tool_schema
from handlers.fit_args import FitArgs
from handlers.registry import COMMANDS
from handlers.reply import CONFIRM_ACTION
from skills.actions.params import ScaleParams
from tests.alerts_fixtures import gcp_alert
from tests.conftest import REDIS_URL
from tests.eventually import eventually

SECRET = "mcp-sandbox-signing-secret-0123456789"
TOKEN = "mcp-alert-token-0123456789"
DEPLOY = {"profile": "gemma4-12b-qat-l4", "max_model_len": 4096}  # the running profile with one change
READ_ONLY = {"status", "fit", "models", "logs", "diagnose", "metrics", "cost", "revisions", "audit", "quota"}
WRITES = {"deploy", "redeploy", "scale", "rollback", "destroy"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(**extra: str) -> dict[str, str]:
    """No Google credentials (the sandbox), fast simulated time, nothing inherited from the developer's shell."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "NO_GCE_CHECK": "true",
        "CLOUDSDK_CONFIG": "/nonexistent-gcloud-config",
        "SANDBOX_SPEED": "5000",
        "DEPLOY_POLL_S": "0.2",
        "GRPC_VERBOSITY": "ERROR",
        "LOG_LEVEL": "WARNING",
        "MCP_CALLS_PER_MIN": "10000",  # the tests poll plan_status; test_rate_limit_per_caller sets its own
        # The server runs the code of the checkout under test (bench/mutation.py's copies set it).
        **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}),
        **extra,
    }


def _slack_env(slack: SlackStandIn, slack_port: int) -> dict[str, str]:
    return {
        "SLACK_BOT_TOKEN": "xoxb-sandbox",
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": slack.base_url + "/api/",
        "DEPLOYER_USER_IDS": "U1",
        "PORT": str(slack_port),
    }


@asynccontextmanager
async def stdio_session(
    tmp_path: Path, env: dict[str, str], elicitation: Any = None, args: tuple[str, ...] = ()
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "bot.cli", "mcp", *args], env=env, cwd=tmp_path)
    with (tmp_path / "mcp-stderr.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            # A server that stops answering fails the call (with its stderr in tmp_path), not the whole run.
            async with ClientSession(
                read, write, read_timeout_seconds=60.0, elicitation_callback=elicitation
            ) as session:
                await session.initialize()
                yield session


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def _status_of(session: ClientSession, plan_id: str) -> dict[str, Any]:
    result = await session.call_tool("plan_status", {"plan_id": plan_id})
    assert not result.is_error, _text(result)
    return dict(result.structured_content)


def _button(messages: list[dict[str, Any]], action_id: str, value: str) -> dict[str, Any] | None:
    for m in messages:
        for block in m.get("blocks") or []:
            for el in block.get("elements") or []:
                if el.get("type") == "button" and el.get("action_id") == action_id and el.get("value") == value:
                    return el
    return None


def test_tool_schemas_and_parsers_derive_from_one_declaration() -> None:
    """Each tool's input schema is its declared model's; each command's parser has exactly the model's fields."""
    tools = build_tools()
    assert READ_ONLY | WRITES | {"health", "query", "bench", "eval", "plan_status"} == set(tools)
    for name, tool in tools.items():
        jsonschema.Draft202012Validator.check_schema(tool.input_schema())
        assert tool.input_schema() == tool_schema(tool.args, tool.typed)
        assert tool.input_schema()["properties"].keys() == tool.args.model_fields.keys()
        assert tool.description and tool.description.startswith(COMMANDS[name].summary if name in COMMANDS else "")
        if name in COMMANDS:  # the command's parser declares exactly the model's fields
            dests = {a.dest for a in COMMANDS[name].parser._actions}
            assert dests == set(tool.args.model_fields), name
    assert {"deploy", "scale", "rollback", "destroy", "fit", "status", "logs"} <= set(COMMANDS)
    assert tools["scale"].input_schema()["properties"]["min_instances"]["description"].startswith("minimum instances")


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("logs", LogsArgs(service="svc-a", since="2h", severity="ERROR", revision="svc-a-00002")),
        ("bench", BenchArgs(concurrency=[1, 8], contexts=[128], output_tokens=64)),
        ("query", QueryArgs(prompt=["what", "is", "--max-model-len", "-1"])),
        ("audit", AuditArgs(n=3)),
        ("fit", FitArgs(model="26b-qat", gpu_count=2, limit_mm_per_prompt={"image": 0}, enforce_eager=True)),
        ("scale", ScaleParams(min_instances=0, max_instances=2, service="-odd")),
    ],
)
def test_checked_arguments_read_back_the_same_through_the_commands_parser(name: str, args: Any) -> None:
    """What MCP validated is what the command then runs with: its words parse back to the same values."""
    typed = build_tools()[name].typed
    cmd = COMMANDS[name]
    opts = cmd.parser.parse(to_argv(args, free_text=cmd.parser.free_text, typed=typed))
    assert {k: getattr(opts, k) for k in type(args).model_fields} == args.model_dump()


async def test_stdio_reads_and_a_write_confirmed_in_slack(tmp_path: Path, slack: SlackStandIn) -> None:
    # The server binds any free port for its Slack endpoints and names it on stderr (no port picked here that
    # another test could take before the server binds it).
    env = _env(**_slack_env(slack, 8080), MCP_ELICIT_CONFIRM="false", MCP_STDIO_USER="U7", ALERT_WEBHOOK_TOKEN=TOKEN)
    asked: list[Any] = []

    async def elicit(ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with stdio_session(tmp_path, env, elicit, args=("--slack-port", "0")) as session:
        said = re.search(r"Slack endpoints on http://127\.0\.0\.1:(\d+)", (tmp_path / "mcp-stderr.log").read_text())
        assert said is not None
        slack_port = int(said.group(1))
        listed = {t.name: t for t in (await session.list_tools()).tools}
        declared = build_tools()
        assert set(listed) == set(declared)
        for name, tool in listed.items():
            assert tool.input_schema == declared[name].input_schema(), name  # the declared model's, as sent
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint is (name in READ_ONLY or name == "plan_status"), name
        assert listed["status"].input_schema["properties"]["fresh"]["type"] == "boolean"

        fit = await session.call_tool("fit", {"model": "26b-qat", "gpu": "nvidia-l4"})
        assert not fit.is_error, _text(fit)
        assert fit.structured_content["verdict"] == "fits"
        assert fit.structured_content["model"]["name"] == "gemma-4-26b-a4b-qat"
        assert "fits on nvidia-l4" in _text(fit)

        status = await session.call_tool("status", {"fresh": True})
        assert not status.is_error, _text(status)
        assert status.structured_content["service"]["name"] == "vllm-gemma4"
        assert status.structured_content["service"]["ready"] is True

        # Refusals: an unknown tool is a protocol error; bad arguments name the field and run nothing.
        with pytest.raises(MCPError, match="Unknown tool: deploy_now"):
            await session.call_tool("deploy_now", {})
        bad = await session.call_tool("fit", {"model": "26b-qat", "gpu_count": 0})
        assert bad.is_error and "gpu_count" in _text(bad)
        unknown_field = await session.call_tool("status", {"servce": "x"})
        assert unknown_field.is_error and "servce" in _text(unknown_field)
        bad_write = await session.call_tool("scale", {"min_instances": 3, "max_instances": 1})
        assert bad_write.is_error and "min_instances" in _text(bad_write)
        assert slack.of("chat.postMessage") == []  # nothing planned, nothing posted

        # A cost-bearing tool follows the Slack rule: U7 is no deployer.
        query = await session.call_tool("query", {"prompt": ["hello"]})
        assert query.is_error and "not allowed" in _text(query)

        proposed = await session.call_tool("deploy", DEPLOY)
        assert not proposed.is_error, _text(proposed)
        out = proposed.structured_content
        plan_id, channel_id = out["plan"]["id"], out["posted"]["channel_id"]
        assert out["state"] == "pending" and out["plan"]["created_by"] == "U7"
        assert out["plan"]["gcloud"].startswith("gcloud ")
        assert any("max-model-len" in line or "max_model_len" in line for line in out["plan"]["changes"])
        assert "#gemma-alerts" in _text(proposed)
        assert asked == []  # elicitation is off here: the client was never asked
        assert (await _status_of(session, plan_id))["state"] == "pending"

        posted = slack.of("chat.postMessage")
        confirm = _button(posted, CONFIRM_ACTION, plan_id)
        assert confirm is not None, posted
        assert posted[-1]["channel"] == "#gemma-alerts"

        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{slack_port}", timeout=10) as bot:
            # A non-deployer's click changes nothing; the deployer's runs the plan.
            for user in ("U7", "U1"):
                body = action_body(
                    CONFIRM_ACTION, plan_id, slack.response_url(f"confirm-{user}"), user_id=user,
                    channel_id=channel_id, message_ts=out["posted"]["message_ts"], trigger_id=f"trig-{user}",
                )  # fmt: skip
                resp = await bot.post("/slack/events", content=body, headers=signed_headers(SECRET, body))
                assert resp.status_code == 200, resp.text
                if user == "U7":
                    assert await eventually(lambda: slack.responses, timeout=30)
                    assert "not allowed" in json.dumps(slack.responses)
                    assert (await _status_of(session, plan_id))["state"] == "pending"

        async def ready() -> dict[str, Any] | None:
            s = await _status_of(session, plan_id)
            return s if s["state"] in ("succeeded", "failed") else None

        final = await eventually(ready, timeout=90)
        assert final["state"] == "succeeded" and final["phase"] == "ready", final
        assert final["confirmed_by"] == "U1"

        audit = await session.call_tool("audit", {"n": 5})
        assert any(e["plan_id"] == plan_id and e["result"] == "ok" for e in audit.structured_content["entries"])

        # Resources: the catalog, and the open incidents (an alert reaches the bot's webhook and opens one).
        catalog = json.loads(_resource_text(await session.read_resource("gemma-sre://catalog")))
        assert "gemma-4-26b-a4b-qat" in catalog["models"]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{slack_port}", timeout=10) as bot:
            resp = await bot.post("/alerts/gcp", params={"auth_token": TOKEN}, json=gcp_alert("mcp-inc-1"))
            assert resp.status_code in (200, 202), resp.text

        async def open_incidents() -> list[dict[str, Any]]:
            text = _resource_text(await session.read_resource("gemma-sre://incidents/open"))
            return list(json.loads(text)["incidents"])

        incidents = await eventually(open_incidents, timeout=30)
        assert incidents[0]["service"] == "vllm-gemma4" and incidents[0]["alerts"][0]["state"] == "firing"
        prompt = await session.get_prompt("diagnose-my-service", {"service": "vllm-gemma4"})
        assert "plan_status" in prompt.messages[0].content.text  # type: ignore[union-attr]


def _resource_text(result: types.ReadResourceResult) -> str:
    content = result.contents[0]
    assert isinstance(content, types.TextResourceContents)
    return content.text


async def test_stdio_elicitation_confirms_when_enabled_but_never_destroy(tmp_path: Path) -> None:
    """The sandbox's default: the client's human may confirm (as a deployer: the same check), destroy never."""
    asked: list[str] = []

    async def elicit(ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    env = _env(DEPLOYER_USER_IDS="U1", MCP_STDIO_USER="U1")
    async with stdio_session(tmp_path, env, elicit) as session:
        destroy = await session.call_tool("destroy", {})
        assert not destroy.is_error, _text(destroy)
        assert destroy.structured_content["state"] == "pending" and asked == []

        proposed = await session.call_tool("deploy", DEPLOY)
        assert not proposed.is_error, _text(proposed)
        assert len(asked) == 1 and proposed.structured_content["plan"]["id"] in asked[0]
        assert proposed.structured_content["state"] == "confirmed"
        plan_id = proposed.structured_content["plan"]["id"]

        async def done() -> dict[str, Any] | None:
            s = await _status_of(session, plan_id)
            return s if s["state"] in ("succeeded", "failed") else None

        final = await eventually(done, timeout=90)
        assert final["state"] == "succeeded" and final["phase"] == "ready", final

        # The destroy plan is still only pending: nothing but a typed name in Slack could run it.
        assert (await _status_of(session, destroy.structured_content["plan"]["id"]))["state"] == "pending"


async def test_stdio_elicitation_refused_for_a_non_deployer(tmp_path: Path) -> None:
    async def elicit(ctx: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"confirm": True})

    env = _env(DEPLOYER_USER_IDS="U1", MCP_STDIO_USER="U9")
    async with stdio_session(tmp_path, env, elicit) as session:
        proposed = await session.call_tool("deploy", DEPLOY)
        assert proposed.structured_content["state"] == "pending"
        assert "not allowed" in _text(proposed)


@pytest.fixture
def http_server(tmp_path: Path, key_prefix: str) -> Any:
    port = _free_port()
    tokens = {"U1": "token-of-u1-0123456789", "U2": "token-of-u2-0123456789"}
    env = _env(
        DEPLOYER_USER_IDS="U1", MCP_TOKENS=json.dumps(tokens), REDIS_URL=REDIS_URL, KEY_PREFIX=key_prefix,
        PYTHONUNBUFFERED="1",
    )  # fmt: skip
    cmd = [sys.executable, "-m", "bot.cli", "mcp", "--http", "--port", str(port)]
    with open(tmp_path / "mcp-http.log", "w") as log:
        proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
        try:
            yield f"http://127.0.0.1:{port}/mcp", tokens
        finally:
            proc.terminate()
            proc.wait(timeout=20)


async def http_up(url: str) -> None:
    """Wait for `gemma-sre mcp --http` to answer (401 to a request without a token)."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    async with httpx.AsyncClient(timeout=5) as raw:

        async def up() -> bool:
            try:
                return (await raw.post(url, json=init)).status_code == 401
            except httpx.HTTPError:
                return False

        assert await eventually(up, timeout=60), "gemma-sre mcp --http did not come up"


@asynccontextmanager
async def http_session(url: str, token: str, elicitation: Any = None) -> AsyncIterator[ClientSession]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write, elicitation_callback=elicitation) as session:
                await session.initialize()
                yield session


async def test_http_needs_a_token_that_names_the_caller(
    http_server: tuple[str, dict[str, str]], redis_client: redis.Redis, key_prefix: str
) -> None:
    url, tokens = http_server
    await http_up(url)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    async with httpx.AsyncClient(timeout=5) as raw:
        for headers in ({}, {"Authorization": "Bearer not-a-token"}, {"Authorization": tokens["U1"]}):
            resp = await raw.post(url, json=init, headers=headers)
            assert resp.status_code == 401, headers
            assert resp.headers["www-authenticate"].startswith("Bearer")

    async with http_session(url, tokens["U2"]) as session:
        assert "deploy" in {t.name for t in (await session.list_tools()).tools}
        fit = await session.call_tool("fit", {"model": "gemma4-12b-qat-l4"})
        assert not fit.is_error and fit.structured_content["verdict"] in ("fits", "fits_with_changes")
        status = await session.call_tool("status", {})
        assert status.structured_content["service"]["name"] == "vllm-gemma4"
        # U2 is no deployer: what wakes the model is refused, reads are not.
        query = await session.call_tool("query", {"prompt": ["hi"]})
        assert query.is_error and "<@U2> is not allowed" in _text(query)

        proposed = await session.call_tool("deploy", DEPLOY)
        assert not proposed.is_error, _text(proposed)
        plan = proposed.structured_content["plan"]
        assert plan["created_by"] == "U2"  # the token named the caller
        # The plan is in the shared store the deployed bot confirms from.
        key = f"{key_prefix}:plan:{plan['id']}"
        assert json.loads(await redis_client.get(key))["created_by"] == "U2"
        assert (await _status_of(session, plan["id"]))["state"] == "pending"

        # It expires as every plan does (Redis drops the key at its TTL): then nothing can run it.
        await redis_client.pexpire(key, 1)
        assert await eventually(lambda: _gone(redis_client, key), timeout=5)
        expired = await session.call_tool("plan_status", {"plan_id": plan["id"]})
        assert expired.is_error and "expired" in _text(expired)

    async with http_session(url, tokens["U1"]) as session:
        query = await session.call_tool("query", {"prompt": ["hi"]})
        assert not query.is_error, _text(query)


async def _gone(client: redis.Redis, key: str) -> bool:
    return not await client.exists(key)


async def test_writes_refused_without_the_shared_store_and_calls_rate_limited(tmp_path: Path) -> None:
    """Outside the sandbox with no REDIS_URL, write tools are listed but refuse with the reason. Each caller
    has its limit of calls per minute."""
    env = _env(
        GOOGLE_CLOUD_PROJECT="p", GOOGLE_ANONYMOUS_CREDENTIALS="true",
        CLOUD_RUN_API_ENDPOINT=f"127.0.0.1:{_free_port()}", SLACK_BOT_TOKEN="xoxb-x",
    ) | {"MCP_CALLS_PER_MIN": "6"}  # fmt: skip
    async with stdio_session(tmp_path, env) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert WRITES <= set(tools)
        assert "REDIS_URL" in (tools["deploy"].description or "")
        for name, args in (("deploy", DEPLOY), ("destroy", {}), ("scale", {"min_instances": 0, "max_instances": 1})):
            refused = await session.call_tool(name, args)
            assert refused.is_error and "REDIS_URL" in _text(refused), name
        fit = await session.call_tool("fit", {"model": "26b-qat"})
        assert not fit.is_error  # reads need neither
        # 13 calls in all span at most two one-minute windows: one of them must go over 6.
        results = [await session.call_tool("models", {}) for _ in range(9)]
        refused = [r for r in results if r.is_error]
        assert refused and "Rate limit: at most 6 tool calls per minute for mcp-stdio" in _text(refused[0])


def test_a_taken_slack_port_is_a_clear_error_before_anything_starts(tmp_path: Path, slack: SlackStandIn) -> None:
    """The sandbox's Slack endpoints are bound first: a port in use ends the server at once with the reason, rather
    than a session whose web server died beside it."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "bot.cli", "mcp", "--sandbox", "--slack-port", str(port)],
            env=_env(**_slack_env(slack, 8080)),
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2, done.stderr
    assert f"cannot serve the Slack endpoints on 127.0.0.1:{port}" in done.stderr
    assert "sandbox:" not in done.stderr  # refused before the simulated project started

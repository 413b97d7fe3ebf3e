"""The ACA logs adapter (bot/adapters/aca_logs.py) on the real azure-monitor-query LogsQueryClient against the Log
Analytics stand-in (bot/sandbox/log_analytics_api.py) over HTTPS: a deployed sandbox app's vLLM start-up lines and
its system events, by revision, with severities, bounded in time and capped; the stand-in refuses KQL it does not
evaluate with Log Analytics' error."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

import httpx
import pytest

from bot.adapters.aca_logs import AcaLogs, kql_string
from bot.adapters.container_apps import StaticTokenCredential
from bot.sandbox.aca_api import _EPOCH, PROVISION_S
from bot.sandbox.aca_replicas import startup_s
from bot.sandbox.kql import KqlError, evaluate
from bot.sandbox.log_analytics_api import LogAnalyticsStandIn, serve_log_analytics
from skills.errors import CloudUnavailable, InvalidInput, NotFound
from skills.ports import LogQuery
from tests.aca_fixtures import A100, Aca, aca_env, app_body

WORKSPACE = "6f0c2e4a-0000-4000-8000-000000000055"


@dataclass
class Env:
    aca: Aca
    la: LogAnalyticsStandIn
    logs: AcaLogs
    url: str
    ca: str


@asynccontextmanager
async def logs_env() -> AsyncIterator[Env]:
    async with aca_env() as aca:
        la = LogAnalyticsStandIn(aca.standin, aca.replicas, WORKSPACE, now=aca.clock.now)
        with serve_log_analytics(la) as (url, ca):
            logs = AcaLogs(WORKSPACE, credential=StaticTokenCredential(), endpoint=url, connection_verify=ca)
            try:
                yield Env(aca, la, logs, url, ca)
            finally:
                await logs.aclose()


ARGS = ["--model", "google/gemma-4-12b-it", "--port", "8000"]
UP_S = startup_s(app_body("", args=ARGS)["properties"]["template"], A100)  # its replica's start, as derived


async def deploy(env: Env, suffix: str, seconds: float) -> str:
    """Put the app with a new revision and let `seconds` of sandbox time pass after it provisions."""
    handle = await env.aca.api.begin_put_app("gemma", app_body(env.aca.env_id(), suffix=suffix, args=ARGS))
    env.aca.clock.advance(PROVISION_S)
    assert (await env.aca.done(handle)).status == "Succeeded"
    env.aca.clock.advance(seconds)
    return f"gemma--{suffix}"


async def test_startup_lines_come_back_in_order_by_revision_with_severities() -> None:
    async with logs_env() as env:
        first = await deploy(env, "one", UP_S)
        env.aca.replicas.fail_next_start = "RuntimeError: CUDA error: no kernel image is available"
        second = await deploy(env, "two", 30)

        batch = await env.logs.fetch(LogQuery(service="gemma", since=_EPOCH))
        assert batch.truncated == ""
        stamps = [e.timestamp for e in batch.entries]
        assert stamps == sorted(stamps)  # type: ignore[type-var]
        ones = [e for e in batch.entries if e.revision == first]
        texts = [e.text for e in ones]
        assert texts[0] == "RevisionProvisioning: Creating a new revision: gemma--one"
        console = [e.text for e in ones if e.log_name.startswith("ContainerAppConsoleLogs_CL/")]
        assert console[0] == "[__init__.py:235] Automatically detected platform cuda."
        assert any("Loading safetensors checkpoint shards" in t for t in console)
        assert console[-1].endswith("Application startup complete.")
        assert {e.severity for e in ones} == {"INFO"}
        assert {e.log_name for e in ones if "Console" in e.log_name} == {"ContainerAppConsoleLogs_CL/stdout"}

        # The second revision's engine dies: its error is on stderr, and ERROR; its events say so.
        only = await env.logs.fetch(LogQuery(service="gemma", since=_EPOCH, revision=second))
        assert {e.revision for e in only.entries} == {second}
        died = [e for e in only.entries if "no kernel image" in e.text]
        assert [(e.severity, e.log_name) for e in died] == [("ERROR", "ContainerAppConsoleLogs_CL/stderr")]
        errors = await env.logs.fetch(LogQuery(service="gemma", since=_EPOCH, min_severity="ERROR"))
        assert errors.entries and {e.severity for e in errors.entries} == {"ERROR"}
        assert all(e.revision == second for e in errors.entries)

        # What the adapter sent is KQL the stand-in evaluated: names as string literals, bounded, ordered, capped.
        sent = env.la.queries[0]
        assert sent.startswith("ContainerAppConsoleLogs_CL\n| where TimeGenerated >= datetime(2026-12-01T00:00:00")
        assert "| where ContainerAppName_s == 'gemma'" in sent and sent.endswith("| take 20001")


async def test_a_time_window_excludes_older_lines_and_later_ones() -> None:
    async with logs_env() as env:
        rev = await deploy(env, "one", UP_S)
        everything = await env.logs.fetch(LogQuery(service="gemma", since=_EPOCH))
        ready = next(e for e in everything.entries if "Application startup complete." in e.text)
        assert ready.timestamp is not None
        window = await env.logs.fetch(
            LogQuery(service="gemma", since=ready.timestamp - timedelta(seconds=1), until=ready.timestamp)
        )
        assert window.entries and all(
            ready.timestamp - timedelta(seconds=1) <= e.timestamp <= ready.timestamp  # type: ignore[operator]
            for e in window.entries
        )
        assert "Automatically detected platform cuda." not in " ".join(e.text for e in window.entries)
        assert len(window.entries) < len(everything.entries)
        later = await env.logs.fetch(LogQuery(service="gemma", since=ready.timestamp + timedelta(seconds=1)))
        assert later.entries == []
        assert rev in {e.revision for e in everything.entries}


async def test_the_entry_cap_keeps_the_newest_and_says_so() -> None:
    async with logs_env() as env:
        await deploy(env, "one", UP_S)
        full = await env.logs.fetch(LogQuery(service="gemma", since=_EPOCH))
        capped = await env.logs.fetch(LogQuery(service="gemma", since=_EPOCH, max_entries=5))
        assert [e.text for e in capped.entries] == [e.text for e in full.entries[-5:]]
        assert capped.truncated == "stopped at the 5-entry cap; older entries were not read"
        assert env.la.queries[-1].endswith("| take 6")  # the cap is asked of Log Analytics, not only applied here


async def test_names_are_validated_and_quoted_as_kql_literals() -> None:
    async with logs_env() as env:
        with pytest.raises(InvalidInput, match="not a container app name"):
            await env.logs.fetch(LogQuery(service="gemma' or 1==1", since=_EPOCH))
    assert kql_string("it's a \\ test") == "'it\\'s a \\\\ test'"
    rows = [{"A": "it's a \\ test"}, {"A": "other"}]
    got = evaluate(f"T | where A == {kql_string(rows[0]['A'])}", {"T": ([("A", "string")], rows)})
    assert got["rows"] == [["it's a \\ test"]]


async def test_workspace_and_credential_refusals_in_the_bots_terms() -> None:
    async with logs_env() as env:
        other = AcaLogs(
            "11111111-0000-4000-8000-000000000000",
            credential=StaticTokenCredential(),
            endpoint=env.url,
            connection_verify=env.ca,
        )
        try:
            with pytest.raises(NotFound, match=r"WorkspaceNotFoundError: The workspace could not be found"):
                await other.fetch(LogQuery(service="gemma", since=_EPOCH))
        finally:
            await other.aclose()
        env.la.token = "another-token"
        with pytest.raises(CloudUnavailable, match="AuthorizationRequiredError"):
            await env.logs.fetch(LogQuery(service="gemma", since=_EPOCH))


async def test_a_partial_answer_keeps_its_rows_and_says_why() -> None:
    async with logs_env() as env:
        await deploy(env, "one", UP_S)
        env.la.partial = "Query exceeded the allowed memory"
        batch = await env.logs.fetch(LogQuery(service="gemma", since=_EPOCH))
        assert any("Application startup complete." in e.text for e in batch.entries)
        assert batch.truncated == (
            "Log Analytics answered ContainerAppConsoleLogs_CL only in part: There were some errors when processing "
            "your query.; Query exceeded the allowed memory; Log Analytics answered ContainerAppSystemLogs_CL only in "
            "part: There were some errors when processing your query.; Query exceeded the allowed memory"
        )


async def _post(env: Env, query: str, *, token: str | None = "sandbox-token") -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=env.ca)) as client:
        return await client.post(
            f"{env.url}/v1/workspaces/{WORKSPACE}/query", json={"query": query, "timespan": None}, headers=headers
        )


async def test_the_standin_refuses_kql_it_does_not_evaluate_as_log_analytics_does() -> None:
    async with logs_env() as env:
        await deploy(env, "one", 100)
        ok = await _post(env, "ContainerAppConsoleLogs_CL | where ContainerAppName_s == 'gemma' | take 2")
        assert ok.status_code == 200
        (table,) = ok.json()["tables"]
        assert table["name"] == "PrimaryResult" and len(table["rows"]) == 2
        assert {"name": "TimeGenerated", "type": "datetime"} in table["columns"]

        summarize = await _post(env, "ContainerAppConsoleLogs_CL | summarize count() by RevisionName_s")
        assert summarize.status_code == 400
        err = summarize.json()["error"]
        assert (err["code"], err["message"]) == ("BadArgumentError", "The request had some invalid properties")
        assert err["innererror"]["code"] == "SyntaxError"
        assert "'summarize'" in err["innererror"]["innererror"]["message"]

        for bad, kind in [
            ("ContainerAppConsoleLogs_CL | where Log_s contains 'x'", "SyntaxError"),
            ("ContainerAppConsoleLogs_CL | where AppName == 'gemma'", "SemanticError"),
            ("ContainerAppConsoleLogs | take 1", "SemanticError"),  # the azure-monitor table is not in this workspace
            ("ContainerAppConsoleLogs_CL | where TimeGenerated >= 'yesterday'", "SemanticError"),
            ("ContainerAppConsoleLogs_CL | where ContainerAppName_s == 'a' or RevisionName_s == 'b'", "SyntaxError"),
            ("ContainerAppConsoleLogs_CL | project Log_s | where Stream_s == 'stderr'", "SemanticError"),
        ]:
            got = await _post(env, bad)
            assert got.status_code == 400, bad
            assert got.json()["error"]["innererror"]["code"] == kind, bad
        missing = (await _post(env, "ContainerAppConsoleLogs_CL | where AppName == 'gemma'")).json()
        assert missing["error"]["innererror"]["innererror"] == {
            "code": "SEM0100",
            "message": "'where' operator: Failed to resolve column or scalar expression named 'AppName'",
        }
        unauthenticated = await _post(env, "ContainerAppConsoleLogs_CL | take 1", token=None)
        assert unauthenticated.status_code == 401
        assert unauthenticated.json()["error"]["code"] == "AuthorizationRequiredError"


def test_kql_errors_are_the_query_apis_shape() -> None:
    with pytest.raises(KqlError) as caught:
        evaluate("T | extend x = 1", {"T": ([("A", "string")], [])})
    assert caught.value.body()["error"]["innererror"]["code"] == "SyntaxError"

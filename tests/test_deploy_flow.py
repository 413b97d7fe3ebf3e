"""Deploy end to end: plan -> confirm -> Cloud Run REST stand-in (real google-cloud-run) -> progress."""

from __future__ import annotations

from typing import Any

from bot.sandbox.cloud_run_api import CloudRunStandIn
from handlers.reply import CONFIRM_ACTION
from skills.audit import latest
from tests.deploy_helpers import click, command, plan_id_of

pytest_plugins = ["tests.deploy_fixtures"]


async def test_deploy_new_service_polls_operation_until_ready(deps: Any, cloud_run: CloudRunStandIn) -> None:
    cloud_run.op_polls = 4
    reply, _ = await command(deps, "deploy gemma4-12b-qat-l4")
    assert reply is not None and "Plan" in reply.title, reply.title
    assert "fits" in (reply.sections[0].text or "")
    plan_id = plan_id_of(reply)
    assert not [r for r in cloud_run.requests if r[0] != "GET"], "planning must not write"

    result, responder = await click(deps, CONFIRM_ACTION, plan_id)
    assert result is None
    assert ("POST", "/v2/projects/test-proj/locations/us-central1/services") in cloud_run.requests
    op_polls = [r for r in cloud_run.requests if "/operations/" in r[1]]
    assert len(op_polls) >= 4
    progress_ts = responder.posts[0][0]
    titles = responder.titles(progress_ts)
    phases = [t for t in ("revision created", "instance starting", "ready") if any(t in x for x in titles)]
    assert phases == ["revision created", "instance starting", "ready"], titles
    assert titles[-1].startswith(":white_check_mark:")
    svc = cloud_run.services["vllm-gemma4"]
    assert svc["latestReadyRevision"] == svc["latestCreatedRevision"]
    args = svc["template"]["containers"][0]["args"]
    assert "--max-num-seqs" in args and svc["template"]["maxInstanceRequestConcurrency"] == int(
        args[args.index("--max-num-seqs") + 1]
    )
    entries = await latest(deps.redis, deps.settings.key("audit"))
    assert [(e.action, e.result, e.user_id) for e in entries] == [("deploy", "ok", "UDEPLOYER")]
    assert entries[0].params["profile"] == "gemma4-12b-qat-l4"
    assert not await deps.redis.exists(deps.settings.key("lock", "service", "vllm-gemma4"))


async def test_revision_failing_startup_probe_reports_reason_and_keeps_traffic(
    deps: Any, cloud_run: CloudRunStandIn
) -> None:
    cloud_run.seed_service("vllm-gemma4")
    old_ready = cloud_run.services["vllm-gemma4"]["latestReadyRevision"]
    cloud_run.next_revision_outcome = "probe_failed"
    cloud_run.op_polls = 2
    reply, _ = await command(deps, "deploy gemma4-12b-qat-l4 --max-model-len 8192")
    assert reply is not None
    diff = "\n".join(s.code or "" for s in reply.sections)
    assert "--max-model-len: 16384 -> 8192" in diff
    _, responder = await click(deps, CONFIRM_ACTION, plan_id_of(reply))
    last = responder.updates[-1][1]
    assert last.title.startswith(":x:") and "failed" in last.title
    text = "\n".join(s.text or "" for s in last.sections)
    assert "HEALTH_CHECK_CONTAINER_ERROR" in text and "failed the configured startup probe" in text
    svc = cloud_run.services["vllm-gemma4"]
    assert svc["latestReadyRevision"] == old_ready  # traffic never moved to the failed revision
    assert svc["latestCreatedRevision"] != old_ready
    entries = await latest(deps.redis, deps.settings.key("audit"))
    assert entries[0].result == "failed" and "startup probe" in entries[0].detail


async def test_does_not_fit_plan_cannot_be_confirmed(deps: Any, cloud_run: CloudRunStandIn) -> None:
    reply, _ = await command(deps, "deploy gemma4-31b-qat-rtx --gpu nvidia-l4")
    assert reply is not None
    assert "does not fit" in (reply.sections[0].text or "")
    assert not any(b.action_id == CONFIRM_ACTION for b in reply.buttons)
    plan_id = reply.buttons[-1].value  # Cancel carries the id; a forged Confirm must still be refused
    refusal, _ = await click(deps, CONFIRM_ACTION, plan_id)
    assert refusal is not None and "cannot be confirmed" in refusal.title
    assert not [r for r in cloud_run.requests if r[0] != "GET"]


async def test_field_notes_verdicts_through_deploy_plans(deps: Any) -> None:
    expected = {
        "deploy gemma4-12b-qat-l4": "fits",
        "deploy gemma4-26b-qat-l4": "fits",
        "deploy gemma4-31b-qat-rtx": "fits",
        "deploy gemma4-31b-qat-rtx --gpu nvidia-l4": "does not fit",
    }
    for text, verdict in expected.items():
        reply, _ = await command(deps, text)
        assert reply is not None
        assert (reply.sections[0].text or "").split("\n")[0].endswith(f"*{verdict}*"), (
            text,
            reply.sections[0].text,
        )


async def test_role_refusal_keeps_the_plan_for_a_deployer(deps: Any, cloud_run: CloudRunStandIn) -> None:
    reply, _ = await command(deps, "deploy gemma4-12b-qat-l4", user="UOTHER")
    plan_id = plan_id_of(reply)
    refusal, _ = await click(deps, CONFIRM_ACTION, plan_id, user="UOTHER")
    assert refusal is not None and "not allowed" in refusal.title
    assert not [r for r in cloud_run.requests if r[0] != "GET"]
    entries = await latest(deps.redis, deps.settings.key("audit"))
    assert (entries[0].result, entries[0].user_id) == ("refused", "UOTHER")
    ok, _ = await click(deps, CONFIRM_ACTION, plan_id)  # a deployer can still confirm the same plan
    assert ok is None
    assert cloud_run.services["vllm-gemma4"]["latestReadyRevision"]


async def test_deployer_by_usergroup_via_slack_api(deps: Any, cloud_run: CloudRunStandIn, slack: Any) -> None:
    from slack_sdk.web.async_client import AsyncWebClient

    deps.settings = deps.settings.model_copy(update={"deployer_usergroup_id": "S0DEPLOY"})
    deps.chat = AsyncWebClient(token="xoxb-test-token", base_url=deps.settings.slack_api_url)
    slack.usergroups["S0DEPLOY"] = ["UGROUPIE"]
    reply, _ = await command(deps, "deploy gemma4-12b-qat-l4", user="UGROUPIE")
    outsider, _ = await click(deps, CONFIRM_ACTION, plan_id_of(reply), user="UNOPE")
    assert outsider is not None and "not allowed" in outsider.title
    result, _ = await click(deps, CONFIRM_ACTION, plan_id_of(reply), user="UGROUPIE")
    assert result is None
    assert any(r[0] == "POST" for r in cloud_run.requests)

"""Scale, rollback, destroy, revisions, quota and audit against the Cloud Run REST stand-in."""

from __future__ import annotations

from typing import Any

from bot.sandbox.cloud_run_api import CloudRunStandIn
from handlers.commands.plans import DESTROY_NAME_BLOCK, DESTROY_OPEN_ACTION, DESTROY_SUBMIT_ACTION
from handlers.reply import CANCEL_ACTION, CONFIRM_ACTION, PLAN_ACTION
from skills.diagnosis.remediation import ProposedAction
from tests.deploy_helpers import click, command, plan_id_of, plan_value

pytest_plugins = ["tests.deploy_fixtures"]


async def test_scale_plan_then_confirm_updates_instance_limits(deps: Any, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service("vllm-gemma4", min_instances=0, max_instances=1)
    reply, _ = await command(deps, "scale 1 3")
    assert reply is not None
    assert "~ template.scaling.maxInstanceCount: 1 -> 3" in (reply.sections[1].code or "")
    assert "gcloud run services update vllm-gemma4" in reply.sections[-1].code  # type: ignore[operator]
    result, _ = await click(deps, CONFIRM_ACTION, plan_id_of(reply))
    assert result is None
    scaling = cloud_run.services["vllm-gemma4"]["template"]["scaling"]
    assert (scaling["minInstanceCount"], scaling["maxInstanceCount"]) == (1, 3)


async def test_bad_scale_input_changes_nothing(deps: Any, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service("vllm-gemma4")
    for text in ("scale 3 1", "scale two 3", "scale 1", "scale -1 2"):
        reply, _ = await command(deps, text)
        assert reply is not None and reply.title.startswith(":warning:"), text
    assert not [r for r in cloud_run.requests if r[0] != "GET"]


async def test_rollback_moves_all_traffic_to_the_previous_ready_revision(deps: Any, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service("vllm-gemma4")
    first = cloud_run.services["vllm-gemma4"]["latestReadyRevision"].rsplit("/", 1)[-1]
    reply, _ = await command(deps, "deploy gemma4-12b-qat-l4")
    await click(deps, CONFIRM_ACTION, plan_id_of(reply))
    second = cloud_run.services["vllm-gemma4"]["latestReadyRevision"].rsplit("/", 1)[-1]
    assert second != first
    revs, _ = await command(deps, "revisions")
    assert revs is not None and f"`{second}`" in (revs.sections[0].text or "")
    plan, _ = await command(deps, "rollback")
    assert plan is not None and first in plan.title
    n_revisions = len(cloud_run.revisions["vllm-gemma4"])
    result, responder = await click(deps, CONFIRM_ACTION, plan_id_of(plan))
    assert result is None, result
    assert responder.updates[-1][1].title.startswith(":white_check_mark:")
    statuses = cloud_run.services["vllm-gemma4"]["trafficStatuses"]
    assert [(s["revision"], s["percent"]) for s in statuses] == [(first, 100)]
    assert len(cloud_run.revisions["vllm-gemma4"]) == n_revisions  # a traffic move creates no revision


async def test_rollback_to_unknown_revision_is_refused(deps: Any, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service("vllm-gemma4")
    reply, _ = await command(deps, "rollback vllm-gemma4-99999-zzz")
    assert reply is not None and "not found" in reply.title


async def test_destroy_needs_the_typed_name(deps: Any, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service("vllm-gemma4")
    reply, responder = await command(deps, "destroy", trigger_id="trig-1")
    assert reply is not None and responder.modals, "the dialog opens straight from the command"
    assert not any(b.action_id == CONFIRM_ACTION for b in reply.buttons)
    plan_id = plan_id_of(reply)
    _, opened = await click(deps, DESTROY_OPEN_ACTION, plan_id)
    view = opened.modals[0]
    assert view["callback_id"] == DESTROY_SUBMIT_ACTION
    meta = view["private_metadata"]
    plain_confirm, _ = await click(deps, CONFIRM_ACTION, plan_id)
    assert plain_confirm is not None and "typing the service name" in plain_confirm.title
    wrong, _ = await click(deps, DESTROY_SUBMIT_ACTION, meta, form={DESTROY_NAME_BLOCK: "vllm-gemma"})
    assert wrong is not None and "does not match" in wrong.title
    assert "vllm-gemma4" in cloud_run.services
    ok, progress = await click(deps, DESTROY_SUBMIT_ACTION, meta, form={DESTROY_NAME_BLOCK: "vllm-gemma4"})
    assert ok is None
    assert "vllm-gemma4" not in cloud_run.services
    assert "deleted" in progress.updates[-1][1].title
    audit, _ = await command(deps, "audit")
    assert audit is not None and "*destroy* `vllm-gemma4`" in (audit.sections[0].text or "")


async def test_plan_button_from_a_remediation_opens_the_same_flow(deps: Any, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service("vllm-gemma4")
    await click(deps, CONFIRM_ACTION, plan_id_of((await command(deps, "deploy gemma4-12b-qat-l4"))[0]))
    proposal = ProposedAction(action="redeploy", params={"max_model_len": 8192, "enforce_eager": True})
    reply, _ = await click(deps, PLAN_ACTION, plan_value(proposal.action, proposal.params))
    assert reply is not None and "Redeploy" in reply.title
    code = "\n".join(s.code or "" for s in reply.sections)
    assert "--max-model-len: 32768 -> 8192" in code and "+ template.containers[0].args --enforce-eager: true" in code
    assert "fits" in (reply.sections[0].text or "")
    result, _ = await click(deps, CONFIRM_ACTION, plan_id_of(reply))
    assert result is None
    args = cloud_run.services["vllm-gemma4"]["template"]["containers"][0]["args"]
    assert args[args.index("--max-model-len") + 1] == "8192" and "--enforce-eager" in args


async def test_plan_button_with_bad_params_is_a_clear_error(deps: Any, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service("vllm-gemma4")
    for value in (
        "not json",
        plan_value("explode", {}),
        plan_value("scale", {"min_instances": 1}),
        plan_value("redeploy", {"max_model_len": "lots"}),
    ):
        reply, _ = await click(deps, PLAN_ACTION, value)
        assert reply is not None and reply.title.startswith(":warning:"), value


async def test_cancel_discards_the_plan(deps: Any, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service("vllm-gemma4")
    reply, _ = await command(deps, "scale 0 2")
    plan_id = plan_id_of(reply)
    cancelled, responder = await click(deps, CANCEL_ACTION, plan_id)
    assert cancelled is not None and "nothing changed" in cancelled.title
    assert responder.updates and "Cancelled" in responder.updates[0][1].title
    late, _ = await click(deps, CONFIRM_ACTION, plan_id)
    assert late is not None and "expired" in late.title
    assert not [r for r in cloud_run.requests if r[0] != "GET"]


async def test_config_renders_without_deploying_and_quota_reads_the_api(deps: Any, cloud_run: CloudRunStandIn) -> None:
    reply, _ = await command(deps, "config gemma4-12b-qat-l4")
    assert reply is not None and "nothing deployed" in reply.title
    assert reply.files and b"nvidia.com/gpu" in reply.files[0].content
    assert not [r for r in cloud_run.requests if r[0] != "GET"]
    quota, _ = await command(deps, "quota")
    # read from the Cloud Quotas API (stand-in): the deploy region first, then the others that offer the GPU
    text = quota.sections[0].text or "" if quota is not None else ""
    assert text.startswith("• `us-central1` (deploys go here): :white_check_mark: 3 GPU(s)"), text
    assert "`europe-west1`" in text and "gcloud" not in text

"""One params model per action: the agent's tool schema, the proposal sanitizer and the plan builder agree.

Before, skills/diagnosis/remediation.py and skills/deploy/plan_builder.py each had their own models: the agent
could propose kv_cache_dtype="fp8_e4m3", the sanitizer kept it, it became a button, and the plan builder refused
the click.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.agent import toolset
from skills.actions import params as action_params
from skills.diagnosis.remediation import PROPOSABLE, ProposedAction, sanitize_action
from skills.targets.cloud_run import plan_deploy, plan_operate, plan_redeploy


def test_the_sanitizer_the_tools_and_the_builder_share_one_model_per_action() -> None:
    for name, model in PROPOSABLE.items():
        assert model is action_params.ACTION_PARAMS[name]
    assert plan_redeploy.RedeployParams is action_params.RedeployParams
    assert plan_operate.ScaleParams is action_params.ScaleParams
    assert plan_operate.RollbackParams is action_params.RollbackParams
    assert plan_deploy.DeployParams is action_params.DeployParams
    assert issubclass(toolset.RedeployTool, action_params.RedeployParams)
    assert "destroy" not in PROPOSABLE  # the proposable subset: never destroy from model output


@pytest.mark.parametrize(
    "action,params",
    [
        ("redeploy", {"kv_cache_dtype": "fp8_e4m3"}),
        ("redeploy", {"kv_cache_dtype": "fp8"}),
        ("redeploy", {"gpu_memory_utilization": 0.99}),
        ("redeploy", {"startup_failure_threshold": 500}),
        ("redeploy", {"max_num_seqs": 1024}),
        ("redeploy", {"concurrency": 8, "max_num_seqs": 4}),
        ("scale", {"max_instances": 3}),
        ("scale", {"min_instances": 0, "max_instances": 3}),
        ("rollback", {}),
        ("deploy", {"profile": "gemma4-12b-l4", "kv_cache_dtype": "fp8_e5m2"}),
    ],
)
def test_a_kept_proposal_is_one_the_plan_builder_accepts(action: str, params: dict[str, Any]) -> None:
    kept, why = sanitize_action(ProposedAction(action=action, params=params))
    builder = {
        "redeploy": plan_redeploy.RedeployParams,
        "scale": plan_operate.ScaleParams,
        "rollback": plan_operate.RollbackParams,
        "deploy": plan_deploy.DeployParams,
    }[action]
    if kept is None:
        assert why  # dropped with a reason the thread shows
        with pytest.raises(ValueError):
            builder.model_validate(params)
    else:
        builder.model_validate(kept.params)  # a button is never refused for its parameters


def test_the_agent_may_not_pick_the_service() -> None:
    kept, why = sanitize_action(
        ProposedAction(action="scale", params={"min_instances": 0, "max_instances": 2, "service": "prod-db"})
    )
    assert kept is not None and "service" not in kept.params and "service" in why

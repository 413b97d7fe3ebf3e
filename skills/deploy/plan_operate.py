"""Moved to skills/targets/cloud_run/plan_operate.py (the Cloud Run scale, rollback and destroy plans);
this name stays importable while other work moves over."""

from __future__ import annotations

from skills.targets.cloud_run.plan_operate import (  # noqa: F401 - re-exported
    LATEST_TRAFFIC,
    DeployEnv,
    DestroyParams,
    InvalidInput,
    NotFound,
    Plan,
    RevisionInfo,
    RollbackParams,
    Runtime,
    ScaleParams,
    current_spec,
    destroy_command,
    diff_specs,
    fingerprint,
    pick_rollback_target,
    plan_destroy,
    plan_rollback,
    plan_scale,
    rollback_command,
    scale_command,
    serving_base,
    strip_output_only,
    validate_params,
)

"""Moved to skills/targets/cloud_run/plan_common.py (the Cloud Run plan builders' shared steps);
this name stays importable while other work moves over."""

from __future__ import annotations

from skills.targets.cloud_run.plan_common import (  # noqa: F401 - re-exported
    LATEST_TRAFFIC,
    MAX_THRESHOLD_WINDOW_S,
    PROBE_MARGIN,
    WAIT_MARGIN_S,
    ActionKind,
    Base,
    FitReport,
    InvalidInput,
    NotFound,
    Plan,
    Runtime,
    VllmFlags,
    apply_fit,
    as_text,
    check_gpu,
    container_flags,
    cpu_floor,
    current_spec,
    fit_for,
    fit_lines,
    gib,
    load_catalog,
    one_gpu,
    probe_note,
    serving_base,
    validate_params,
)

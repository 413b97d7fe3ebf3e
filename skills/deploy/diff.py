"""Moved to skills/targets/cloud_run/diff.py (the Cloud Run v2 field diff);
this name stays importable while other work moves over."""

from __future__ import annotations

from skills.targets.cloud_run.diff import (  # noqa: F401 - re-exported
    MARK,
    OUTPUT_ONLY_FIELDS,
    FieldChange,
    VllmFlags,
    arg_items,
    diff_specs,
    fingerprint,
    flatten,
    pair_tokens,
    redact,
    secret_env_name,
)

"""Moved to skills/targets/cloud_run/gcloud.py (the gcloud equivalents of a Cloud Run write);
this name stays importable while other work moves over."""

from __future__ import annotations

from skills.targets.cloud_run.gcloud import (  # noqa: F401 - re-exported
    MARK,
    deploy_command,
    destroy_command,
    main_container,
    redact,
    rollback_command,
    scale_command,
    secret_env_name,
)

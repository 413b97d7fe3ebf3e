"""Moved to skills/targets/cloud_run/merge.py (laying a rendered Cloud Run service over the running one);
this name stays importable while other work moves over."""

from __future__ import annotations

from skills.targets.cloud_run.merge import (  # noqa: F401 - re-exported
    MANAGED_ENV,
    MOUNT_PATH,
    OFFLINE_ENV,
    VOLUME,
    main_container,
    merge_onto,
    strip_output_only,
)

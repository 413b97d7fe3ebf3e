"""Moved to skills/targets/cloud_run/render.py (the Cloud Run v2 Service renderer);
this name stays importable while other work moves over."""

from __future__ import annotations

from skills.capacity.image_compat import load_image_data  # noqa: F401 - re-exported
from skills.deploy.profiles import KvDtype  # noqa: F401 - re-exported
from skills.deploy.serving_config import with_tool_calling  # noqa: F401 - re-exported
from skills.deploy.vllm_flags import kv_flag  # noqa: F401 - re-exported
from skills.targets.cloud_run.render import (  # noqa: F401 - re-exported
    ANNOTATION_MODEL,
    ANNOTATION_PROFILE,
    CONTAINER,
    ENTRYPOINT,
    GIB,
    MAX_INITIAL_DELAY_S,
    MAX_PERIOD_S,
    MAX_THRESHOLD_WINDOW_S,
    MOUNT_OPTIONS,
    MOUNT_PATH,
    OFFLINE_ENV,
    OUTPUT_ONLY_FIELDS,
    PORT,
    PROBE_EXTRA_S,
    PROBE_MARGIN,
    VOLUME,
    DeployConfig,
    GpuProfile,
    InvalidInput,
    StartupProbe,
    VllmFlags,
    add_model_volume,
    check_gpu_minimums,
    fix_fuse_mounts,
    fuse_mount_options,
    gcs_mounts,
    gib,
    main_container,
    memory_for_hub_weights,
    probe_for,
    render_service,
    replace_container,
    secret_env_of,
    set_env,
    set_model,
    set_secret_env,
    strip_output_only,
    vllm_args,
    vllm_flags,
)

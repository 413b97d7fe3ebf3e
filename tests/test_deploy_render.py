"""The rendered Cloud Run v2 Service: field-notes rules, probe caps, and that the real client accepts it."""

from __future__ import annotations

import json

import pytest
from google.cloud import run_v2

from skills.errors import InvalidInput
from skills.serving.vllm_flags import VllmFlags
from skills.targets.cloud_run.render import (
    DeployConfig,
    fuse_mount_options,
    probe_for,
    render_service,
    set_model,
)
from skills.targets.serving_flags import with_tool_calling
from tests.deploy_helpers import deploy_config


def _cfg(**kw: object) -> DeployConfig:
    return deploy_config(**kw)


def test_fuse_mount_and_offline_mode() -> None:
    spec = render_service(_cfg())
    c = spec["template"]["containers"][0]
    assert c["args"][:2] == ["--model", "/mnt/models/gemma-4-12b-it-qat-w4a16-ct"]
    assert {"name": "HF_HUB_OFFLINE", "value": "1"} in c["env"]
    gcs = spec["template"]["volumes"][0]["gcs"]
    assert gcs["readOnly"] is True and {"uid=1001", "gid=1001"} <= set(gcs["mountOptions"])
    assert c["resources"]["cpuIdle"] is False and c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert spec["template"]["nodeSelector"] == {"accelerator": "nvidia-l4"}
    assert spec["template"]["gpuZonalRedundancyDisabled"] is True
    for flag in ("--enable-auto-tool-choice", "--enable-chunked-prefill"):
        assert flag in c["args"]
    assert c["args"][c["args"].index("--tool-call-parser") + 1] == "gemma4"
    assert c["args"][c["args"].index("--reasoning-parser") + 1] == "gemma4"
    # The real client library parses it (what the adapter does before sending).
    svc = run_v2.Service.from_json(json.dumps(spec))
    assert svc.template.containers[0].startup_probe.http_get.path == "/health"


def test_hub_pull_uses_secret_and_never_offline() -> None:
    c = render_service(_cfg(model_bucket=None))["template"]["containers"][0]
    assert c["args"][1] == "google/gemma-4-12b-it-qat-w4a16-ct"
    assert all(e["name"] != "HF_HUB_OFFLINE" for e in c["env"])
    token = next(e for e in c["env"] if e["name"] == "HF_TOKEN")
    assert token["valueSource"]["secretKeyRef"]["secret"] == "hf-token" and "value" not in token


@pytest.mark.parametrize("cold", [60.0, 300.0, 760.0, 1500.0, 5000.0])
def test_probe_budget_covers_cold_start_within_cloud_run_caps(cold: float) -> None:
    p = probe_for(cold)
    assert p.initial_delay_s <= 240 and p.period_s <= 240 and p.timeout_s <= p.period_s
    assert p.failure_threshold * p.period_s <= 1800
    assert p.budget_s >= min(cold * 1.5, 2040)


def test_probe_override_beyond_caps_is_refused() -> None:
    with pytest.raises(InvalidInput):
        probe_for(600, failure_threshold=40, period_s=60)


def test_fix_helpers_render_fixed_flags_idempotently() -> None:
    flags = VllmFlags.parse(["--model", "/mnt/models/x", "--tool-call-parser=hermes", "--dtype", "bfloat16"])
    on = with_tool_calling(flags, True).to_args()
    assert on.count("--tool-call-parser") == 1 and on[on.index("--tool-call-parser") + 1] == "gemma4"
    assert "--tool-call-parser=hermes" not in on and "--enable-auto-tool-choice" in on
    assert with_tool_calling(VllmFlags.parse(on), True).to_args() == on
    tool_flags = {"--enable-auto-tool-choice", "--tool-call-parser", "--reasoning-parser"}
    assert not tool_flags & set(with_tool_calling(VllmFlags.parse(on), False).to_args())
    assert flags.with_(dtype="half").to_args()[-2:] == ["--dtype", "half"]
    assert "--dtype" not in flags.with_(dtype="auto").to_args()
    qat = ["--quantization", "compressed-tensors"]
    swapped = set_model(VllmFlags.parse(["--model", "/mnt/models/a", *qat]), "/mnt/models/b", qat, [])
    assert swapped.to_args() == ["--model", "/mnt/models/b"]
    assert set_model(VllmFlags.parse(["--port", "8080"]), "google/m", [], []).to_args()[:2] == ["--model", "google/m"]


def test_fuse_options_force_uid_gid_and_keep_the_rest() -> None:
    fixed = fuse_mount_options(["uid=0", "gid=0", "stat-cache-ttl=60s", "implicit-dirs"])
    assert fixed[:2] == ["uid=1001", "gid=1001"] and "uid=0" not in fixed and "gid=0" not in fixed
    assert "stat-cache-ttl=60s" in fixed and "stat-cache-ttl=3600s" not in fixed  # the operator's choice stays
    assert {"implicit-dirs", "max-conns-per-host=100", "type-cache-ttl=3600s"} <= set(fixed)
    assert fuse_mount_options(fixed) == fixed
    rendered = render_service(_cfg())["template"]["volumes"][0]["gcs"]["mountOptions"]
    assert fuse_mount_options(rendered) == rendered  # a rendered service needs no fix

"""The deploy's self-check finds vLLM's start-up lines that are there (issue 25 item 5).

The lines are vLLM's own, read from the field logs kept in the repo (each file's source is in its manifest):
- tests/data/field_logs_heldout/vllm23230_oom_l40s_load.log (https://github.com/vllm-project/vllm/issues/23230):
  "Model loading took 16.5557 GiB and 2.803817 seconds" (the wording without "memory" that older vLLM prints,
  and that the sandbox writes);
- tests/data/field_logs/healthy_vllm33263_kv_cache_sizing.log (https://github.com/vllm-project/vllm/issues/33263):
  "Available KV cache memory: 18.78 GiB", "GPU KV cache size: 175,856 tokens".
They go through the Cloud Logging stand-in and are read back with the real Logging client; another revision's
lines, and this revision's lines from before the window, must not be picked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.adapters.cloud_logging import CloudLoggingLogs
from bot.sandbox.cloud_logging_api import CloudLoggingStandIn
from bot.settings import Settings
from skills.capacity.startup_check import check_startup
from skills.deploy.plan_builder import build_plan
from skills.targets.cloud_run.serving import serving_of
from skills.targets.cloud_run.target import CloudRunTarget
from skills.targets.env import DeployEnv

pytest_plugins = ["tests.agent_fixtures"]

DATA = Path(__file__).parent / "data"


def _lines(path: str, needle: str) -> list[str]:
    return [line for line in (DATA / path).read_text().splitlines() if needle in line]


def _entry(project: str, revision: str, text: str, at: datetime) -> dict[str, Any]:
    return {
        "timestamp": at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "severity": "INFO",
        "textPayload": text,
        "logName": f"projects/{project}/logs/run.googleapis.com%2Fstderr",
        "resource": {
            "type": "cloud_run_revision",
            "labels": {"service_name": "vllm-gemma4", "revision_name": revision},
        },
    }


async def test_start_up_lines_are_found_by_revision_and_time_window(
    settings: Settings, logging_api: CloudLoggingStandIn, redis_client: Any
) -> None:
    loading = _lines("field_logs_heldout/vllm23230_oom_l40s_load.log", "Model loading took")
    kv = _lines("field_logs/healthy_vllm33263_kv_cache_sizing.log", "KV cache")
    assert loading and len(kv) == 2  # the real lines are where the sources say
    now = datetime.now(UTC)
    project = settings.google_cloud_project or "test-proj"
    other = [t.replace("175,856", "999,999").replace("16.5557", "1.0000") for t in loading + kv]
    logging_api.entries += [_entry(project, "vllm-gemma4-00002-abc", t, now - timedelta(hours=3)) for t in other]
    logging_api.entries += [_entry(project, "vllm-gemma4-00001-old", t, now) for t in other]
    logging_api.entries += [_entry(project, "vllm-gemma4-00002-abc", t, now) for t in loading + kv]

    env = DeployEnv(service="vllm-gemma4", region="us-central1")
    plan = await build_plan("deploy", {"profile": "gemma4-12b-qat-l4"}, CloudRunTarget(_Nothing()), env)  # type: ignore[arg-type]
    assert plan.spec is not None
    s = settings.model_copy(update={"cloud_logging_api_endpoint": logging_api.base_url})  # type: ignore[attr-defined]
    check = await check_startup(
        CloudLoggingLogs(s),
        redis_client,
        s.key("startup"),
        "vllm-gemma4",
        serving_of(plan.spec),
        "vllm-gemma4-00002-abc",
        now - timedelta(minutes=5),
    )
    assert check is not None
    assert check.missing == "", check.missing
    assert check.figures.weights_gib == 16.5557 and check.figures.load_s == 2.803817
    assert check.figures.kv_cache_tokens == 175_856 and check.figures.kv_cache_gib == 18.78
    assert any("vLLM 175,856 tokens" in line for line in check.predicted)


class _Nothing:
    async def get_service_spec(self, name: str) -> dict[str, Any] | None:
        return None


async def test_reading_logs_never_asks_the_metadata_server(
    settings: Settings, logging_api: CloudLoggingStandIn, monkeypatch: Any
) -> None:
    """google-cloud-logging makes a Logger per log name while parsing listed entries, and a Logger without a
    resource asks metadata.google.internal where it runs (5 s timeouts off Google Cloud: each `/gemma logs`,
    diagnose and deploy watch paid it). The library's lookup is made to fail loudly here."""
    import google.cloud.logging_v2.logger as gl

    def no_lookup(*_: object, **__: object) -> None:
        raise AssertionError("asked the GCE metadata server")

    monkeypatch.setattr(gl, "detect_resource", no_lookup)
    now = datetime.now(UTC)
    logging_api.entries += [_entry(settings.google_cloud_project or "test-proj", "r-1", "hello", now)]
    s = settings.model_copy(update={"cloud_logging_api_endpoint": logging_api.base_url})  # type: ignore[attr-defined]
    from skills.ports import LogQuery

    batch = await CloudLoggingLogs(s).fetch(LogQuery(service="vllm-gemma4", since=now - timedelta(minutes=5)))
    assert [e.text for e in batch.entries] == ["hello"]

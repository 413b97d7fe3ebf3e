"""A failed deploy reports the revision's condition AND the first error log lines of that revision, read
through the real google-cloud-logging client from the Logging stand-in (redacted)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.sandbox.cloud_logging_api import CloudLoggingStandIn
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.server import serve
from bot.settings import Settings
from bot.wiring import build_deps, close_deps
from handlers.reply import CONFIRM_ACTION
from tests.deploy_helpers import click, command, plan_id_of

HF = "hf_" + "ZyXwVuTsRqPoNmLkJiHgFeDcBa987654"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.62 GiB. GPU 0 has a total capacity of 22.05 GiB"


@pytest.fixture
def logging_api() -> Iterator[CloudLoggingStandIn]:
    standin = CloudLoggingStandIn()
    with serve(standin.app()) as url:
        standin.base_url = url  # type: ignore[attr-defined]
        yield standin


def _entry(revision: str, text: str, severity: str) -> dict[str, Any]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "insertId": f"{time.monotonic_ns()}",
        "logName": "projects/test-proj/logs/run.googleapis.com%2Fstderr",
        "resource": {
            "type": "cloud_run_revision",
            "labels": {"service_name": "vllm-gemma4", "revision_name": revision, "project_id": "test-proj"},
        },
        "timestamp": now,
        "severity": severity,
        "textPayload": text,
    }


def _log_when_revision_appears(cloud_run: CloudRunStandIn, logs: CloudLoggingStandIn, stop: threading.Event) -> None:
    """The new revision's name is only known once Cloud Run creates it: its container then logs."""
    seen = len(cloud_run.revisions.get("vllm-gemma4", []))
    while not stop.is_set():
        revs = cloud_run.revisions.get("vllm-gemma4", [])
        if len(revs) > seen:
            name = revs[-1]["name"].rsplit("/", 1)[-1]
            logs.entries.extend(
                [
                    _entry(name, "INFO 11-21 loading weights from /mnt/models", "INFO"),
                    _entry(name, OOM, "ERROR"),
                    _entry(name, f"RuntimeError: Engine core initialization failed (token {HF})", "ERROR"),
                ]
            )
            return
        time.sleep(0.005)


async def test_failed_deploy_shows_condition_and_first_error_lines(
    settings: Settings, redis_client: Any, cloud_run: CloudRunStandIn, logging_api: CloudLoggingStandIn
) -> None:
    deps = build_deps(
        settings.model_copy(
            update={"deploy_poll_s": 0.01, "cloud_logging_api_endpoint": logging_api.base_url}  # type: ignore[attr-defined]
        )
    )
    cloud_run.seed_service("vllm-gemma4")
    cloud_run.next_revision_outcome = "probe_failed"
    cloud_run.op_polls = 40  # the revision exists for a while before its probe is declared failed
    stop = threading.Event()
    watcher = threading.Thread(target=_log_when_revision_appears, args=(cloud_run, logging_api, stop), daemon=True)
    watcher.start()
    try:
        reply, _ = await command(deps, "deploy gemma4-12b-qat-l4 --max-model-len 8192")
        assert reply is not None
        _, responder = await click(deps, CONFIRM_ACTION, plan_id_of(reply))
    finally:
        stop.set()
        watcher.join(timeout=5)
        await close_deps(deps)
    final = responder.updates[-1][1]
    body = "\n".join(filter(None, [*(s.text for s in final.sections), *(s.code for s in final.sections)]))
    assert final.title.startswith(":x:")
    assert "failed the configured startup probe" in body  # the condition
    assert "CUDA out of memory" in body  # the first error log line of that revision
    assert "Engine core initialization failed" in body
    assert HF not in body and "loading weights" not in body  # redacted; INFO lines are not errors
    assert any("revision_name" in f for f in logging_api.filters)

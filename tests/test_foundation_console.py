"""The console and the CLI, driven as a user would: a subprocess with stdin, environment and exit codes."""

from __future__ import annotations

import os
import subprocess
import sys

from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.model_server import ModelServerStandIn


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "SLACK_", "REDIS_", "VLLM_"))}
    # No ambient credentials, and never reach for the GCE metadata server from a test.
    env |= {
        "NO_GCE_CHECK": "true",
        "GCE_METADATA_HOST": "127.0.0.1:9",
        "GCE_METADATA_IP": "127.0.0.1:9",
        "CLOUDSDK_CONFIG": "/nonexistent-gcloud-config",
        "PYTHONUNBUFFERED": "1",
    }
    return env | extra


def _console(stdin: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", "console"],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_console_status_against_standins(cloud_run: CloudRunStandIn, model_server: ModelServerStandIn) -> None:
    cloud_run.seed_service("vllm-gemma4", min_instances=1, max_instances=3)
    env = _env(
        GOOGLE_CLOUD_PROJECT="test-proj",
        GOOGLE_ANONYMOUS_CREDENTIALS="true",
        CLOUD_RUN_API_ENDPOINT=cloud_run.base_url,  # type: ignore[attr-defined]
        VLLM_BASE_URL=model_server.base_url,  # type: ignore[attr-defined]
    )
    result = _console("/gemma status\nquit\n", env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "vllm-gemma4: ready" in out
    assert "min 1 / max 3" in out
    assert "google/gemma-4-12b-it" in out


def test_console_on_embedded_defaults_says_what_to_set() -> None:
    # No REDIS_URL (in-process store), Google credentials configured but unusable: cloud commands explain,
    # others work. (With no credentials at all the console starts in the sandbox: tests/test_sandbox_console.py.)
    env = _env(GOOGLE_APPLICATION_CREDENTIALS="/nonexistent/key.json")
    result = _console("help\n/gemma status\n/gemma nosuch\n/gemma config gemma4-12b-qat-l4\n", env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # A profile renders without any cloud: the Service and its gcloud equivalent, marked as not compared.
    assert "--tool-call-parser,gemma4" in out and "Not compared with the running service" in out
    assert "/gemma status" in out  # help
    assert "GOOGLE_CLOUD_PROJECT" in out  # what to set
    assert "Unknown command `nosuch`" in out
    assert "Traceback" not in out + result.stderr


def test_serve_with_missing_settings_names_every_problem() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli", "serve"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(STATUS_CACHE_TTL_S="-5", LOG_LEVEL="LOUD"),
    )
    assert result.returncode == 2
    err = result.stderr
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "REDIS_URL", "STATUS_CACHE_TTL_S", "LOG_LEVEL"):
        assert name in err, f"{name} missing from: {err}"


def test_console_write_flow_plan_confirm_and_destroy_modal(cloud_run: CloudRunStandIn) -> None:
    # The same plan -> Confirm -> role check -> lock -> audit path as Slack; the destroy modal asks on stdin.
    cloud_run.seed_service("vllm-gemma4", min_instances=0, max_instances=1)
    env = _env(
        GOOGLE_CLOUD_PROJECT="test-proj",
        GOOGLE_ANONYMOUS_CREDENTIALS="true",
        CLOUD_RUN_API_ENDPOINT=cloud_run.base_url,  # type: ignore[attr-defined]
        DEPLOYER_USER_IDS="console",
        DEPLOY_POLL_S="0.05",
    )
    script = "\n".join(
        [
            "/gemma scale 1 2",
            "click confirm",
            "/gemma destroy",
            "click destroy",
            "not-the-service",  # typed into the modal: refused
            "/gemma destroy",
            "click destroy",
            "vllm-gemma4",
            "/gemma audit",
            "quit",
        ]
    )
    result = _console(script + "\n", env)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert cloud_run.services == {}, "the confirmed destroy did not delete the service"
    audit = result.stdout.rsplit("audit", 1)[-1]
    assert "scale" in audit and "destroy" in audit
    assert any(r[0] == "PATCH" for r in cloud_run.requests), "scale was never applied"

"""`./dev console` from a bare clone with no credentials: the sandbox, driven as a user would (a subprocess
with stdin). The clock runs fast (SANDBOX_SPEED) so cold starts of minutes take a moment; nothing sleeps."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from bot.sandbox.cloud import BANNER
from bot.sandbox.openai_script import OpenAIScript, say
from bot.sandbox.server import serve
from tests.conftest import REDIS_URL


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "SLACK_", "REDIS_", "VLLM_"))}
    env |= {
        "NO_GCE_CHECK": "true",
        "GCE_METADATA_HOST": "127.0.0.1:9",
        "GCE_METADATA_IP": "127.0.0.1:9",
        "CLOUDSDK_CONFIG": "/nonexistent-gcloud-config",  # no application-default credentials
        "PYTHONUNBUFFERED": "1",
        "SANDBOX_SPEED": "5000",
        "DEPLOY_POLL_S": "0.2",
    }
    return env | extra


def _console(stdin: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", "console", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )


def test_bare_console_runs_the_whole_job_in_the_sandbox() -> None:
    script = "\n".join(
        [
            "/gemma status",
            "/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384",
            "click Confirm",
            "/gemma sandbox",
            "/gemma sandbox kv-cache-too-small",
            "/gemma diagnose",
            "click Plan redeploy: max_model_len",
            "click Confirm",
            "/gemma logs --severity ERROR",
            "/gemma sandbox queue-saturation",
            "/gemma metrics",
            "/gemma ask why is it slow?",
            "quit",
        ]
    )
    result = _console(script + "\n", _env())
    out, err = result.stdout, result.stderr
    assert result.returncode == 0, err
    assert out.splitlines()[0] == BANNER
    assert "vllm-gemma4: ready" in out  # the seeded service, through the real Cloud Run client
    assert "Served models  `google/gemma-4-12B-it-qat-w4a16-ct`" in out  # the vLLM simulator behind its URL
    # deploy -> Confirm -> phases -> ready
    assert "deploy `vllm-gemma4`: revision created" in out
    assert "deploy `vllm-gemma4`: ready" in out
    # a hand-made deploy that does not fit fails with vLLM's lines; the alert opens an incident thread
    assert "FIRING: vLLM revision failed to start on vllm-gemma4" in out
    assert "  | vllm-gemma4: 1 finding(s)" in out
    found = re.search(r"KV cache too small for --max-model-len \(131072 requested, (\d+) fits\)", out)
    assert found, out
    assert "ValueError: To serve at least one request with the models's max seq len (131072)" in out
    # ... and the fix, planned from its button and confirmed, recovers
    assert f"Plan: Redeploy `vllm-gemma4` with max_model_len={found.group(1)}" in out
    assert "redeploy `vllm-gemma4`: ready" in out
    assert "EngineCore failed to start." in out  # /gemma logs
    # load: /gemma metrics moves
    assert "Running / waiting              8 / 19" in out
    assert "KV cache 97% full" in out
    # no model for the agent: says what to set; nothing crashed
    assert "The sandbox has no model to think with" in out and "VLLM_BASE_URL" in out
    assert "Traceback" not in err and "failed unexpectedly" not in out


def test_scenarios_that_fail_at_start_each_open_a_thread_with_their_finding(
    key_prefix: str, redis_client: object
) -> None:
    # State in the real Redis this time (REDIS_URL works in the sandbox too).
    script = "/gemma sandbox probe-too-short\n/gemma sandbox fuse-permission\n/gemma sandbox gated-model\nquit\n"
    env = _env(ALERT_GROUP_WINDOW_S="0", REDIS_URL=REDIS_URL, KEY_PREFIX=key_prefix)
    result = _console(script, env)
    out = result.stdout
    assert result.returncode == 0, result.stderr
    for kind in ("startup_probe_timeout", "gcs_fuse_permission_denied", "hf_auth_failed"):
        assert f"failed ({kind}); Cloud Monitoring alerts" in out, kind
        assert f"`{kind}`" in out, kind
    assert out.count("FIRING: vLLM revision failed to start") >= 3


def test_real_credentials_mean_the_real_project_and_sandbox_forces_it() -> None:
    # Credentials configured (but unusable here): no sandbox, and the cloud commands say what is wrong.
    env = _env(GOOGLE_APPLICATION_CREDENTIALS="/nonexistent/key.json")
    result = _console("/gemma status\nquit\n", env)
    assert BANNER not in result.stdout
    assert "GOOGLE_CLOUD_PROJECT" in result.stdout
    forced = _console("/gemma status\nquit\n", env, "--sandbox")
    assert forced.stdout.splitlines()[0] == BANNER
    assert "vllm-gemma4: ready" in forced.stdout


def test_bench_measures_the_simulated_model_and_metrics_move() -> None:
    bench = "/gemma bench --concurrency 1,4 --context 64 --output 16 --requests 8"
    result = _console(f"{bench}\nclick Run benchmark\n/gemma metrics\nquit\n", _env())
    out = result.stdout
    assert result.returncode == 0, result.stderr
    assert "Benchmark" in out and "done; results in the thread" in out
    assert "End to end           p50" in out  # the simulator counted the sweep


def test_the_agent_uses_vllm_base_url_while_the_deployed_model_stays_simulated() -> None:
    script = OpenAIScript(say("Nothing is queueing; the KV cache has room."))
    with serve(script.app) as url:
        result = _console("/gemma ask is it healthy?\n/gemma status\nquit\n", _env(VLLM_BASE_URL=url))
    out = result.stdout
    assert result.returncode == 0, result.stderr
    assert "Nothing is queueing; the KV cache has room." in out
    assert script.chat_requests  # the agent asked the server we named
    assert "vllm-gemma4: ready" in out and f"URL           {url}" not in out  # status: the simulated service

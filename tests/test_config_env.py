"""Settings as a new user meets them: `.env` read when present, `.env.example` valid for both dotenv and
`docker run --env-file`, secrets stripped of whitespace, a malformed setting reported (not a traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dotenv import dotenv_values

from bot.settings import Settings, SettingsError, load_settings

ROOT = Path(__file__).resolve().parent.parent


def docker_env_file(text: str) -> dict[str, str]:
    """`docker run --env-file` rules (docker/cli opts/envfile.go; docs.docker.com `docker run --env-file`):
    one VAR=VAL per line, lines starting with # and blank lines skipped, leading whitespace trimmed, the value
    taken literally up to the end of the line (no quote removal, no inline comments: docker/cli issues #3630
    and #4665 show quotes kept as part of the value)."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.lstrip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        assert sep, f"docker needs VAR=VAL (a bare name reads the host's value): {raw!r}"
        assert name and " " not in name, f"bad variable name in {raw!r}"
        out[name] = value
    return out


def test_env_example_means_the_same_to_dotenv_and_docker() -> None:
    text = (ROOT / ".env.example").read_text()
    dotenv = {k: v or "" for k, v in dotenv_values(ROOT / ".env.example").items()}
    docker = docker_env_file(text)
    assert dotenv == docker
    for name, value in docker.items():
        assert " #" not in value and "\t#" not in value, f"{name}: inline comment would become part of the value"
        assert value == value.strip(), f"{name}: surrounding whitespace"
    # Every setting is listed, and every listed name is a setting.
    fields = {name.upper() for name in Settings.model_fields}
    assert set(docker) == fields


def test_env_example_loads_as_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)
    (tmp_path / ".env").write_text((ROOT / ".env.example").read_text())
    monkeypatch.chdir(tmp_path)
    s = load_settings()
    assert s.slack_alerts_channel == "#gemma-alerts"
    assert s.deployers == frozenset()  # placeholders are comments: nothing points at someone else's ids
    assert not s.redis_url and not s.google_cloud_project and not s.slack_bot_token
    assert s.slack_app_token is None  # empty means unset


def test_dot_env_is_read_and_real_env_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VLLM_SERVICE_NAME", raising=False)
    monkeypatch.setenv("KEY_PREFIX", "from-env")
    (tmp_path / ".env").write_text("VLLM_SERVICE_NAME=from-dotenv\nKEY_PREFIX=from-dotenv\n")
    s = load_settings()
    assert s.vllm_service_name == "from-dotenv"
    assert s.key_prefix == "from-env"


def test_secrets_are_stripped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-123\n")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "  abc\r\n")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1-A\n")
    monkeypatch.setenv("ALERT_WEBHOOK_TOKEN", "tok \n")
    s = load_settings()
    assert s.slack_bot_token is not None and s.slack_bot_token.get_secret_value() == "xoxb-123"
    assert s.slack_signing_secret is not None and s.slack_signing_secret.get_secret_value() == "abc"
    assert s.slack_app_token is not None and s.slack_app_token.get_secret_value() == "xapp-1-A"
    assert s.alert_webhook_token is not None and s.alert_webhook_token.get_secret_value() == "tok"


def test_every_malformed_setting_in_one_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SettingsError) as info:
        load_settings(
            redis_url="10.0.0.3:6379",
            slack_app_token="xoxb-wrong-kind",
            alert_pubsub_subscription="projects/p/topics/t",
            port=0,
        )
    msg = str(info.value)
    for name in ("REDIS_URL", "SLACK_APP_TOKEN", "ALERT_PUBSUB_SUBSCRIPTION", "PORT"):
        assert name in msg
    assert "not a Redis URL" in msg and "Value error" not in msg


def test_serve_reports_every_problem_without_a_traceback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k.upper() not in {n.upper() for n in Settings.model_fields}}
    env.update(REDIS_URL="localhost:6379", SLACK_BOT_TOKEN="xoxb-1", PYTHONPATH=str(ROOT))
    run = subprocess.run(
        [sys.executable, "-m", "bot.cli", "serve"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert "REDIS_URL" in run.stderr and "not a Redis URL" in run.stderr
    assert "SLACK_SIGNING_SECRET" in run.stderr  # the other problem, in the same message
    assert run.stderr.count("cannot start") == 1


def test_socket_mode_needs_no_signing_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    s = load_settings(slack_bot_token="xoxb-1", slack_app_token="xapp-1", redis_url="redis://r:6379/0")
    assert s.serve_problems() == []
    s = load_settings(slack_bot_token="xoxb-1", redis_url="redis://r:6379/0")
    assert any("SLACK_SIGNING_SECRET" in p for p in s.serve_problems())


def test_a_dot_env_copied_from_the_example_keeps_the_sandbox(tmp_path: Path) -> None:
    """README: `cp .env.example .env`. Until the user fills in a project (and Slack, Redis), the console still
    runs on the sandbox: placeholders are comments, so none of them points at a project or a Redis that is not
    there."""
    (tmp_path / ".env").write_text((ROOT / ".env.example").read_text())
    env = {k: v for k, v in os.environ.items() if k.upper() not in {n.upper() for n in Settings.model_fields}}
    env.update(
        PYTHONPATH=str(ROOT),
        CLOUDSDK_CONFIG=str(tmp_path / "no-gcloud"),  # no application-default credentials
        GOOGLE_APPLICATION_CREDENTIALS="",
        NO_GCE_CHECK="true",
        GCE_METADATA_HOST="127.0.0.1:9",
        SANDBOX_SPEED="5000",
    )
    env.pop("GOOGLE_APPLICATION_CREDENTIALS")
    run = subprocess.run(
        [sys.executable, "-m", "bot.cli", "console"],
        cwd=tmp_path,
        env=env,
        input="/gemma status\nquit\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    from bot.sandbox.cloud import BANNER

    assert run.stdout.splitlines()[:1] == [BANNER], run.stdout + run.stderr
    assert "vllm-gemma4: ready" in run.stdout
    assert "error id" not in run.stdout

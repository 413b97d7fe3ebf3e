"""Tests reach nothing beyond 127.0.0.1: every remote the test settings name is a local stand-in, or unset where
unset means the feature is off. A remote left at its default (e.g. logging.googleapis.com) once made the deploy
tests try the real Cloud Logging and wait out its retries."""

from __future__ import annotations

from urllib.parse import urlsplit

from bot.settings import Settings

# Unset is the production default only where that default is "off" (no Monitoring client is built without an
# endpoint and credentials).
MAY_BE_UNSET = {"cloud_monitoring_api_endpoint"}
# The Azure Container Apps target is not built without AZURE_SUBSCRIPTION_ID (bot/wiring.py aca_wired), so its
# remotes are off in the test settings; the sandbox wires its stand-ins itself (bot/sandbox/aca_world.py). The Key
# Vault URL is not called by the bot at all: the app's identity reads it.
AZURE_OFF = {"azure_resource_manager_endpoint", "aca_log_analytics_endpoint", "aca_api_key_secret_url"}


def _remotes(settings: Settings) -> dict[str, str | None]:
    return {
        name: getattr(settings, name) for name in type(settings).model_fields if name.endswith(("_endpoint", "_url"))
    }


def test_every_remote_in_the_test_settings_is_local(settings: Settings) -> None:
    remotes = _remotes(settings)
    assert "cloud_logging_api_endpoint" in remotes and "slack_api_url" in remotes  # the walk sees them
    assert not settings.azure_subscription_id  # so the Azure remotes below are off
    for name, value in remotes.items():
        if not value:
            assert name in MAY_BE_UNSET | AZURE_OFF, f"{name} is unset: the client would use a default remote host"
            continue
        host = urlsplit(value if "//" in value else "//" + value).hostname
        assert host in {"127.0.0.1", "localhost"}, f"{name}={value} is not on this machine"

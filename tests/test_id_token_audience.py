"""The audience of the ID token the bot sends to a private Cloud Run URL (its vLLM service, or a canary's tag)."""

from __future__ import annotations

import pytest

from bot.adapters.google_auth import audience_for


@pytest.mark.parametrize(
    ("url", "audience"),
    [
        ("https://vllm-gemma4-abc123-uc.a.run.app/v1/models", "https://vllm-gemma4-abc123-uc.a.run.app"),
        ("https://vllm-gemma4-abc123-uc.a.run.app", "https://vllm-gemma4-abc123-uc.a.run.app"),
        # a revision tag's URL takes its service's token: the service URL is always an accepted audience
        ("https://canary---vllm-gemma4-abc123-uc.a.run.app/metrics", "https://vllm-gemma4-abc123-uc.a.run.app"),
        (
            "https://stable---vllm-gemma4-123456789.us-central1.run.app/health",
            "https://vllm-gemma4-123456789.us-central1.run.app",
        ),
        # not Cloud Run: the origin as it is
        ("https://models.example.com/v1/chat/completions", "https://models.example.com"),
        ("https://a---b.example.com/x", "https://a---b.example.com"),
    ],
)
def test_the_audience_is_the_service_url(url: str, audience: str) -> None:
    assert audience_for(url) == audience

"""Only secrets are redacted: a boolean or null after a secret name is a setting, not a credential
(`hf_token_from_secret=True` showed as `[REDACTED:secret]` in the audit), and a number under a name that only
mentions a secret (`api_key_count=2`) is a count; a number under a secret name (an API key, a PIN) stays masked."""

from __future__ import annotations

import pytest

from skills.logs.redact import redact, redact_obj


@pytest.mark.parametrize(
    "text",
    [
        "hf_token_from_secret=True",
        "redeploy (hf_token_from_secret=True, max_model_len=8192)",
        '"hf_token_from_secret": false',
        "api_key_count=2",
        "secret_version: 3",
        "auth_token_ttl_s=3600",
        "session_key=None",
        "gpu_memory_utilization=0.9 api_key=null",
    ],
)
def test_booleans_nulls_and_numbers_are_kept(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("password=123456", "123456"),  # a password may be all digits
        ("api_key=12345678", "12345678"),
        ("password=hunter2", "hunter2"),
        ("api_key=sk-abcdefghijklmnopqrstuvwxyz1234", "sk-abcdef"),
        ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz12", "hf_abcdef"),
    ],
)
def test_secrets_are_still_redacted(text: str, kept: str) -> None:
    out = redact(text)
    assert "[REDACTED:" in out and kept not in out


def test_json_values() -> None:
    out = redact_obj(
        {
            "hf_token_from_secret": True,
            "api_key_count": 7,
            "password": 1234,
            "bot_token": "xoxb-1-abc",
            "x_api_key": None,
        }
    )
    assert out["hf_token_from_secret"] is True and out["api_key_count"] == 7 and out["x_api_key"] is None
    assert out["password"] == "[REDACTED:secret]" and out["bot_token"].startswith("[REDACTED")

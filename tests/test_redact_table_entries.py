"""Every entry of the redaction tables does its own work: each token prefix, each command that takes a password
flag and each key-name trigger has an example here that only that entry catches (bench/mutation.py drops table
entries one at a time, and a dropped entry must fail a test, not slip through because another rule happens to
catch the same line).

The lists are written out here, not read from skills/logs/redact.py, so a table that loses an entry disagrees
with them. The values are made up in each vendor's documented shape: AKIAIOSFODNN7EXAMPLE is AWS's own example
access key id (IAM user guide, "Managing access keys"), the JWT is jwt.io's example token, the Slack webhook URL is
the shape of Slack's "Sending messages using incoming webhooks" page; the rest follow each vendor's token-format
notes (Hugging Face `hf_`/`api_org_`, Slack `xox?-`/`xapp-`, GitHub `ghp_`… and `github_pat_`, OpenAI `sk-`,
Groq `gsk_`, GitLab `glpat-`, npm `npm_`, PyPI `pypi-AgE…` macaroons, Stripe `sk_live_`/`rk_test_`,
DigitalOcean `dop_v1_`, xAI `xai-`, SendGrid `SG.`, Google `AIza`/`ya29.`/`1//0`/`GOCSPX-`).
"""

from __future__ import annotations

import pytest

from skills.logs.redact import redact

SECRET = "hunter2Secret"

# (prefix, a line holding one such token, the kind its marker names)
TOKENS = [
    ("hf_", "token=hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "hf_token"),
    ("api_org_", "org api_org_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "hf_token"),
    ("xox", "slack xoxb-1234567890-0987654321-AbCdEfGhIjKl", "slack_token"),
    ("xapp-", "slack xapp-1-A0123456789-1234567890-abcdef0123456789", "slack_token"),
    ("ghp_", "gh ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "github_token"),
    ("gho_", "gh gho_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "github_token"),
    ("ghu_", "gh ghu_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "github_token"),
    ("ghs_", "gh ghs_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "github_token"),
    ("ghr_", "gh ghr_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "github_token"),
    (
        "github_pat_",
        "gh github_pat_11ABCDEFG0123456789_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefghij",
        "github_token",
    ),
    ("AKIA", "aws AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
    ("ASIA", "aws ASIAIOSFODNN7EXAMPLE", "aws_access_key"),
    ("sk-", "openai sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd", "openai_key"),
    ("gsk_", "groq gsk_AbCdEfGhIjKlMnOpQrStUvWxYz0123", "vendor_key"),
    ("glpat-", "gitlab glpat-AbCdEfGhIjKlMnOpQrSt", "vendor_key"),
    ("npm_", "npm npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "vendor_key"),
    ("pypi-", "pypi pypi-AgEIcHlwaS5vcmcCJGY0ZjE5YjY0LWFkYzEtNDZkNy1iZmY5LWQ0ZTVmYjk2NjU4MAACKlsz", "vendor_key"),
    ("k_live_", "stripe sk_live_AbCdEfGhIjKlMnOpQrStUvWx", "vendor_key"),
    ("k_test_", "stripe rk_test_AbCdEfGhIjKlMnOpQrStUvWx", "vendor_key"),
    ("dop_v1_", "do dop_v1_" + "ab12" * 16, "vendor_key"),
    ("xai-", "xai xai-" + "AbCd" * 11, "vendor_key"),
    ("SG.", "sendgrid SG.AbCdEfGhIjKlMnOpQr.StUvWxYz0123456789", "vendor_key"),
    (
        "eyJ",
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "jwt",
    ),
    ("AIza", "key AIzaSyA1234567890abcdefghijklmnopqrstuv", "google_api_key"),
    ("ya29.", "oauth ya29.a0AfH6SMBx1234567890abcdefghijkl", "google_oauth_token"),
    ("1//0", "refresh 1//0gAbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "google_refresh_token"),
    ("GOCSPX-", "cs GOCSPX-AbCdEfGhIjKlMnOpQrStUvWx", "google_client_secret"),
    (
        "hooks.slack",
        "hook https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "slack_webhook",
    ),
]


@pytest.mark.parametrize(("prefix", "line", "kind"), TOKENS, ids=[t[0] for t in TOKENS])
def test_each_token_prefix_is_masked_as_its_own_kind(prefix: str, line: str, kind: str) -> None:
    out = redact(line)
    assert f"[REDACTED:{kind}]" in out, out
    assert line.split(" ", 1)[-1].split("=", 1)[-1] not in out


# Commands whose short flag carries a password only for them (`-p` is a port elsewhere).
COMMANDS = [
    f"mysql -u root -p{SECRET} appdb",
    f"mariadb -u root -p{SECRET} appdb",
    f"sshpass -p {SECRET} ssh deploy@10.0.0.5",
    f"redis-cli -h 10.0.0.3 -a {SECRET} ping",
    f"docker login -u deploy -p {SECRET} registry.example.com",
    f"curl -u deploy:{SECRET} https://example.com/api",
    f"wget -U deploy:{SECRET} https://example.com/file",
    f"helm repo add charts https://charts.example.com --user deploy:{SECRET}",
]


@pytest.mark.parametrize("line", COMMANDS, ids=[c.split()[0] if c[0] != "h" else "--user" for c in COMMANDS])
def test_each_command_password_flag_is_masked(line: str) -> None:
    out = redact(line)
    assert SECRET not in out and "[REDACTED:cli_flag]" in out, out


# One key name per trigger word of the key/value rule, holding no other trigger word.
KEYS = [
    f"password={SECRET}",
    f"pwd={SECRET}",
    f"client_secret={SECRET}",
    f"api_key={SECRET}",
    f"access_token={SECRET}",
    "auth=Zx8Qm2Lp9Rt4Vw7Yb3Nc6Df1",
    f"credentials={SECRET}",
    "sessionid=Zx8Qm2Lp9Rt4Vw7Yb3Nc6Df1",
    "sig=Zx8Qm2Lp9Rt4Vw7Yb3Nc6Df1Zx8Qm2Lp9Rt4",
]


@pytest.mark.parametrize("line", KEYS, ids=[k.split("=")[0] for k in KEYS])
def test_each_key_name_trigger_masks_its_value(line: str) -> None:
    name, value = line.split("=", 1)
    assert redact(line) == f"{name}=[REDACTED:secret]", value

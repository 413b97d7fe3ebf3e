"""A seeded corpus of synthetic secrets, shaped like the real formats, placed in log entries as they occur.

Every value is generated here from a seeded RNG; none is real. Formats and where they are documented:
- Google API key `AIza` + 35 of [A-Za-z0-9_-]: https://cloud.google.com/docs/authentication/api-keys
- Google OAuth access token `ya29.`, refresh token `1//0`, client secret `GOCSPX-`:
  https://developers.google.com/identity/protocols/oauth2 (token responses), OAuth client JSON downloads
- Hugging Face user access token `hf_` + 34 alphanumerics: https://huggingface.co/docs/hub/security-tokens
- Slack tokens `xoxb-` (bot), `xapp-` (app-level), incoming webhook URLs hooks.slack.com/services/T/B/secret:
  https://docs.slack.dev/authentication/tokens, https://docs.slack.dev/messaging/sending-messages-using-incoming-webhooks
- GitHub token `ghp_` + 36: https://github.blog/2021-04-05-behind-githubs-new-authentication-token-formats/
- AWS access key id `AKIA` + 16 of [A-Z0-9]: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html
- OpenAI-style project key `sk-proj-`: https://platform.openai.com/docs/api-reference/authentication
- JWT (three base64url parts, `eyJ` headers): RFC 7519; PEM private keys: RFC 7468 (64-column base64 body)
- URL credentials `scheme://user:password@host` (RFC 3986 userinfo); `redis://:password@host` with an empty
  user is redis-py's URL form for AUTH (https://redis.readthedocs.io/en/stable/connections.html, from_url)
- vLLM `--api-key KEY` server flag ("If provided, the server will require this key to be presented in the
  header", vLLM serve arguments) and its start-up echo of non-default args `'api_key': ['KEY']`
- `token=` + 32 hex (md5-length session/API tokens), `Cookie: session=...` (RFC 6265), HTTP Basic (RFC 7617)
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "_-"
SERVICE = "vllm-gemma4"
PROJECT = "test-proj"


@dataclass
class Corpus:
    secrets: list[tuple[str, str]] = field(default_factory=list)  # (kind, value)
    entries: list[dict[str, Any]] = field(default_factory=list)  # Cloud Logging REST entries, in time order
    plain: list[str] = field(default_factory=list)  # the same log as plain text lines

    @property
    def kinds(self) -> set[str]:
        return {k for k, _ in self.secrets}

    def leaks(self, text: str) -> list[tuple[str, str]]:
        """Every secret found in `text`, whole or in part: any run of 10+ letters/digits from it counts, so
        a template that keeps a token's tail (`xoxb-<*>-<*>-nZtQ...`) is a leak too."""
        found = []
        for kind, value in self.secrets:
            runs = [r for r in re.split(r"[^A-Za-z0-9]+", value) if len(r) >= 10]
            if value in text or any(r in text for r in runs):
                found.append((kind, value[:40]))
        return found


def _r(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _pem(rng: random.Random) -> str:
    body = base64.b64encode(rng.randbytes(600)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END PRIVATE KEY-----"


def _secret_lines(rng: random.Random) -> list[tuple[str, str, str]]:
    """(kind, secret, one log line carrying it) for one round of every kind."""
    k = "AIza" + _r(rng, 35, URLSAFE)
    ya = "ya29.a0" + _r(rng, 80, URLSAFE)
    rt = "1//0" + _r(rng, 2, string.ascii_lowercase) + _r(rng, 60, URLSAFE)
    cs = "GOCSPX-" + _r(rng, 28, URLSAFE)
    hf = "hf_" + _r(rng, 34)
    xb = f"xoxb-{rng.randrange(10**11, 10**12)}-{rng.randrange(10**12, 10**13)}-{_r(rng, 24)}"
    app_id = _r(rng, 10, string.ascii_uppercase + string.digits)
    xa = f"xapp-1-A{app_id}-{rng.randrange(10**12, 10**13)}-{_r(rng, 64, '0123456789abcdef')}"
    wh = f"T{_r(rng, 8, string.ascii_uppercase)}/B{_r(rng, 8, string.ascii_uppercase)}/{_r(rng, 24)}"
    gh = "ghp_" + _r(rng, 36)
    ak = "AKIA" + _r(rng, 16, string.ascii_uppercase + string.digits)
    sk = "sk-proj-" + _r(rng, 48, URLSAFE)
    jwt = ".".join(
        [
            "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9",
            "eyJ" + _r(rng, 60, URLSAFE),
            _r(rng, 43, URLSAFE),
        ]
    )
    pw = _r(rng, 16, ALNUM + "!%^*~")
    rp = _r(rng, 20)
    vk = _r(rng, 28)
    ve = "token-" + _r(rng, 24)
    hx = _r(rng, 32, "0123456789abcdef")
    ck = _r(rng, 40, URLSAFE)
    ba = base64.b64encode(f"admin:{_r(rng, 14)}".encode()).decode()
    kv = _r(rng, 14)
    return [
        ("google_api_key", k, f"GET https://generativelanguage.googleapis.com/v1beta/models?key={k} 403"),
        ("google_oauth_token", ya, f"Authorization: Bearer {ya}"),
        ("google_refresh_token", rt, f"refreshing credentials with refresh token {rt}"),
        ("google_client_secret", cs, f"oauth client configured client_secret {cs}"),
        ("hf_token", hf, f"401 Client Error: Unauthorized for url https://huggingface.co/api/models (token {hf})"),
        ("slack_bot_token", xb, f"slack client init token={xb}"),
        ("slack_app_token", xa, f"socket mode connecting with {xa}"),
        ("slack_webhook", wh, f"posting alert to https://hooks.slack.com/services/{wh}"),
        ("github_token", gh, f"git clone https://x-access-token:{gh}@github.com/acme/models.git"),
        ("aws_access_key", ak, f"boto3 credentials aws_access_key_id={ak}"),
        ("openai_key", sk, f"openai.AuthenticationError: Incorrect API key provided: {sk}"),
        ("jwt", jwt, f"id_token verified {jwt}"),
        ("url_password", pw, f"connecting to postgresql://gemma:{pw}@10.0.0.5:5432/sre"),
        ("redis_empty_user", rp, f"Error connecting to redis://:{rp}@10.0.0.3:6379/0: timeout"),
        ("vllm_api_key_flag", vk, f"vllm serve google/gemma-4-12b-it --port 8080 --api-key {vk} --max-model-len 8192"),
        ("vllm_api_key_echo", ve, f"non-default args: {{'model': 'google/gemma-4-12b-it', 'api_key': ['{ve}']}}"),
        ("hex_token", hx, f"GET /internal/metrics?token={hx} 200"),
        ("cookie", ck, f"request headers: Cookie: session={ck}; theme=dark"),
        ("basic_auth", ba, f"upstream request Authorization: Basic {ba}"),
        ("password_kv", kv, f"db login user=admin password={kv} ok"),
    ]


def build(seed: int = 20, rounds: int = 3) -> Corpus:
    """`rounds` rounds of every kind (each line repeated, as errors repeat), plus JSON payloads, multi-line
    entries, a traceback quoting a secret, and a private key both in one entry and one line per entry."""
    rng = random.Random(seed)
    c = Corpus()
    t0 = datetime.now(UTC) - timedelta(minutes=20)
    n = 0

    def add(text: str | None = None, severity: str = "ERROR", json_payload: dict[str, Any] | None = None) -> None:
        nonlocal n
        n += 1
        e: dict[str, Any] = {
            "insertId": f"c{n}",
            "timestamp": (t0 + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "severity": severity,
            "logName": f"projects/{PROJECT}/logs/run.googleapis.com%2Fstderr",
            "resource": {
                "type": "cloud_run_revision",
                "labels": {"service_name": SERVICE, "revision_name": f"{SERVICE}-00003-abc"},
            },
        }
        if json_payload is not None:
            e["jsonPayload"] = json_payload
            c.plain.append(json.dumps(json_payload))
        else:
            e["textPayload"] = text
            c.plain.extend((text or "").split("\n"))
        c.entries.append(e)

    for r in range(rounds):
        for kind, secret, line in _secret_lines(rng):
            c.secrets.append((kind, secret))
            if r == 0:
                add(line)
                add(line)  # repeated, as errors repeat
            elif r == 1:
                add(
                    json_payload={"message": line, "component": "bot"}
                    if kind != "password_kv"
                    else {"password": secret}
                )
            else:  # a multi-line entry, and a traceback whose exception quotes it
                add(f"request failed\n  detail: {line}\n  retrying in 5s")
                add(
                    "Traceback (most recent call last):\n"
                    '  File "/app/main.py", line 42, in connect\n'
                    "    client.connect()\n"
                    f"RuntimeError: {line}"
                )
    pem1, pem2 = _pem(rng), _pem(rng)
    c.secrets += [("private_key", pem1), ("private_key", pem2)]
    add(json.dumps({"type": "service_account", "private_key": pem1.replace("\n", "\\n")}))
    add(f"loaded key:\n{pem1}")  # one entry, many lines
    add("writing key file", severity="INFO")
    for line in pem2.split("\n"):  # one entry per line, as Cloud Run logs stdout
        add(line, severity="DEFAULT")
    add("service started", severity="INFO")
    return c

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
Added for issue 28 (formats that leaked or were held), and issue 38 (lines where only one rule applies):
- Slack user token `xoxp-`, AWS temporary key id `ASIA` (STS: https://docs.aws.amazon.com/STS/latest/APIReference/
  API_Credentials.html), a GitHub token in free text (no URL or key around it to mask it otherwise)
- percent-encoding (RFC 3986 2.1): an HF token inside a `next=` URL parameter
- Groq `gsk_` + 52 alphanumerics (console.groq.com keys), GitLab `glpat-` + 20, Stripe `sk_live_`
  (docs.stripe.com/keys), Anthropic `sk-ant-api03-` (docs.anthropic.com, API keys), a vendor key by shape
- `curl -u user:password` (curl(1) --user), `mysqldump -pPASSWORD` (mysql docs, "--password[=password], -p[password]":
  no space after -p), `sshpass -p PASSWORD` (sshpass(1)), `aws configure set aws_secret_access_key VALUE`
  (AWS CLI `configure set`), `https_proxy=user:password@host:port` (curl/wget proxy environment)
- `Authorization: Token <40 hex>` (Django REST framework TokenAuthentication), `Authorization: SSWS <token>`
  (Okta API tokens): RFC 9110 11.6.2, any scheme; `Bearer` in curl -v output (`> Authorization: Bearer ...`)
- Azure SAS `sig=` (base64 HMAC-SHA256, URL-encoded; learn.microsoft.com "Create a service SAS"), AWS presigned
  URL `X-Amz-Signature` (64 hex, SigV4 query auth)
- Secret Manager `payload.data` (base64 of the secret: cloud.google.com/secret-manager/docs/reference/rest/v1/
  projects.secrets.versions/access) holding a PEM key; a Kubernetes Secret's `data` value (base64) holding a
  service-account JSON key
- AWS STS JSON `SecretAccessKey` / `SessionToken`, Azure Storage connection string `AccountKey=` (base64, 88)
- a PEM body interleaved with another instance's request lines (one entry per line, same revision), and one
  whose BEGIN line fell before the `--since` window
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "_-"
SERVICE = "vllm-gemma4"
PROJECT = "test-proj"


@dataclass
class Corpus:
    secrets: list[tuple[str, str]] = field(default_factory=list)  # (kind, value)
    rules: dict[str, str] = field(default_factory=dict)  # value -> the marker kind that must mask it
    lines: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, value, a plain line carrying it)
    entries: list[dict[str, Any]] = field(default_factory=list)  # Cloud Logging REST entries, in time order
    plain: list[str] = field(default_factory=list)  # the same log as plain text lines

    @property
    def kinds(self) -> set[str]:
        return {k for k, _ in self.secrets}

    def leaks(self, text: str) -> list[tuple[str, str]]:
        """Every secret found in `text`, whole or in part: any 10-character fragment of it counts (issue 28's
        acceptance), so a template that keeps a token's tail (`xoxb-<*>-<*>-nZtQ...`), or an output that keeps
        the last 10 characters of a key, is a leak too. PEM armour lines are public and not fragments."""
        seen = _windows(text)
        return [(kind, value[:40]) for kind, value in self.secrets if not seen.isdisjoint(fragments(value))]


FRAGMENT = 10


def _windows(text: str) -> set[str]:
    return {text[i : i + FRAGMENT] for i in range(len(text) - FRAGMENT + 1)}


def fragments(value: str) -> set[str]:
    """Every 10-character fragment of a secret, within its lines (a PEM body's lines are fragments each; its
    BEGIN/END armour is not secret)."""
    out: set[str] = set()
    for line in value.split("\n"):
        if not line.startswith("-----"):
            out |= _windows(line)
    return out


def _r(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _pem(rng: random.Random) -> str:
    body = base64.b64encode(rng.randbytes(600)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END PRIVATE KEY-----"


def _secret_lines(rng: random.Random) -> list[tuple[str, str, str, str]]:
    """(kind, secret, one log line carrying it, the rule that must mask it) for one round of every kind."""
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
    xp = f"xoxp-{rng.randrange(10**11, 10**12)}-{rng.randrange(10**11, 10**12)}-{rng.randrange(10**12, 10**13)}-"
    xp += _r(rng, 32, "0123456789abcdef")
    asia = "ASIA" + _r(rng, 16, string.ascii_uppercase + string.digits)
    gh2 = "ghp_" + _r(rng, 36)
    hf2 = "hf_" + _r(rng, 34)
    gsk = "gsk_" + _r(rng, 52)
    glpat = "glpat-" + _r(rng, 20, URLSAFE)
    stripe = "sk_live_" + _r(rng, 24)
    skant = "sk-ant-api03-" + _r(rng, 93, URLSAFE) + "-" + _r(rng, 6, URLSAFE) + "AA"
    shaped = "acme_sk_" + _r(rng, 32)
    cpw = _r(rng, 18, ALNUM + "!*~")
    mpw = _r(rng, 16)
    spw = _r(rng, 16)
    aws_secret = _r(rng, 40, ALNUM + "/+")
    ppw = _r(rng, 14)
    drf = _r(rng, 40, "0123456789abcdef")
    ssws = "00" + _r(rng, 40, URLSAFE)
    opaque = _r(rng, 48, URLSAFE)
    sig = base64.b64encode(rng.randbytes(32)).decode()
    amz = _r(rng, 64, "0123456789abcdef")
    sm_pem = base64.b64encode(_pem(rng).encode()).decode()
    sa_json = json.dumps(
        {"type": "service_account", "client_email": "sa@p.iam.gserviceaccount.com", "private_key": _pem(rng)}
    )
    k8s = base64.b64encode(sa_json.encode()).decode()
    sts_secret = _r(rng, 40, ALNUM + "/+")
    sts_token = "IQoJb3JpZ2luX2Vj" + _r(rng, 300, ALNUM + "/+") + "=="
    acct_key = base64.b64encode(rng.randbytes(64)).decode()
    return [
        (
            "google_api_key",
            k,
            f"GET https://generativelanguage.googleapis.com/v1beta/models?key={k} 403",
            "google_api_key",
        ),
        ("google_oauth_token", ya, f"Authorization: Bearer {ya}", "google_oauth_token"),
        ("google_refresh_token", rt, f"refreshing credentials with refresh token {rt}", "google_refresh_token"),
        ("google_client_secret", cs, f"oauth client configured client_secret {cs}", "google_client_secret"),
        (
            "hf_token",
            hf,
            f"401 Client Error: Unauthorized for url https://huggingface.co/api/models (token {hf})",
            "hf_token",
        ),
        ("slack_bot_token", xb, f"slack client init token={xb}", "slack_token"),
        ("slack_app_token", xa, f"socket mode connecting with {xa}", "slack_token"),
        ("slack_webhook", wh, f"posting alert to https://hooks.slack.com/services/{wh}", "slack_webhook"),
        ("github_token", gh, f"git clone https://x-access-token:{gh}@github.com/acme/models.git", "github_token"),
        ("aws_access_key", ak, f"boto3 credentials aws_access_key_id={ak}", "aws_access_key"),
        ("openai_key", sk, f"openai.AuthenticationError: Incorrect API key provided: {sk}", "openai_key"),
        ("jwt", jwt, f"id_token verified {jwt}", "jwt"),
        ("url_password", pw, f"connecting to postgresql://gemma:{pw}@10.0.0.5:5432/sre", "url_password"),
        ("redis_empty_user", rp, f"Error connecting to redis://:{rp}@10.0.0.3:6379/0: timeout", "url_password"),
        (
            "vllm_api_key_flag",
            vk,
            f"vllm serve google/gemma-4-12b-it --port 8080 --api-key {vk} --max-model-len 8192",
            "cli_flag",
        ),
        (
            "vllm_api_key_echo",
            ve,
            f"non-default args: {{'model': 'google/gemma-4-12b-it', 'api_key': ['{ve}']}}",
            "secret",
        ),
        ("hex_token", hx, f"GET /internal/metrics?token={hx} 200", "secret"),
        ("cookie", ck, f"request headers: Cookie: session={ck}; theme=dark", "cookie"),
        ("basic_auth", ba, f"upstream request Authorization: Basic {ba}", "basic_auth"),
        ("password_kv", kv, f"db login user=admin password={kv} ok", "secret"),
        # issue 38: lines where only the rule named applies (no key, URL or header around the token)
        ("slack_user_token", xp, f"posting as the installing user with {xp} to #ops", "slack_token"),
        ("aws_temp_key", asia, f"assumed role ops-admin, temporary key {asia} expires in 3600s", "aws_access_key"),
        ("github_token_free_text", gh2, f"push rejected for {gh2}: bad credentials", "github_token"),
        # issue 28: the formats that leaked, and the held ones
        (
            "hf_token_url_encoded",
            hf2,
            f"GET /login?next=https%3A%2F%2Fhuggingface.co%2Fapi%2Fmodels%3Ftoken%3D{hf2} 302",
            "hf_token",
        ),
        ("groq_key", gsk, f"groq.AuthenticationError: Error code: 401 - Invalid API Key {gsk}", "vendor_key"),
        ("gitlab_token", glpat, f"fatal: could not read from remote with {glpat}", "vendor_key"),
        ("stripe_key", stripe, f"stripe request failed using {stripe} (livemode)", "vendor_key"),
        ("anthropic_key", skant, f"anthropic.AuthenticationError: invalid x-api-key {skant}", "openai_key"),
        ("shaped_key", shaped, f"acme sdk 2.1 initialised with {shaped} region eu", "api_key"),
        ("curl_user_password", cpw, f"+ curl -sf -u deploy:{cpw} https://artifacts.internal/upload", "cli_flag"),
        ("mysql_p_password", mpw, f"+ mysqldump -h 10.0.0.5 -u root -p{mpw} gemma > /backup/gemma.sql", "cli_flag"),
        ("sshpass_password", spw, f"+ sshpass -p {spw} ssh ops@10.0.0.9 uptime", "cli_flag"),
        (
            "aws_configure_secret",
            aws_secret,
            f"+ aws configure set aws_secret_access_key {aws_secret} --profile ci",
            "cli_flag",
        ),
        ("proxy_password", ppw, f"using https_proxy=ops:{ppw}@proxy.corp.internal:3128", "url_password"),
        ("authorization_token", drf, f"request headers: Authorization: Token {drf}", "authorization"),
        ("authorization_custom", ssws, f"okta call failed; header Authorization: SSWS {ssws}", "authorization"),
        ("curl_verbose_bearer", opaque, f"> Authorization: Bearer {opaque}", "bearer"),
        (
            "azure_sas_sig",
            sig,
            "GET https://acmeml.blob.core.windows.net/models/w.safetensors?sv=2022-11-02&sr=b&sp=r"
            f"&se=2026-11-28T00%3A00%3A00Z&sig={quote(sig, safe='')} 403",
            "signed_url",
        ),
        (
            "aws_presigned_signature",
            amz,
            "GET https://b.s3.amazonaws.com/w.bin?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=900"
            f"&X-Amz-Signature={amz} 403",
            "signed_url",
        ),
        ("secret_manager_pem", sm_pem, f"accessed secret hf-key version 3: payload.data={sm_pem}", "private_key"),
        ("k8s_secret_sa_json", k8s, f"kubectl get secret gcp-sa -o yaml: data: key.json: {k8s}", "private_key"),
        (
            "aws_sts_secret",
            sts_secret,
            f'sts response {{"AccessKeyId": "ASIAEXAMPLEEXAMPLE00", "SecretAccessKey": "{sts_secret}"}}',
            "secret",
        ),
        ("aws_sts_session_token", sts_token, f'sts response {{"SessionToken": "{sts_token}"}}', "secret"),
        (
            "azure_connection_string",
            acct_key,
            f"DefaultEndpointsProtocol=https;AccountName=acmeml;AccountKey={acct_key};EndpointSuffix=core.windows.net",
            "secret",
        ),
    ]


def build(seed: int = 20, rounds: int = 3) -> Corpus:
    """`rounds` rounds of every kind (each line repeated, as errors repeat), plus JSON payloads, multi-line
    entries, a traceback quoting a secret, and private keys: in one entry, one line per entry, one line per
    entry interleaved with another instance's request lines, and one cut at the window's start."""
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
        for kind, secret, line, rule in _secret_lines(rng):
            c.secrets.append((kind, secret))
            c.rules[secret] = rule
            if r == 0:
                c.lines.append((kind, secret, line))
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
    pem1, pem2, pem3, pem4 = _pem(rng), _pem(rng), _pem(rng), _pem(rng)
    c.secrets += [("private_key", pem1), ("private_key", pem2), ("private_key", pem3), ("private_key", pem4)]
    c.rules.update({p: "private_key" for p in (pem1, pem2, pem3, pem4)})
    add(json.dumps({"type": "service_account", "private_key": pem1.replace("\n", "\\n")}))
    add(f"loaded key:\n{pem1}")  # one entry, many lines
    add("writing key file", severity="INFO")
    for line in pem2.split("\n"):  # one entry per line, as Cloud Run logs stdout
        add(line, severity="DEFAULT")
    add("service started", severity="INFO")
    # A key printed while another instance of the same revision serves requests: its lines interleave.
    for i, line in enumerate(pem3.split("\n")):
        add(line, severity="DEFAULT")
        if i % 2 == 0:
            add(f"POST /v1/chat/completions 200 {12 + i}ms instance=00a1f{i:02d}", severity="INFO")
    # A key whose BEGIN line and first body lines fell before the --since window.
    for line in pem4.split("\n")[3:]:
        add(line, severity="DEFAULT")
    add("service ready", severity="INFO")
    return c

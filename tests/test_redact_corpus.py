"""Redaction corpus: >= 50 secrets of 10+ kinds are all masked, each by the rule meant for it (its typed
marker); ordinary log text (Loghub lines, vLLM lines, ids, paths, IPs, UUIDs, digests) is almost never touched."""

from __future__ import annotations

import json
import random
import string
from typing import Any

from skills.audit import AuditEntry, record
from skills.logs.redact import redact, redact_obj
from tests.example_data import LOGHUB
from tests.redaction_corpus import build

rng = random.Random(7)


def _rand(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _corpus() -> list[tuple[str, str, str]]:
    """(kind, secret, line containing it)."""
    c: list[tuple[str, str, str]] = []
    for _ in range(5):
        k = "AIza" + _rand(35, string.ascii_letters + string.digits + "_-")
        c.append(("google_api_key", k, f"GET https://generativelanguage.googleapis.com/v1/models?key={k} 200"))
        t = "ya29." + _rand(60, string.ascii_letters + string.digits + "_-")
        c.append(("google_oauth_token", t, f"Authorization: Bearer {t}"))
        h = "hf_" + _rand(34)
        c.append(("hf_token", h, f"Using token {h} to download google/gemma-4-12b-it"))
        s = f"xoxb-{rng.randint(10**11, 10**12)}-{rng.randint(10**11, 10**12)}-{_rand(24)}"
        c.append(("slack_token", s, f"slack client init token={s}"))
        a = f"xapp-1-A{_rand(10).upper()}-{rng.randint(10**12, 10**13)}-{_rand(64, 'abcdef0123456789')}"
        c.append(("slack_token", a, f"socket mode app token {a}"))
        w = f"https://hooks.slack.com/services/T{_rand(8).upper()}/B{_rand(8).upper()}/{_rand(24)}"
        c.append(("slack_webhook", w, f"posting alert to {w}"))
        j = "eyJhbGciOiJSUzI1NiJ9." + "eyJ" + _rand(40, string.ascii_letters + string.digits + "_-") + "." + _rand(43)
        c.append(("jwt", j, f"id_token verified: {j}"))
        g = "ghp_" + _rand(36)
        c.append(("github_token", g, f"git clone https://x:{g}@github.com/acme/models"))
        ak = "AKIA" + _rand(16, string.ascii_uppercase + string.digits)
        c.append(("aws_access_key", ak, f"aws_access_key_id={ak} region=us-east-1"))
        pw = _rand(14, string.ascii_letters + string.digits + "!%^*")
        c.append(("password_url", pw, f"connecting to postgresql://app:{pw}@10.0.0.5:5432/gemma"))
        p2 = _rand(10)
        c.append(("password_kv", p2, f"db login user=admin password={p2} ok"))
        p3 = _rand(12)
        c.append(("password_json", p3, f'{{"user": "admin", "password": "{p3}", "db": "x"}}'))
        b = _rand(30, string.ascii_letters + string.digits) + "=="
        c.append(("basic_auth", b, f"Authorization: Basic {b}"))
        hi = _rand(40, string.ascii_letters + string.digits + "/+")
        c.append(("secret_value", hi, f"session_token: {hi}"))
    pem = (
        "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
        + _rand(200)
        + "\\n-----END PRIVATE KEY-----\\n"
    )
    c.append(
        (
            "private_key",
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
            f'{{"type": "service_account", "private_key": "{pem}"}}',
        )
    )
    pem2 = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA" + _rand(64) + "\n-----END RSA PRIVATE KEY-----"
    c.append(("private_key", "MIIEpAIBAAKCAQEA", pem2))
    return c


def test_every_secret_in_the_corpus_is_masked() -> None:
    corpus = _corpus()
    kinds = {k for k, _, _ in corpus}
    assert len(corpus) >= 50 and len(kinds) >= 10
    leaks = [(k, line) for k, secret, line in corpus if secret in redact(line)]
    assert leaks == []
    rule = {"password_url": "url_password", "password_kv": "secret", "password_json": "secret"}
    rule["secret_value"] = "secret"
    wrong = [(k, redact(line)) for k, _, line in corpus if f"[REDACTED:{rule.get(k, k)}]" not in redact(line)]
    assert wrong == []


def test_each_secret_is_masked_by_its_own_rule() -> None:
    """Every corpus format (tests/redaction_corpus.py), on a line of its own: masked, and by the rule meant for
    it, so weakening one rule (a GitHub token length, a Slack prefix letter, the ASIA prefix) fails here even
    where a generic rule would have caught the value."""
    c = build(seed=5, rounds=1)
    assert len(c.lines) >= 44 and len({r for r in c.rules.values()}) >= 20
    wrong = []
    for kind, secret, line in c.lines:
        out = redact(line)
        if f"[REDACTED:{c.rules[secret]}]" not in out or c.leaks(out) or redact(out) != out:  # idempotent too
            wrong.append((kind, c.rules[secret], out[:160]))
    assert wrong == []


def test_secret_names_in_params_match_whatever_their_case() -> None:
    params = {"Password": "hunter2", "X-Api-Key": 123456, "CLIENT_SECRET": "abc", "user": "bob", "n": 3}
    assert redact_obj(params) == {
        "Password": "[REDACTED:secret]",
        "X-Api-Key": "[REDACTED:secret]",
        "CLIENT_SECRET": "[REDACTED:secret]",
        "user": "bob",
        "n": 3,
    }


async def test_audit_stream_masks_secret_params_whatever_their_case(redis_client: Any, key_prefix: str) -> None:
    key = f"{key_prefix}audit-case"
    entry = AuditEntry(
        user_id="U1", action="deploy", service="s", params={"Password": "hunter2xyz", "Auth-Token": "t0k"}, result="ok"
    )
    await record(redis_client, key, entry)
    rows = await redis_client.xrange(key)
    fields = {(k.decode() if isinstance(k, bytes) else k): v for k, v in rows[0][1].items()}
    stored = json.loads(fields["params"])
    assert stored == {"Password": "[REDACTED:secret]", "Auth-Token": "[REDACTED:secret]"}


def test_markers_are_typed_and_context_survives() -> None:
    h = "hf_" + "Q" * 5 + _rand(30)
    out = redact(f"401 Client Error for https://huggingface.co with {h}")
    assert out == "401 Client Error for https://huggingface.co with [REDACTED:hf_token]"
    assert redact("Authorization: Bearer ya29.a0AfH6SMBx3kLmQ9pQrStUvWxYz0123") == (
        "Authorization: Bearer [REDACTED:google_oauth_token]"
    )
    assert redact("postgres://bob:s3cr3t@db:5432/x") == "postgres://bob:[REDACTED:url_password]@db:5432/x"
    assert redact(redact("password=hunter2")) == "password=[REDACTED:secret]"  # idempotent
    assert redact_obj({"client_secret": "abc", "n": [f"token {h}"]}) == {
        "client_secret": "[REDACTED:secret]",
        "n": ["token [REDACTED:hf_token]"],
    }


ORDINARY = [
    "PacketResponder 1 for block blk_-6952295868487656571 terminating",
    "Received block blk_3587508140051953248 of size 67108864 from /10.251.42.84",
    "request_id=9f1c2b7e-4d3a-4c55-9b0e-2f6a8d1e7c33 GET /v1/models 200 3ms",
    "INFO 11-20 14:03:35 [kv_cache_utils.py:1087] GPU KV cache size: 196,928 tokens",
    "Engine 000: Avg prompt throughput: 300.0 tokens/s, Avg generation throughput: 58.1 tokens/s",
    "Loading weights from /mnt/models/gemma-4-26B-A4B-it-qat-q4_0-w4a16-ct/model-00001-of-00005.safetensors",
    "commit 3f2a9c1d7e8b4a6f0c5d2e1b9a8f7c6d5e4b3a21 deployed",
    "max_num_batched_tokens=4096 max_tokens=1024 tokenizer=google/gemma-4-12b-it",
    "Basic authentication required for /admin",
    "AppWindowToken{9f4ef63 token=Token{a64f992 ActivityRecord{de9231d u0 com.tencent.qt.qtl/.activity t761}}}",
    # Ordinary content the new classes must leave alone: model ids, revisions, request ids, digests, booleans.
    "Received request chatcmpl-7f3a9c2b4d5e6f708192a3b4c5d6e7f8: model=google/gemma-4-12b-it stream=true",
    "revision vllm-gemma4-00007-xq2 ready; image us-docker.pkg.dev/p/r/vllm@sha256:"
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "request_id=req_011CTjk9zNVTG7PrqEbq1Wzm msg_01XFDUDYJgAACzvnptvVoYEL trace=4bf92f3577b34da6a3ce929d0e0e4736",
    "enable_prefix_caching=True max_num_seqs=8 gpu_memory_utilization=0.9 kv_cache_dtype=fp8 2048 -1 3.5e-05",
    "GPU KV cache usage: 42.0%, Prefix cache hit rate: 87.5%, waiting=0",
    "docker run -u 1000:1000 -p 8080:80 --rm vllm/vllm-openai:v0.24.0-cu129",
    "mkdir -p /mnt/models && cp -pr /tmp/x /y; ssh -p 2222 ops@10.0.0.9",
    "Authorization failed for user bob; authorization: required",
    "GET /v1/models?page=2&size=50&sort=name 200 https://example.com/a%20b%2Fc",
    "Loading safetensors checkpoint shards: 100% Completed | 3/3 [03:30<00:00, 70.00s/it]",
    "aws configure set region us-east-1; git config set core.editor vim",
]


def test_ordinary_log_text_is_left_alone() -> None:
    assert [redact(line) for line in ORDINARY] == ORDINARY
    lines: list[str] = []
    for f in sorted(LOGHUB.glob("*/*_2k.log")):
        lines.extend(f.read_text(errors="replace").splitlines())
    assert len(lines) >= 16000
    changed = [line for line in lines if redact(line) != line]
    rate = len(changed) / len(lines)
    assert rate < 0.005, changed[:10]

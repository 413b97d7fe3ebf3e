"""Mask secrets in free text before it reaches a log line, the model or Slack.

Each secret becomes a typed marker such as `[REDACTED:hf_token]`, so evidence still reads ("401 with
[REDACTED:hf_token]") without carrying the value. This runs in the JSON log formatter on every line, so each
rule has a cheap substring trigger and its regex only runs when the trigger is present: a line without
secrets costs a handful of `in` checks and a few short scans.

Rules go by class, not by one format. Each class, its marker kind, and the formats it covers:
- Tokens by prefix family (`_TOKEN_RULES`): Google API key `AIza`, OAuth `ya29.` / `1//0` / `GOCSPX-`, Hugging
  Face `hf_` / `api_org_`, Slack `xox[abposre]-` / `xapp-` / webhooks, GitHub `gh[pousr]_` / `github_pat_`, AWS
  key ids `AKIA` / `ASIA`, OpenAI / Anthropic `sk-` (`sk-proj-`, `sk-ant-`), JWTs, PEM private keys; and
  `vendor_key`: Groq `gsk_`, GitLab `glpat-`, npm `npm_`, PyPI `pypi-AgE`, Stripe `sk_live_` / `rk_live_`,
  DigitalOcean `dop_v1_`, xAI `xai-`, SendGrid `SG.x.y`. A prefix glued to the text before it (`%3Dhf_...`,
  `tokenghp_...`) still counts: the rules look for a non-alphanumeric before it, not a word boundary.
- `api_key`: a token by shape and context: a prefix that says key (`sk_`, `pk-`, `key_`, `api-`, `token_`,
  `secret_`, `pat_`, with an optional vendor part: `acme_sk_...`), then 24+ letters and digits mixing upper
  case, lower case and digits at high entropy (a vendor format not listed above). Request ids (`req_`, `msg_`,
  `chatcmpl-`), revision names, hex digests and UUIDs stay.
- Encoded forms: a run with %XX escapes is decoded and checked (a token in `next=https%3A%2F%2F...%3Ftoken%3D
  hf_...`, a SAS `sig=...%2B...%3D`); a base64 run that decodes to text is checked too (a Secret Manager
  payload holding a PEM key, a Kubernetes secret's data, base64 of a service-account JSON) and masked whole
  with the kind found inside.
- `authorization`: the credentials of an `Authorization:` / `Proxy-Authorization:` header of any scheme (Token,
  Digest, AWS4-HMAC-SHA256, custom) or none; Bearer and Basic keep their kinds `bearer` / `basic_auth`.
- `cli_flag`: credentials passed on a command line: `--password X`, `--api-key=X`, `--client-secret X`, mysql
  `-pPASSWORD`, `sshpass -p X`, `redis-cli -a X`, `docker login -p X`, `curl -u user:pass`, `--user user:pass`,
  `aws configure set aws_secret_access_key X` (any `config[ure] set NAME VALUE` whose name means a secret).
- `url_password`: `scheme://user:password@host`, `redis://:password@host`, and a proxy's `user:password@host`.
- `signed_url`: a signed URL's signature: Azure SAS `sig=`, `X-Amz-Signature`, `X-Amz-Security-Token`,
  `X-Goog-Signature`.
- `secret`: a value assigned to a name that means a secret (`password=`, `"client_secret": "..."`,
  `AccountKey=`, `SharedAccessKey=`, `session_token:`), or to a weaker name when the value looks like one.
- `cookie`: Cookie / Set-Cookie header values.
- `private_key`: a PEM block, and PEM body lines without their header (a window that starts mid-key): a line
  that is only 40+ base64 characters of high entropy, and base64 lines that run into `-----END ... KEY-----`.
  Key blocks spread over many log entries are followed by skills/logs/redact_entries.py.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import unquote

MARK = "[REDACTED:{}]"
_NOT_ALNUM_BEFORE = r"(?<![A-Za-z0-9])"

# (kind, substrings that must occur for the rule to run, regex). Specific token shapes come first so a
# `Bearer ya29...` header is typed as the OAuth token it is; generic rules skip values already masked.
_TOKEN_RULES: list[tuple[str, tuple[str, ...], str]] = [
    (
        "private_key",
        ("PRIVATE KEY",),
        r"-----BEGIN[A-Z ]*PRIVATE KEY-----"
        r"(?:[\s\S]{0,8000}?-----END[A-Z ]*PRIVATE KEY-----|[A-Za-z0-9+/=\s\\]*)",
    ),
    (
        "slack_webhook",
        ("hooks.slack",),
        r"https://hooks\.slack(?:-gov)?\.com/(?:services|workflows|triggers)/[\w/-]+",
    ),
    ("jwt", ("eyJ",), _NOT_ALNUM_BEFORE + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("google_api_key", ("AIza",), _NOT_ALNUM_BEFORE + r"AIza[0-9A-Za-z_-]{35}"),
    ("google_oauth_token", ("ya29.",), _NOT_ALNUM_BEFORE + r"ya29\.[0-9A-Za-z_.-]{20,}"),
    ("google_refresh_token", ("1//0",), _NOT_ALNUM_BEFORE + r"1//0[0-9A-Za-z_-]{30,}"),
    ("google_client_secret", ("GOCSPX-",), _NOT_ALNUM_BEFORE + r"GOCSPX-[0-9A-Za-z_-]{20,}"),
    ("hf_token", ("hf_", "api_org_"), _NOT_ALNUM_BEFORE + r"(?:hf_|api_org_)[A-Za-z0-9]{30,}"),
    (
        "slack_token",
        ("xox", "xapp-"),
        _NOT_ALNUM_BEFORE + r"(?:xox[abposre]-[0-9A-Za-z-]{10,}|xapp-\d-[0-9A-Za-z-]{10,})",
    ),
    (
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        _NOT_ALNUM_BEFORE + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})",
    ),
    ("aws_access_key", ("AKIA", "ASIA"), _NOT_ALNUM_BEFORE + r"(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Za-z])"),
    (
        "openai_key",
        ("sk-",),
        _NOT_ALNUM_BEFORE + r"sk-(?:proj-|ant-(?:[a-z]{3}\d\d-)?|svcacct-|admin-)?[A-Za-z0-9_-]{32,}",
    ),
    (
        "vendor_key",
        ("gsk_", "glpat-", "npm_", "pypi-", "k_live_", "k_test_", "dop_v1_", "xai-", "SG."),
        _NOT_ALNUM_BEFORE + r"(?:gsk_[A-Za-z0-9]{20,}|glpat-[A-Za-z0-9_-]{20,}|npm_[A-Za-z0-9]{36,}"
        r"|pypi-AgE[A-Za-z0-9_-]{50,}|[sr]k_(?:live|test)_[A-Za-z0-9]{20,}|dop_v1_[a-f0-9]{64}"
        r"|xai-[A-Za-z0-9]{40,}|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,})",
    ),
]
# Flattened to (trigger, compiled, marker): one plain `in` check per entry keeps the no-secret path cheap.
_TOKENS = [(t, re.compile(rx), MARK.format(kind)) for kind, trigs, rx in _TOKEN_RULES for t in trigs]

# A key by shape and context: a prefix that says key (`sk`, `pk`, `key`, `api`, `token`, `secret`, `pat`, with
# an optional vendor part around it), then 24+ characters that mix upper, lower and digits (checked below).
# Ids (`req_...`, `msg_...`, `chatcmpl-<hex>`) do not say key, so they stay.
_SHAPED_KEY = re.compile(
    r"(?<![A-Za-z0-9_.:/-])(?:[a-z][a-z0-9]{0,7}[_-])?(?:sk|pk|rk|ak|key|api|apikey|token|tok|secret|pat|sat)"
    r"[_-](?:[a-z0-9]{2,8}[_-])?([A-Za-z0-9]{24,})\b"
)

# scheme://user:password@host -> keep user and host. The user may be empty: `redis://:PASSWORD@host` is how
# Memorystore AUTH strings and redis-py URLs carry a password alone.
_URL_PW = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@'\"]*:)([^\s@/'\"\[]+)(?=@)")
# A proxy setting without a scheme: `https_proxy=user:password@proxy:3128`.
_PROXY_PW = re.compile(
    r"(?i)(\b(?:https?_proxy|all_proxy|proxy)[\"']?\s*[=:]\s*[\"']?[^\s:@/'\"]+:)([^\s@/'\"\[]+)(?=@)"
)
# Command-line flags that take a secret, `--api-key KEY` or `--api-key=KEY` (vLLM's server flag; its start-up
# echo `'api_key': ['KEY']` is handled by the key/value rule below).
_FLAG = re.compile(
    r"(--?(?:[a-z0-9]+[-_])*(?:api[-_]?key|token|password|passwd|secret|access[-_]key|auth[-_]token)(?:=|\s+))"
    r"(['\"]?)(?!\[REDACTED|-)([^\s'\"]+)"
)
# Short flags that carry a password only for the command they belong to (`-p` is a port or a flag elsewhere).
_CMD_FLAGS: list[tuple[tuple[str, ...], re.Pattern[str]]] = [
    # mysql client family: `-pPASSWORD` glued (a bare `-p` prompts for it).
    (
        ("mysql", "mariadb"),
        re.compile(
            r"(\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mariadb|mariadb-dump)\b[^\n|;&]*?\s-p)"
            r"(?!\[REDACTED)([^\s'\"]+)"
        ),
    ),
    (("sshpass",), re.compile(r"(\bsshpass\s+-p\s*['\"]?)(?!\[REDACTED)([^\s'\"]+)")),
    (("redis-cli",), re.compile(r"(\bredis-cli\b[^\n|;&]*?\s-a\s+['\"]?)(?!\[REDACTED)([^\s'\"]+)")),
    (("docker",), re.compile(r"(\bdocker\s+login\b[^\n|;&]*?\s-p\s+['\"]?)(?!\[REDACTED)([^\s'\"]+)")),
    # curl/wget `-u user:pass`; long forms (`--user`, `--proxy-user`, `--auth`, `--basic-auth`) in any command.
    (
        ("curl", "wget"),
        re.compile(r"(\b(?:curl|wget)\b[^\n|;&]*?\s-[uU]\s*['\"]?[^\s:'\"]*:)(?!\[REDACTED)([^\s'\"]+)"),
    ),
    (
        ("--",),
        re.compile(r"(--(?:proxy-user|user|auth|basic-auth)(?:=|\s+)['\"]?[^\s:'\"]*:)(?!\[REDACTED)([^\s'\"]+)"),
    ),
]
# `aws configure set aws_secret_access_key X`, `npm config set //host/:_authToken X`, `git config set ...`.
_CONFIG_SET = re.compile(r"(\bconfig(?:ure)?\s+set\s+(?:--?[\w-]+\s+)*([^\s=]+)\s+['\"]?)(?!\[REDACTED)([^\s'\"]+)")
# A Cookie / Set-Cookie header carries session credentials: the whole value goes.
_COOKIE = re.compile(r"(?i)(\b(?:set-)?cookie[\"']?\s*[:=]\s*[\"']?)(?!\s*\[REDACTED)([^\r\n\"']+)")
_HEX_TOKEN = re.compile(r"[0-9a-fA-F]{32,}")
_BEARER = re.compile(r"(\b[Bb]earer\s+)([A-Za-z0-9._~+/-]{8,}=*)")
_BASIC = re.compile(r"(\b[Bb]asic\s+)([A-Za-z0-9+/]{8,}={0,2})")
# Authorization of any scheme: `Authorization: <scheme> <credentials>` or `Authorization: <credentials>`.
_AUTHZ = re.compile(
    r"(?i)(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
    r"(?:([a-z][\w.-]{0,30}\s+)(?!\[REDACTED)([^\s\"',;]{4,})|(?!\[REDACTED)([^\s\"',;]{6,})(?![ \t]+[^\s\"',;]))"
)
_AUTHZ_NOT_CREDENTIALS = frozenset({"required", "missing", "invalid", "failed", "denied", "none", "null", "header"})
# A signed URL's signature parameters (Azure SAS, AWS SigV4 query auth, GCS signed URLs).
_SIGNED = re.compile(
    r"(?i)([?&](?:sig|signature|x-amz-signature|x-amz-security-token|x-goog-signature)=)(?!\[REDACTED)([^&\s#\"'<>]+)"
)
# What the shape rules (keys by shape, base64 runs, bare PEM lines) need at least: a cheap scan that lets most
# log lines skip them.
_LONG_RUN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24}")  # tried at run starts only: linear
# Percent-encoded runs, decoded and checked as a whole.
_PCT_RUN = re.compile(r"[^\s\"'<>]*%[0-9A-Fa-f]{2}[^\s\"'<>]*")
# Base64 runs (standard or URL-safe) long enough to hold a credential.
_B64_RUN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}={0,2}")
# PEM body lines without their header: the whole line is 40+ base64 characters (RFC 7468 writes 64).
_PEM_LINE = re.compile(r"(?m)^([ \t]*(?:\([^)\n]*\)[ \t]*)?)([A-Za-z0-9+/]{40,}={0,2})[ \t]*$")
# Base64 lines (real or JSON-escaped line breaks) that run into an END line: a key whose BEGIN was cut off.
_PEM_TAIL = re.compile(r"(?:[A-Za-z0-9+/=]{16,}(?:\\[nr]|\s)+)+(?=-----END[A-Z ]*PRIVATE KEY-----)")

# key = value / "key": "value". Found on the lower-cased text by their keyword, then the whole key name is
# read around it and classified: strong names always hold a secret ("password=hunter2"); weak names only
# when the value looks like one (`token=Token{a64f992` in an Android log is not a credential).
_KEY_TRIGGERS = ("pass", "pwd", "secret", "key", "token", "auth", "credential", "session", "cookie", "sig")
# The key may be quoted, or quoted with escaped quotes (JSON logged inside a JSON string: `{\"password\": \"x\"}`).
_KEY_RX = re.compile(
    r"(?:pass|pwd|secret|key|token|auth|credential|session|cookie|sig)[a-z0-9_.-]*(?:\\?[\"'])?\s*[:=]\s*"
)
_STRONG = re.compile(
    r".*(?:passw(?:or)?d|passwd|passphrase|pwd|secret|secret_?key|private_?key(?:_?id)?|api_?key|apikey"
    r"|access_?key(?:_?id)?|credentials?|auth_?token|access_?token|refresh_?token|id_?token|bot_?token"
    r"|hf_?token|session_?key|signing_?secret|account_?key|shared_?access_?key|session_?token|security_?token"
    r"|private_?token|api_?token)"
)
_WEAK = re.compile(r".*(?:token|auth|authorization|key|session|session_?id|cookie|sig|signature)")
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-")
_BARE_VALUE = re.compile(r"[^\s,;&\"'}\])]{1,4000}")
_SECRETISH = re.compile(r"[A-Za-z0-9_\-./+=~]{20,}")


def _entropy(s: str) -> float:
    counts = Counter(s)
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


_PLAIN = frozenset({"true", "false", "none", "null"})


def _plain_value(value: str) -> bool:
    """A boolean or null after a name that ends in a secret word (`hf_token_from_secret=True`): a setting, not
    a credential. A number there stays masked (an API key or PIN can be all digits); names that only mention a
    secret (`api_key_count: 2`, `auth_token_ttl_s=3600`) are not secret names in the first place."""
    return value.lower() in _PLAIN


def _looks_secret(value: str) -> bool:
    """Long, mixed letters and digits, high entropy: a credential, not a word or an id like blk_-123."""
    if _HEX_TOKEN.fullmatch(value):  # 32+ hex digits after a token-ish key: a token whatever its entropy
        return True
    if not _SECRETISH.fullmatch(value):
        return False
    # A path or resource name (`kms_key: "projects/p/locations/l/keyRings/r/cryptoKeys/k"`, `/etc/x.key`) names a
    # key; it is not one.
    if value.startswith(("/", "projects/", "organizations/", "folders/")) or "..." in value:
        return False
    if not any(c.isdigit() for c in value) or not any(c.isalpha() for c in value):
        return False
    return _entropy(value) >= 3.5


def _mixed_random(value: str, min_entropy: float) -> bool:
    """Upper case, lower case and digits together, at high entropy: machine-made, not a word or a hex id."""
    return (
        any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and any(c.isdigit() for c in value)
        and _entropy(value) >= min_entropy
    )


def _split(kind: str, keep: Callable[[str], bool] | None, m: re.Match[str]) -> str:
    """Group 1 (the name, flag or scheme) kept, group 2 (the credential) masked unless `keep` says it is not one."""
    if keep is not None and keep(m.group(2)):
        return m.group(0)
    return m.group(1) + MARK.format(kind)


def _basic_is_prose(value: str) -> bool:
    # "Basic authentication required" is prose; base64 credentials mix cases or digits or end in '='.
    return not (value.endswith("=") or (any(c.isupper() for c in value) and any(not c.isupper() for c in value)))


# partial, not closures: the masking runs in `_split` at call time (a closure built at import would be out of
# reach of bench/mutation.py, which switches mutants on after import).
_URL_SUB = partial(_split, "url_password", None)
_COOKIE_SUB = partial(_split, "cookie", None)
_CLI_SUB = partial(_split, "cli_flag", None)
_SIGNED_SUB = partial(_split, "signed_url", None)
_BEARER_SUB = partial(_split, "bearer", None)
_BASIC_SUB = partial(_split, "basic_auth", _basic_is_prose)


def _flag_sub(m: re.Match[str]) -> str:
    return m.group(1) + m.group(2) + MARK.format("cli_flag")


def _config_sub(m: re.Match[str]) -> str:
    name = m.group(2).lower().replace("-", "_")
    if _STRONG.fullmatch(name) or _WEAK.fullmatch(name):
        return m.group(1) + MARK.format("cli_flag")
    return m.group(0)


def _authz_sub(m: re.Match[str]) -> str:
    if m.group(3) is not None:  # scheme + credentials
        scheme = m.group(2).strip().lower()
        if scheme in ("bearer", "basic"):  # their own rules, with their own prose checks
            return m.group(0)
        return m.group(1) + m.group(2) + MARK.format("authorization")
    if m.group(4).lower().strip(".") in _AUTHZ_NOT_CREDENTIALS:
        return m.group(0)
    return m.group(1) + MARK.format("authorization")


def _shaped_sub(m: re.Match[str]) -> str:
    return MARK.format("api_key") if _mixed_random(m.group(1), 4.0) else m.group(0)


def _pem_line_sub(m: re.Match[str]) -> str:
    return m.group(1) + MARK.format("private_key") if _mixed_random(m.group(2), 4.5) else m.group(0)


def _key_values(text: str) -> str:
    low = text.lower()
    if len(low) != len(text):  # a few Unicode characters change length when lower-cased; keep offsets exact
        low = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    out: list[str] = []
    last = 0
    for m in _KEY_RX.finditer(low):
        if m.start() < last:
            continue
        start = m.start()
        while start > 0 and low[start - 1] in _KEY_CHARS:
            start -= 1
        key = low[start : m.end()].rstrip(" \t=:\"'\\").replace("-", "_")
        strong = _STRONG.fullmatch(key) is not None
        if not strong and _WEAK.fullmatch(key) is None:
            continue
        pos = m.end()
        if text.startswith(("['", '["'), pos):  # a list of one value, as in vLLM's `'api_key': ['KEY']`
            pos += 1
        quote = text[pos] if pos < len(text) and text[pos] in "\"'" else ""
        if text.startswith(('\\"', "\\'"), pos):
            quote = text[pos : pos + 2]
        if quote:
            close = text.find(quote, pos + len(quote), pos + 4002)
            if close < 0:
                continue
            vstart, vend = pos + len(quote), close
        else:
            vm = _BARE_VALUE.match(text, pos)
            if vm is None:
                continue
            vstart, vend = pos, vm.end()
        value = text[vstart:vend]
        if not value or value.startswith("[REDACTED") or "\n" in value:
            continue
        if not strong and not _looks_secret(value):
            continue
        if _plain_value(value):
            continue
        out.append(text[last:vstart])
        out.append(MARK.format("secret"))
        last = vend
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def _rules(text: str, long_runs: bool = True) -> str:
    """Every rule on the text as written (no decoding). `long_runs` False: the text has no 24-character run of
    key alphabet, so the shape rules are skipped (masking never creates one)."""
    for trigger, rx, marker in _TOKENS:
        if trigger in text:
            text = rx.sub(marker, text)
    if "-----END" in text:
        text = _PEM_TAIL.sub(MARK.format("private_key"), text)
    if "://" in text:
        text = _URL_PW.sub(_URL_SUB, text)
    if "roxy" in text or "ROXY" in text:
        text = _PROXY_PW.sub(_URL_SUB, text)
    if "uthorization" in text or "UTHORIZATION" in text:
        text = _AUTHZ.sub(_authz_sub, text)
    if "=" in text and ("?" in text or "&" in text):
        text = _SIGNED.sub(_SIGNED_SUB, text)
    if "-" in text:
        text = _FLAG.sub(_flag_sub, text)
        for triggers, rx in _CMD_FLAGS:
            for t in triggers:
                if t in text:
                    text = rx.sub(_CLI_SUB, text)
                    break
    if "config" in text and "set" in text:  # `config\tset` too: the regex allows any whitespace
        text = _CONFIG_SET.sub(_config_sub, text)
    if "ookie" in text or "OOKIE" in text:
        text = _COOKIE.sub(_COOKIE_SUB, text)
    if "earer" in text:
        text = _BEARER.sub(_BEARER_SUB, text)
    if "asic" in text:
        text = _BASIC.sub(_BASIC_SUB, text)
    if "=" in text or ":" in text:
        low = text.lower()
        for t in _KEY_TRIGGERS:
            if t in low:
                text = _key_values(text)
                break
    if not long_runs:  # the rules below all need a 24-character run of key alphabet
        return text
    if "_" in text or "-" in text:
        text = _SHAPED_KEY.sub(_shaped_sub, text)
    if "\n" in text or len(text) >= 40:
        text = _PEM_LINE.sub(_pem_line_sub, text)
    return text


def _decoded_pct(m: re.Match[str]) -> str:
    run = m.group(0)
    decoded = unquote(unquote(run))  # twice: a URL inside a parameter is often encoded twice
    if decoded == run:
        return run
    masked = _rules(decoded)
    return masked if masked != decoded else run


def _b64_text(run: str) -> str | None:
    """The text a base64 run encodes, or None when it is not base64 of mostly printable text."""
    padded = run + "=" * (-len(run) % 4)
    try:
        raw = base64.urlsafe_b64decode(padded) if ("-" in run or "_" in run) else base64.b64decode(padded)
    except (binascii.Error, ValueError):
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    printable = sum(1 for c in text if c.isprintable() or c in "\n\r\t")
    return text if printable >= 0.95 * len(text) else None


_KIND = re.compile(r"\[REDACTED:([a-z_]+)\]")


def _decoded_b64(m: re.Match[str]) -> str:
    run = m.group(0)
    if run.startswith("LS0tLS1CRUdJTi"):  # base64 of "-----BEGIN": a PEM block, cut or whole
        try:
            head = base64.b64decode(run[:60])[:40]  # 60 characters: whole 4-character groups
        except (binascii.Error, ValueError):
            head = b""
        public = b"CERTIFICATE" in head or b"PUBLIC KEY" in head  # public material stays readable
        return run if public else MARK.format("private_key")
    text = _b64_text(run)
    if text is None:
        return run
    found = _KIND.search(_rules(text))
    return MARK.format(found.group(1)) if found else run


def redact(text: str) -> str:
    """`text` with every recognised secret replaced by `[REDACTED:<kind>]`."""
    if not text:
        return text
    if "%" in text:
        text = _PCT_RUN.sub(_decoded_pct, text)
    long_runs = len(text) >= 24 and _LONG_RUN.search(text) is not None
    text = _rules(text, long_runs)
    if long_runs:
        text = _B64_RUN.sub(_decoded_b64, text)
    return text


def redact_obj(value: Any) -> Any:
    """Redact every string inside a JSON-like value; a key that names a secret (compared case-insensitively,
    `-` as `_`) masks its whole value."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            name = k.lower().replace("-", "_") if isinstance(k, str) else ""
            plain = v is None or isinstance(v, bool)  # settings, not credentials (see _plain_value)
            if name and isinstance(v, str | int) and not plain and str(v) and _STRONG.fullmatch(name):
                out[k] = MARK.format("secret")
            else:
                out[k] = redact_obj(v)
        return out
    if isinstance(value, list | tuple):
        return [redact_obj(v) for v in value]
    return value

"""Mask secrets in free text before it reaches a log line, the model or Slack.

Each secret becomes a typed marker such as `[REDACTED:hf_token]`, so evidence still reads ("401 with
[REDACTED:hf_token]") without carrying the value. This runs in the JSON log formatter on every line, so each
rule has a cheap substring trigger and its regex only runs when the trigger is present: a line without
secrets costs a handful of `in` checks.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

MARK = "[REDACTED:{}]"

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
    ("jwt", ("eyJ",), r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("google_api_key", ("AIza",), r"\bAIza[0-9A-Za-z_-]{35}"),
    ("google_oauth_token", ("ya29.",), r"\bya29\.[0-9A-Za-z_.-]{20,}"),
    ("google_refresh_token", ("1//0",), r"\b1//0[0-9A-Za-z_-]{30,}"),
    ("google_client_secret", ("GOCSPX-",), r"\bGOCSPX-[0-9A-Za-z_-]{20,}"),
    ("hf_token", ("hf_", "api_org_"), r"\b(?:hf_|api_org_)[A-Za-z0-9]{30,}"),
    ("slack_token", ("xox", "xapp-"), r"\b(?:xox[abposre]-[0-9A-Za-z-]{10,}|xapp-\d-[0-9A-Za-z-]{10,})"),
    ("github_token", ("gh", "github_pat_"), r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})"),
    ("aws_access_key", ("AKIA", "ASIA"), r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("openai_key", ("sk-",), r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{32,}"),
]
# Flattened to (trigger, compiled, marker): one plain `in` check per entry keeps the no-secret path cheap.
_TOKENS = [(t, re.compile(rx), MARK.format(kind)) for kind, trigs, rx in _TOKEN_RULES for t in trigs]

# scheme://user:password@host -> keep user and host. The user may be empty: `redis://:PASSWORD@host` is how
# Memorystore AUTH strings and redis-py URLs carry a password alone.
_URL_PW = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@'\"]*:)([^\s@/'\"\[]+)(?=@)")
# Command-line flags that take a secret, `--api-key KEY` or `--api-key=KEY` (vLLM's server flag; its
# start-up echo `'api_key': ['KEY']` is handled by the key/value rule below).
_FLAG = re.compile(
    r"(--?(?:[a-z0-9]+[-_])*(?:api[-_]key|token|password|passwd|secret|access[-_]key|auth[-_]token)(?:=|\s+))"
    r"(['\"]?)(?!\[REDACTED)([^\s'\"]+)"
)
# A Cookie / Set-Cookie header carries session credentials: the whole value goes.
_COOKIE = re.compile(r"(?i)(\b(?:set-)?cookie[\"']?\s*[:=]\s*[\"']?)(?!\[REDACTED)([^\r\n\"']+)")
_HEX_TOKEN = re.compile(r"[0-9a-fA-F]{32,}")
_BEARER = re.compile(r"(\b[Bb]earer\s+)([A-Za-z0-9._~+/-]{8,}=*)")
_BASIC = re.compile(r"(\b[Bb]asic\s+)([A-Za-z0-9+/]{8,}={0,2})")

# key = value / "key": "value". Found on the lower-cased text by their keyword, then the whole key name is
# read around it and classified: strong names always hold a secret ("password=hunter2"); weak names only
# when the value looks like one (`token=Token{a64f992` in an Android log is not a credential).
_KEY_TRIGGERS = ("pass", "pwd", "secret", "key", "token", "auth", "credential", "session", "cookie", "sig")
_KEY_RX = re.compile(r"(?:pass|pwd|secret|key|token|auth|credential|session|cookie|sig)[a-z0-9_.-]*[\"']?\s*[:=]\s*")
_STRONG = re.compile(
    r".*(?:passw(?:or)?d|passwd|passphrase|pwd|secret|secret_?key|private_?key(?:_?id)?|api_?key|apikey"
    r"|access_?key(?:_?id)?|credentials?|auth_?token|access_?token|refresh_?token|id_?token|bot_?token"
    r"|hf_?token|session_?key|signing_?secret)"
)
_WEAK = re.compile(r".*(?:token|auth|authorization|key|session|session_?id|cookie|sig|signature)")
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-")
_BARE_VALUE = re.compile(r"[^\s,;&\"'}\])]{1,4000}")
_SECRETISH = re.compile(r"[A-Za-z0-9_\-./+=~]{20,}")


def _entropy(s: str) -> float:
    counts = Counter(s)
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


_PLAIN = frozenset({"true", "false", "none", "null", "yes", "no", "on", "off"})
_PASSWORDISH = re.compile(r".*(?:passw(?:or)?d|passwd|passphrase|pwd|pin)")
_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")


def _plain_value(key: str, value: str) -> bool:
    """A boolean, null or number after a secret-sounding key (`hf_token_from_secret=True`, `api_key_count: 2`):
    not a credential. Tokens, keys and secrets are long mixed strings; only a password may be all digits."""
    if value.lower() in _PLAIN:
        return True
    return _NUMBER.fullmatch(value) is not None and _PASSWORDISH.fullmatch(key) is None


def _looks_secret(value: str) -> bool:
    """Long, mixed letters and digits, high entropy: a credential, not a word or an id like blk_-123."""
    if _HEX_TOKEN.fullmatch(value):  # 32+ hex digits after a token-ish key: a token whatever its entropy
        return True
    if not _SECRETISH.fullmatch(value):
        return False
    if not any(c.isdigit() for c in value) or not any(c.isalpha() for c in value):
        return False
    return _entropy(value) >= 3.5


def _split_sub(kind: str, keep: Callable[[str], bool] | None = None) -> Callable[[re.Match[str]], str]:
    def sub(m: re.Match[str]) -> str:
        if keep is not None and keep(m.group(2)):
            return m.group(0)
        return m.group(1) + MARK.format(kind)

    return sub


def _basic_is_prose(value: str) -> bool:
    # "Basic authentication required" is prose; base64 credentials mix cases or digits or end in '='.
    return not (value.endswith("=") or (any(c.isupper() for c in value) and any(not c.isupper() for c in value)))


_URL_SUB = _split_sub("url_password")
_COOKIE_SUB = _split_sub("cookie")


def _flag_sub(m: re.Match[str]) -> str:
    return m.group(1) + m.group(2) + MARK.format("secret")


_BEARER_SUB = _split_sub("bearer")
_BASIC_SUB = _split_sub("basic_auth", _basic_is_prose)


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
        key = low[start : m.end()].rstrip(" \t=:\"'").replace("-", "_")
        strong = _STRONG.fullmatch(key) is not None
        if not strong and _WEAK.fullmatch(key) is None:
            continue
        pos = m.end()
        if text.startswith(("['", '["'), pos):  # a list of one value, as in vLLM's `'api_key': ['KEY']`
            pos += 1
        quote = text[pos] if pos < len(text) and text[pos] in "\"'" else ""
        if quote:
            close = text.find(quote, pos + 1, pos + 4002)
            if close < 0:
                continue
            vstart, vend = pos + 1, close
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
        if _plain_value(key, value):
            continue
        out.append(text[last:vstart])
        out.append(MARK.format("secret"))
        last = vend
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def redact(text: str) -> str:
    """`text` with every recognised secret replaced by `[REDACTED:<kind>]`."""
    if not text:
        return text
    for trigger, rx, marker in _TOKENS:
        if trigger in text:
            text = rx.sub(marker, text)
    if "://" in text:
        text = _URL_PW.sub(_URL_SUB, text)
    if "-" in text:
        text = _FLAG.sub(_flag_sub, text)
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
                return _key_values(text)
    return text


def redact_obj(value: Any) -> Any:
    """Redact every string inside a JSON-like value; a key that names a secret masks its whole value."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            plain = v is None or isinstance(v, bool) or (isinstance(v, int) and _plain_value(k.lower(), str(v)))
            if (
                isinstance(k, str)
                and isinstance(v, str | int)
                and not plain
                and str(v)
                and _STRONG.fullmatch(k.lower())
            ):
                out[k] = MARK.format("secret")
            else:
                out[k] = redact_obj(v)
        return out
    if isinstance(value, list | tuple):
        return [redact_obj(v) for v in value]
    return value

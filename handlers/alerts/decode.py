"""Alert bodies from strangers, decoded the same way on every path (webhooks and Pub/Sub).

- Not UTF-8, not JSON, or nested deeper than any alert schema (Python's decoder raises RecursionError at about
  a thousand levels): `Undecodable`, a clear reason, and the caller refuses that one message.
- Text that JSON allows but nothing downstream can carry is cleaned, so the alert still goes through: a lone
  surrogate (`"\\udfff"` is valid JSON, but UTF-8 cannot encode it, so Redis, Slack and the JSON dump would
  all fail) becomes U+FFFD; NUL and the other C0/C1 controls except tab and newline are dropped.
- Secrets in the alert's text are masked once, where the alert is made (`redact_alert`, called by each source's
  `to_alerts`), so the queue, the incident record, Slack, the commands that list incidents and the postmortem
  file all hold the masked text whichever of them shows a field (renderers still escape it for their format).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from skills.incidents.model import Alert
from skills.logs.redact import redact, redact_obj

MAX_DEPTH = 64  # the deepest alert schema (Alertmanager: body > alerts > alert > labels) is 4 levels

_SURROGATE = re.compile(r"[\ud800-\udfff]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')  # a JSON string, escapes included (RFC 8259 section 7)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class Undecodable(ValueError):
    """The body cannot be read as an alert document; the message says why."""


def clean_text(s: str) -> str:
    """A string any UTF-8 sink accepts: lone surrogates replaced, control characters (but \\t, \\n) dropped."""
    if s.isascii():
        return _CONTROL.sub("", s) if not s.isprintable() else s
    return _CONTROL.sub("", _SURROGATE.sub("\ufffd", s))


def load_alert_json(data: bytes) -> Any:
    """Parse `data` as UTF-8 JSON, refuse deep nesting, and clean every string (keys and values)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Undecodable(f"not UTF-8 (byte {exc.start})") from None
    # Refused before parsing: json.loads recurses per level, and near the interpreter's limit even a finalizer
    # that runs meanwhile has no stack left to report in (an unraisable RecursionError).
    if _nesting(text) > MAX_DEPTH:
        raise Undecodable(f"nested too deeply (more than {MAX_DEPTH} levels)")
    try:
        doc = json.loads(text)
    except RecursionError:
        raise Undecodable("nested too deeply (alerts are at most a few levels deep)") from None
    except ValueError as exc:
        raise Undecodable(f"malformed JSON: {exc}") from None
    return _clean(doc)


def _nesting(text: str) -> int:
    """The deepest nesting of arrays and objects in a JSON text (strings left out), without recursion."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    depth = peak = 0
    for ch in brackets:
        depth += 1 if ch in "[{" else -1
        peak = max(peak, depth)
    return peak


def _clean(doc: Any) -> Any:
    """Clean strings without recursion; a container deeper than MAX_DEPTH is refused."""
    root: list[Any] = [doc]
    stack: list[tuple[Any, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise Undecodable(f"nested too deeply (more than {MAX_DEPTH} levels)")
        if isinstance(node, list):
            for i, v in enumerate(node):
                if isinstance(v, str):
                    node[i] = clean_text(v)
                elif isinstance(v, (list, dict)):
                    stack.append((v, depth + 1))
        else:  # dict
            for k in list(node):
                v = node.pop(k)
                if isinstance(v, str):
                    v = clean_text(v)
                elif isinstance(v, (list, dict)):
                    stack.append((v, depth + 1))
                node[clean_text(k)] = v
    return root[0]


def _masked_id(raw: str) -> str:
    """`raw` redacted, for a field the alert's identity rides on (its fingerprint, the condition and service it
    groups by). Redaction must not merge alerts (two policies that differ only by the token in their names would
    become one condition) nor split one (it is deterministic: a retry masks the same way). So a value the
    redactor changed carries a digest of the raw value: the same raw value, the same masked id; two raw values,
    two ids. A value with no secret is left exactly as sent (the common case: ids and names stay readable)."""
    masked = redact(raw)
    if masked == raw:
        return raw
    return f"{masked} #{hashlib.sha256(raw.encode()).hexdigest()[:12]}"


def redact_alert(alert: Alert) -> Alert:
    """The alert with every text field redacted (skills/logs/redact.py), its identity kept: the fingerprint,
    condition and service are computed by the source's parser from the raw payload first, then masked with
    `_masked_id`, so dedup and grouping see exactly the alerts they saw before. Label names are redacted too; a
    label whose name means a secret (`api_key`, `password`) loses its whole value (`redact_obj`)."""
    labels = {redact(str(k)): str(v) for k, v in redact_obj(alert.labels).items()}
    return alert.model_copy(
        update={
            "fingerprint": _masked_id(alert.fingerprint),
            "condition": _masked_id(alert.condition),
            "service": _masked_id(alert.service),
            "name": redact(alert.name),
            "summary": redact(alert.summary),
            "url": redact(alert.url),
            "revision": redact(alert.revision),
            "labels": labels,
        }
    )

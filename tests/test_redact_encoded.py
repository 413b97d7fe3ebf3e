"""A secret inside a URL that is itself a parameter of another URL is percent-encoded twice (`%253D` for `=`):
the redactor decodes such a run twice before it looks, so a password in a double-encoded redirect is masked, and
what is not secret (the hosts, the user name) still reads."""

from __future__ import annotations

from urllib.parse import quote

from skills.logs.redact import redact


def test_a_password_in_a_double_encoded_redirect_is_masked() -> None:
    inner = "https://db-admin.example.com/connect?user=app&password=Tr0ub4dor-3x"
    line = f"GET /login?next={quote(quote(inner, safe=''), safe='')} HTTP/1.1 302"
    assert "%253D" in line  # encoded twice, as it is logged
    out = redact(line)
    assert "Tr0ub4dor-3x" not in out
    assert "password=[REDACTED:secret]" in out and "db-admin.example.com" in out and "user=app" in out


def test_a_once_encoded_secret_is_masked_too() -> None:
    line = "GET /cb?state=" + quote("https://x.example.com/?client_secret=Zx8Qm2Lp9Rt4Vw7Yb3Nc6Df1", safe="") + " 200"
    out = redact(line)
    assert "Zx8Qm2Lp9Rt4Vw7Yb3Nc6Df1" not in out and "x.example.com" in out

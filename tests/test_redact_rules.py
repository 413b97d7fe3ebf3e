"""Each redaction rule's exact output, rule by rule: what is masked, by which kind, what is kept around it, and
the ordinary text next to it that must stay. The corpus tests check that no secret leaks; these pin the edges
that let deliberate bugs through there (survivors of `bench/mutation.py --only redact`): the credentials of an
`Authorization` header of any scheme, base64 runs (padding, URL-safe alphabet, printable share, PEM labels),
the key/value reader (quotes, escaped quotes, lists, Unicode, a value that runs over a line), weak key names
that need a secret-looking value, keys by shape, bare PEM lines, and the cheap triggers in front of each rule.

All values are synthetic (made up here, shaped like the formats in tests/redaction_corpus.py)."""

from __future__ import annotations

import base64
from urllib.parse import quote

import pytest

from skills.logs.redact import redact, redact_obj


def b64(data: str | bytes) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


# A 64-column PEM body line (RFC 7468), high entropy, and a 40-character one (the rule's minimum).
PEM_BODY = "RnfhXPGVJ3p1345ExUr6HGJD0ojS+NIuMaeaFQHps/fLei1E1hwvuV1ApvL3h5e6"
PEM_40 = "GsbJ/axcIHgbOkj2Ws4pLyzxKEYlcjJRXuuLHNdR"


def pem(label: str) -> str:
    return f"-----BEGIN {label}-----\n{PEM_BODY}\n{PEM_BODY}\n-----END {label}-----\n"


EXACT = [
    # Authorization of any scheme: the scheme stays, the credentials go; prose after the name stays.
    (
        "Authorization: Token 9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b",
        "Authorization: Token [REDACTED:authorization]",
    ),
    (
        "AUTHORIZATION: SSWS 00QCjAl4MlV-WPXM8mNzCk3YK7xSXKnDXhY2fJcmUi",
        "AUTHORIZATION: SSWS [REDACTED:authorization]",
    ),
    ("Authorization: 9944b09199c62bcf9418ad846dd0e4bb", "Authorization: [REDACTED:authorization]"),
    ("Authorization: required.", "Authorization: required."),
    # Basic: base64 credentials mix cases or end in '='; an all-capitals word is prose.
    ("Authorization: Basic dXNlcjpwYXNzd29yZDE", "Authorization: Basic [REDACTED:basic_auth]"),
    ("Authorization: Basic dxnlcjpwyxnzd29yzde=", "Authorization: Basic [REDACTED:basic_auth]"),
    ("Basic AUTHENTICATION FAILED for /admin", "Basic AUTHENTICATION FAILED for /admin"),
    # Command lines: `config set NAME VALUE` by the name (dashes read as underscores, weak names too), quoted flags.
    ("npm config set private-key-id 1a2b3c4d5e", "npm config set private-key-id [REDACTED:cli_flag]"),
    ("az config set sas_token Ab3dE5gH7j", "az config set sas_token [REDACTED:cli_flag]"),
    (
        "aws configure\tset\taws_secret_access_key Ab3dE5gH7j",
        "aws configure\tset\taws_secret_access_key [REDACTED:cli_flag]",
    ),
    ("vllm serve google/gemma-4 --api-key 'Ab3dE5gH7j'", "vllm serve google/gemma-4 --api-key '[REDACTED:cli_flag]'"),
    # Upper-case header and variable names.
    ("HTTPS_PROXY=ops:Hunter2x@10.0.0.7:3128", "HTTPS_PROXY=ops:[REDACTED:url_password]@10.0.0.7:3128"),
    ("COOKIE: session=Ab3dE5gH7j", "COOKIE: [REDACTED:cookie]"),
    # Signed URLs with only `?` or only `&` before the signature.
    (
        "GET https://acct.blob.core.windows.net/c/b?sig=Ab3dE5%2BgH7j",
        "GET https://acct.blob.core.windows.net/c/b?sig=[REDACTED:signed_url]",
    ),
    ("params: sv=2022-11-02&sig=Ab3dE5gH7jK9", "params: sv=2022-11-02&sig=[REDACTED:signed_url]"),
    # The key/value reader.
    ("İstanbul password=hunter2 ok", "İstanbul password=[REDACTED:secret] ok"),  # 'İ'.lower() is 2 characters
    ("İstanbul PASSWORD=hunter2 ok", "İstanbul PASSWORD=[REDACTED:secret] ok"),  # and the name is still read
    ('password="a password=b" api_secret=hunter2', 'password="[REDACTED:secret]" api_secret=[REDACTED:secret]'),
    ("ok\npassword=hunter2", "ok\npassword=[REDACTED:secret]"),
    ("ok\nmy_password=hunter2", "ok\nmy_password=[REDACTED:secret]"),
    ("X-Api-Key: hunter2", "X-Api-Key: [REDACTED:secret]"),  # a strong name written with dashes
    ("keys=3 password=hunter2", "keys=3 password=[REDACTED:secret]"),  # a name that is not a key name, then one
    ('auth="x password=hunter2', 'auth="x password=[REDACTED:secret]'),  # a quote never closed
    ("token=, password=hunter2", "token=, password=[REDACTED:secret]"),  # no value
    ("token=abc password=hunter2", "token=abc password=[REDACTED:secret]"),  # a weak name, a plain value
    ("api_key=true password=hunter2", "api_key=true password=[REDACTED:secret]"),  # a setting
    ("password=[REDACTED:secret] secret=hunter2", "password=[REDACTED:secret] secret=[REDACTED:secret]"),
    ('password: "\nINFO GET /v1/models 200\n"', 'password: "\nINFO GET /v1/models 200\n"'),  # not across lines
    ('password="a" user="b"', 'password="[REDACTED:secret]" user="b"'),  # to the first closing quote
    ("args: {'api_key': ['Ab3dE5gH7j'], 'port': 8000}", "args: {'api_key': ['[REDACTED:secret]'], 'port': 8000}"),
    ('args: {"api_key": ["Ab3dE5gH7j"], "port": 8000}', 'args: {"api_key": ["[REDACTED:secret]"], "port": 8000}'),
    ("args: {'api_key': ['Ab3dE5 gH7j']}", "args: {'api_key': ['[REDACTED:secret]']}"),  # the quoted value, whole
    ("password=", "password="),
    ("password=Xhunter2", "password=[REDACTED:secret]"),
    (
        '{\\"password\\": \\"hunter2\\", \\"user\\": \\"bob\\"}',
        '{\\"password\\": \\"[REDACTED:secret]\\", \\"user\\": \\"bob\\"}',
    ),
    (
        "{\\'password\\': \\'hunter2\\', \\'user\\': \\'bob\\'}",
        "{\\'password\\': \\'[REDACTED:secret]\\', \\'user\\': \\'bob\\'}",
    ),
    (  # a line that names every trigger word still has its secret masked
        "password=hunter2 pwd secret key token auth credential session cookie sig",
        "password=[REDACTED:secret] pwd secret key token auth credential session cookie sig",
    ),
    # Weak names (token, auth, key, ...) mask a value only when it looks like a credential.
    ("auth=aB3dE5gH7jK9mN1pQ2rS", "auth=[REDACTED:secret]"),
    ("token=3F14DCD3G2B4F32CA21B1EHG41AHE324", "token=[REDACTED:secret]"),  # entropy exactly 3.5 bits
    *(
        (line, line)
        for line in (
            "kms_key: projects/proj-42/locations/us1/keyRings/r9/cryptoKeys/k7",  # names a key, is not one
            "cert_key=/etc/ssl/private/server2048-prod.key",
            "parent_key=organizations/123456789012/folders/9876",
            "parent_key=folders/123456789012/policies/x9Z",
            "token=abc123DEF...xyz789QRS",  # elided in the log already
            "token=abcdefghijklmnopqrstuvwxyzABCDEF",  # no digit: a word
            "token=GGGGHHHH1111222233334444",  # 2.6 bits: below the bar
        )
    ),
    # Keys by shape: upper, lower and digits together at >= 4 bits; anything else stays.
    ("use key_eDebGEAafaHc21cFG12dBFAECbBdfCDH now", "use [REDACTED:api_key] now"),  # exactly 4.0 bits
    ("using key-9l8LhxdBDd8GzEOo8OmoLwrgj3JL5q now", "using [REDACTED:api_key] now"),  # no '_' in the line
    *(
        (line, line)
        for line in (
            "key_ayxUIRNGbjEgqhViDfhXzsRlwDAFsO",  # no digit
            "tok_ql1qkxfp7ptbj1pxeb7wcoyj2ekc82",  # no upper case
            "key_AJYI7QMCVQBF38NSQI0LB7TPYCG79E",  # no lower case
            "token_Aa1Aa1Aa1Aa1Aa1Aa1Aa1Aa1Aa1Aa1",  # mixed but repetitive: 1.6 bits
            "use key_eDebGEAafaHc21cFG12dBFAECbBdfCDD now",  # 3.9 bits
        )
    ),
    # PEM body lines without their header: 40+ base64 characters of high entropy, alone on a line.
    (PEM_BODY, "[REDACTED:private_key]"),
    ("(pod-1) " + PEM_BODY, "(pod-1) [REDACTED:private_key]"),
    (PEM_40, "[REDACTED:private_key]"),
    ("abcd" * 16, "abcd" * 16),
    # A key whose BEGIN line was cut off: the base64 lines that run into its END line.
    (
        "key material: MIIEvQIBADANBgkqhkiG9w0B\\nAQEFAASCBKcwggSjAgEAAoIB\\n-----END PRIVATE KEY-----",
        "key material: [REDACTED:private_key]-----END PRIVATE KEY-----",
    ),
]


@pytest.mark.parametrize(("line", "expected"), EXACT)
def test_each_rule_masks_exactly_its_credential(line: str, expected: str) -> None:
    assert redact(line) == expected


def test_a_quoted_value_is_read_up_to_4000_characters() -> None:
    """The reader looks for the closing quote within 4000 characters: a value that long is masked, and a quote
    left open does not swallow the rest of a long line."""
    assert redact('password="' + "a" * 4000 + '" ok') == 'password="[REDACTED:secret]" ok'
    line = 'password="' + "a" * 4001 + '" ok'
    assert redact(line) == line


def _urlsafe_with(char: str) -> str:
    """URL-safe base64 of a line holding a password whose encoding uses `char` ('-' or '_') and not the other."""
    other = "_" if char == "-" else "-"
    for i in range(5000):
        run = base64.urlsafe_b64encode(f"api password=s3cr3t{i} ok?>~".encode()).decode()
        if char in run and other not in run:
            return run
    raise AssertionError(f"no candidate encodes with {char!r} alone")


@pytest.mark.parametrize(
    "run",
    [
        b64("password=hunter2xy"),  # exactly 24 characters, the shortest run checked
        b64("db password=hunter22").rstrip("="),  # padding dropped: 27 characters
        b64("db password=hunter2x").rstrip("="),  # 26
        b64("db password=hunter2").rstrip("="),  # 26 + 2 pad dropped differently
        b64("db password=hunter2xyz").rstrip("="),  # 30: two '=' to add back
        _urlsafe_with("-"),
        _urlsafe_with("_"),
        b64(b"\x01\x01password=hunter2 and more text here ab"),  # 95% printable exactly
        b64("user: admin\npassword: hunter2\nhost: db\nport: 5432\n"),  # line breaks count as text
    ],
)
def test_base64_of_text_holding_a_secret_is_masked_by_the_kind_inside(run: str) -> None:
    assert redact(f"data: {run} end") == "data: [REDACTED:secret] end"


def test_a_line_that_is_one_24_character_base64_run_is_checked() -> None:
    assert redact(b64("password=hunter2xy")) == "[REDACTED:secret]"


def test_base64_runs_that_are_not_secrets_stay() -> None:
    plain = b64("hello world, this is a plain note for the logs")
    binary = b64(b"\x01" * 10 + b"password=hunter2x")  # 63% printable: binary data, not text
    for line in (f"note: {plain} end", f"blob: {binary} end"):
        assert redact(line) == line
    # a key by shape inside the base64 text: the shape rules run on decoded text too
    shaped = b64("deploy with acme_sk_eDebGEAafaHc21cFG12dBFAECbBdfCDH today")
    assert redact(f"note: {shaped} end") == "note: [REDACTED:api_key] end"


@pytest.mark.parametrize("label", ["CERTIFICATE", "PUBLIC KEY"])
def test_base64_of_public_pem_material_stays(label: str) -> None:
    line = "tls.crt: " + b64(pem(label))
    assert redact(line) == line


def test_base64_of_a_private_key_is_masked_whole() -> None:
    assert redact("blob: " + b64(pem("PRIVATE KEY"))) == "blob: [REDACTED:private_key]"
    # URL-safe characters in its head (it does not decode as standard base64): masked all the same
    cut = "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1JSUV2UUlCQURBTkJn_" + PEM_40
    assert redact("blob: " + cut) == "blob: [REDACTED:private_key]"


def test_redact_obj_keeps_settings_empty_values_and_non_string_keys() -> None:
    value = {1: "x", "password": "", "api_key": True, "client_secret": None, "Password": "hunter2"}
    assert redact_obj(value) == {
        1: "x",
        "password": "",
        "api_key": True,
        "client_secret": None,
        "Password": "[REDACTED:secret]",
    }


def test_a_token_encoded_twice_inside_a_redirect_parameter_is_masked() -> None:
    """A sign-in redirect carries a URL in a parameter, and that URL carries another one in its own parameter,
    so the inner URL's query is percent-encoded twice (`%253D` for `=`): here oauth2-proxy's `rd=` holding a
    `continue=` that holds a token-info URL with a Google access token in its query (a synthetic token of the
    `ya29.` shape the plain rule masks). Decoded once, the token still sits behind `%3D` and no rule reads it."""
    token = "ya29.a0AfB_byC3kLq9ZrT7mWx2PdVn8sHj4QeYt6UoIiGf1"
    inner = f"https://www.googleapis.com/oauth2/v3/tokeninfo?access_token={token}"
    middle = "https://accounts.example.com/signin?continue=" + quote(inner, safe="")
    line = f'INFO:     10.128.0.4:51234 - "GET /oauth2/start?rd={quote(middle, safe="")} HTTP/1.1" 302 Found'
    assert "%253Faccess_token%253Dya29." in line  # the token's query really is encoded twice
    assert redact(line) == (
        'INFO:     10.128.0.4:51234 - "GET /oauth2/start?rd=https://accounts.example.com/signin?continue='
        'https://www.googleapis.com/oauth2/v3/tokeninfo?access_token=[REDACTED:google_oauth_token] HTTP/1.1" 302 Found'
    )

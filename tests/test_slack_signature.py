"""The signature gate in front of Bolt (handlers/slack_request.py), on slack_sdk's own SignatureVerifier with an
injected clock: each refusal is a 401 that says which check failed, and the five-minute window is inclusive
(Slack's sample code: `abs(time.time() - timestamp) > 60 * 5` is the stale case)."""

from __future__ import annotations

import pytest
from slack_sdk.signature import Clock, SignatureVerifier
from starlette.datastructures import Headers

from bot.sandbox.slack_signing import signed_headers
from handlers.http_body import HttpProblem
from handlers.slack_request import MAX_SKEW_S, verify

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BODY = "token=x&team_id=T1&command=%2Fgemma&text=help"
NOW = 1_700_000_000


class FixedClock(Clock):
    def __init__(self, now: int) -> None:
        self._now = now

    def now(self) -> float:
        return float(self._now)


def _refusal(headers: dict[str, str], body: str = BODY, now: int = NOW) -> str:
    with pytest.raises(HttpProblem) as exc:
        verify(SignatureVerifier(SECRET, clock=FixedClock(now)), body.encode(), Headers(headers))
    assert exc.value.status == 401
    return exc.value.message


def test_each_missing_or_malformed_part_is_named() -> None:
    good = signed_headers(SECRET, BODY, ts=NOW)
    no_sig = {k: v for k, v in good.items() if k.lower() != "x-slack-signature"}
    no_ts = {k: v for k, v in good.items() if k.lower() != "x-slack-request-timestamp"}
    assert _refusal(no_sig) == "missing Slack signature headers"
    assert _refusal(no_ts) == "missing Slack signature headers"
    assert _refusal({}) == "missing Slack signature headers"
    assert _refusal({**good, "X-Slack-Request-Timestamp": "12.5"}) == (
        "X-Slack-Request-Timestamp is not a Unix time in seconds"
    )
    assert _refusal({**good, "X-Slack-Signature": "v0=" + "0" * 64}) == "invalid Slack signature"
    assert _refusal(good, body=BODY + "&x=1") == "invalid Slack signature"  # signed over other bytes


def test_the_five_minute_window_is_inclusive_on_both_sides() -> None:
    for skew in (-MAX_SKEW_S, MAX_SKEW_S):
        headers = Headers(signed_headers(SECRET, BODY, ts=NOW + skew))  # as bot/web.py passes them
        verify(SignatureVerifier(SECRET, clock=FixedClock(NOW)), BODY.encode(), headers)
    for skew in (-MAX_SKEW_S - 1, MAX_SKEW_S + 1):
        stale = signed_headers(SECRET, BODY, ts=NOW + skew)
        assert _refusal(stale) == "stale or future X-Slack-Request-Timestamp (more than 5 minutes off)"

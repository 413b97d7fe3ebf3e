"""The Slack Web client's retries on 5xx wait out slack-sdk's backoff (0.5 s, then 1 s, plus jitter) on the
injected clock, as its 429 handling waits out Retry-After: with a scaled clock in tests and benches the
retries still happen in order, without spending wall time. Real slack-sdk client, Slack stand-in."""

from __future__ import annotations

from bot.sandbox.slack_api import Fault, SlackStandIn
from bot.settings import Settings
from bot.slack_app import make_web_client


class RecordingClock:
    """A clock whose waits end at once and are remembered (time moves by what was waited)."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def now(self) -> float:
        return sum(self.waits)

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)


async def test_server_error_retries_back_off_on_the_injected_clock(settings: Settings, slack: SlackStandIn) -> None:
    slack.inject("chat.postMessage", Fault(status=500), Fault(status=503))
    clock = RecordingClock()
    client = make_web_client(settings, clock)
    resp = await client.chat_postMessage(channel="#gemma-alerts", text="hello")
    assert resp["ok"]
    assert [c.method for c in slack.calls].count("chat.postMessage") == 3  # two failures, then the post
    first, second = clock.waits
    # slack-sdk's exponential backoff (0.5 s, then 1 s, each plus up to 1 s of jitter), waited on our clock
    assert 0.5 <= first < 1.5 and 1.0 <= second < 2.0

"""Links only to hosts we trust: an alert's console link is a link only when it points at Google Cloud's console
(https://console.cloud.google.com); any other address -- a look-alike host, userinfo tricks, an Alertmanager
page -- is shown as text, never under a trusted label. Bidirectional-override and isolate characters (which
make text read differently from what it says) are stripped from everything posted."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from slack_sdk.web.async_client import AsyncWebClient

from bot.sandbox.slack_api import SlackStandIn
from bot.settings import Settings
from bot.slack_app import ChannelResponder
from handlers.incident_render import header_reply
from handlers.render_slack import to_blocks
from handlers.reply import FileOut, Reply
from skills.incidents.model import Alert, new_incident

BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def _header(url: str, source: str = "gcp", name: str = "p95 latency high", summary: str = "") -> str:
    text, blocks = _header_parts(url, source, name, summary)
    return text + json.dumps(blocks, ensure_ascii=False)


def _header_parts(
    url: str, source: str = "gcp", name: str = "p95 latency high", summary: str = ""
) -> tuple[str, list[dict[str, object]]]:
    alert = Alert(
        source=source,  # type: ignore[arg-type]
        fingerprint="f1",
        state="firing",
        name=name,
        service="vllm-gemma4",
        summary=summary,
        url=url,
    )
    now = datetime(2026, 1, 1, tzinfo=UTC)
    inc = new_incident("1-0", alert, "C1", True, now)
    inc.apply("1-0", alert, now)
    return to_blocks(header_reply(inc, "vllm-gemma4"))


def test_a_console_link_stays_a_link() -> None:
    url = "https://console.cloud.google.com/monitoring/alerting/incidents/0.abc?project=p"
    assert f"<{url}|Cloud Monitoring incident>" in _header(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example/monitoring/alerting/incidents/0.abc",
        "https://console.cloud.google.com.evil.example/monitoring",
        "https://console.cloud.google.com@evil.example/monitoring",
        "http://console.cloud.google.com/monitoring",  # not https
        "https://evil.example/?next=https://console.cloud.google.com/",
    ],
)
def test_an_untrusted_incident_url_is_text_not_a_trusted_link(url: str) -> None:
    shown = _header(url)
    assert f"<{url}|" not in shown and "|Cloud Monitoring incident>" not in shown
    assert url.split("://", 1)[1][:20] in shown  # the address is still there, as text


def test_an_alertmanager_page_is_text() -> None:
    url = "http://alertmanager.monitoring:9093/#/alerts"
    shown = _header(url, source="alertmanager")
    assert f"<{url}|" not in shown and "alertmanager.monitoring:9093" in shown


def test_bidi_controls_from_an_alert_never_reach_slack() -> None:
    shown = _header(
        "https://console.cloud.google.com/x",
        name=f"ok \u202egnp.exe{BIDI}",
        summary=f"\u2067evil\u2069 text {BIDI}",
    )
    assert not set(BIDI) & set(shown)
    assert "gnp.exe" in shown and "evil" in shown


@given(st.text(alphabet=st.sampled_from([*BIDI, "a", " ", "<", "`", "*", "\u05d0"]), max_size=80))
def test_property_no_bidi_control_survives_any_reply_field(s: str) -> None:
    r = Reply(title=s, context=s)
    r.add(heading=s, text=s, fields=[(s or "k", s or "v")], code=s)
    text, blocks = to_blocks(r)
    assert not set(BIDI) & set(text + json.dumps(blocks, ensure_ascii=False))


async def test_bidi_controls_never_reach_slack_in_an_uploaded_file(slack: SlackStandIn, settings: Settings) -> None:
    """A log digest or postmortem draft carries outside text (log lines, alert summaries) into a file the thread
    shows: its name, title and text content lose the controls too; a binary file (a chart) is left as it is."""
    digest = f"ERROR \u202egnp.exe{BIDI} from the log\n".encode()
    png = b"\x89PNG\r\n\x1a\n" + "\u202e".encode() + b"\x00\xff"
    reply = Reply(title="digest")
    reply.files += [
        FileOut(filename="svc\u202e-logs.txt", title="Full log digest \u2067x\u2069", content=digest),
        FileOut(filename="chart.png", title="chart", content=png),
    ]
    client = AsyncWebClient(token="xoxb-test-token", base_url=settings.slack_api_url)
    await ChannelResponder(client, "C1").post(reply)
    text_file, chart = slack.shared
    shown = text_file["content"].decode() + text_file["filename"] + text_file["title"]
    assert not set(BIDI) & set(shown)
    assert "gnp.exe" in shown and "from the log" in shown and "Full log digest" in shown
    assert chart["content"] == png


def _mrkdwn_objects(obj: object) -> list[dict[str, object]]:
    if isinstance(obj, dict):
        own = [obj] if obj.get("type") == "mrkdwn" else []
        return own + [m for v in obj.values() for m in _mrkdwn_objects(v)]
    if isinstance(obj, list):
        return [m for v in obj for m in _mrkdwn_objects(v)]
    return []


def test_a_bare_address_in_outside_text_is_not_made_a_link() -> None:
    """Slack turns a bare URL in a mrkdwn text object into a link unless the object is `verbatim` ("When set to
    false (as is default) URLs will be auto-converted into links": docs.slack.dev, Block Kit text object). An
    alert summary or a log line saying 'https://evil.example' must stay text; our own <url|label> links stay."""
    console = "https://console.cloud.google.com/monitoring/alerting/incidents/0.abc"
    _, header = _header_parts(console, summary="see https://evil.example/login and #general")
    _, blocks = to_blocks(Reply(title="x", context="https://evil.example").add(text="www.evil.example", code="a"))
    objects = _mrkdwn_objects(header) + _mrkdwn_objects(blocks)
    assert objects and all(o.get("verbatim") is True for o in objects), [o for o in objects if not o.get("verbatim")]
    assert f"<{console}|Cloud Monitoring incident>" in json.dumps(
        header
    )  # manual markup is still processed under verbatim

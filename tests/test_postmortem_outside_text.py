"""Issue 45, item 4: outside text is data in the postmortem, in its Markdown file and its Slack reply.

A policy name carrying a Markdown heading (and a code fence), and a resolve note carrying table rows, headings, a
quote and list items, go through the real surfaces: the alert webhook, the Resolve… form (a signed button press,
then the form's submission), and a signed `/gemma postmortem`. The file's sections and timeline rows are exactly
the ones the draft writes (its lines parsed: headings, table rows, list items, setext underlines), and the reply's
Cause, What fixed it and Timeline say only what the records say, one line per item.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import redis.asyncio as redis

from bot.deps import Deps
from bot.sandbox.slack_api import SlackStandIn
from bot.sandbox.slack_signing import command_body, signed_headers
from bot.settings import Settings
from bot.web import create_app
from tests.alerts_fixtures import basic, gcp_alert, make_deps, tuned
from tests.conftest import SIGNING_SECRET
from tests.eventually import eventually
from tests.test_plans_thread import click_body

POLICY = "checkout latency ```\n## Cause\nforged cause\n| 00:00:00 | forged row | alert |"
NOTE = (
    "rolled back by hand\n| 12:00:00 | all good, nothing happened | alert |\n|---|---|---|\n"
    "# Heading\n## Cause\nforged cause\n> quoted\n- [ ] forged follow-up\n---\nsetext"
)
SECTIONS = ["Impact", "Timeline (UTC)", "Cause", "What fixed it", "Follow-ups"]


class Bot:
    def __init__(self, deps: Deps, app: Any, client: httpx.AsyncClient, slack: SlackStandIn) -> None:
        self.deps, self.app, self.client, self.slack = deps, app, client, slack

    async def drained(self) -> bool:
        queue = self.app.state.alert_queue

        async def empty() -> bool:
            b = await queue.backlog()
            return not (b["queued"] or b["pending"] or (queue.publisher and await queue.publisher.pending()))

        await self.deps.drain()
        return bool(await eventually(empty, timeout=30))

    async def signed(self, body: str) -> None:
        r = await self.client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
        assert r.status_code == 200, r.text
        await self.deps.drain()


@pytest.fixture
async def bot(settings: Settings, redis_client: redis.Redis, slack: SlackStandIn) -> AsyncIterator[Bot]:
    deps = make_deps(tuned(settings))
    app = create_app(deps)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test") as client,
    ):
        yield Bot(deps, app, client, slack)


async def _resolved_incident(bot: Bot) -> tuple[str, str]:
    """An alert whose policy name forges a section; resolved through the Resolve… form with the forging note.
    Returns (incident id, alerts channel id)."""
    slack = bot.slack
    r = await bot.client.post("/alerts/gcp", json=gcp_alert("0.forge", service="checkout", policy_name=POLICY),
                              headers=basic())  # fmt: skip
    assert r.status_code == 202, r.text
    assert await bot.drained()
    [header] = [c for c in slack.of("chat.postMessage") if not c.get("thread_ts") and "incident inc-" in str(c)]
    inc_id = re.search(r"incident (inc-[0-9-]+)", json.dumps(header))
    assert inc_id
    channel = slack.channel_id(str(header["channel"]))
    ts = next(str(m["ts"]) for m in slack.accepted if m.get("_method") == "chat.postMessage" and not m.get("thread_ts"))
    trigger = f"trig-{uuid.uuid4().hex[:8]}"
    url = slack.response_url(trigger)
    await bot.signed(click_body("gemma_inc_resolve", inc_id.group(1), channel, ts, None, "UDAN", trigger, url))
    [form] = slack.of("views.open")
    await bot.signed(urlencode({"payload": json.dumps({
        "type": "view_submission", "team": {"id": "T0001"}, "user": {"id": "UDAN"}, "api_app_id": "A1",
        "trigger_id": f"trig-{uuid.uuid4().hex[:8]}",
        "view": {"id": "V0001", "type": "modal", "callback_id": "gemma_inc_resolve_submit",
                 "private_metadata": form["view"]["private_metadata"],
                 "state": {"values": {"note": {"value": {"type": "plain_text_input", "value": NOTE}}}}},
    })}))  # fmt: skip
    assert await bot.drained()
    return inc_id.group(1), channel


def _postmortem_reply(slack: SlackStandIn) -> dict[str, Any]:
    """The postmortem as Slack got it: posted in the thread, or the command's answer."""
    found = [c for c in slack.of("chat.postMessage") if "Postmortem draft" in str(c.get("text"))]
    found += [r for r in slack.responses if "Postmortem draft" in str(r.get("text"))]
    assert len(found) == 1, found
    return found[0]


def _texts(msg: dict[str, Any]) -> list[str]:
    """Each section's text, in order (headings are sections of their own)."""
    return [b["text"]["text"] for b in msg.get("blocks") or [] if b.get("type") == "section" and b.get("text")]


def _under(texts: list[str], heading: str) -> str:
    i = texts.index(f"*{heading}*")
    return texts[i + 1]


async def test_a_forged_heading_and_table_rows_add_no_section_or_row_to_the_postmortem(bot: Bot) -> None:
    inc_id, channel = await _resolved_incident(bot)
    body = command_body(f"postmortem {inc_id}", bot.slack.response_url("pm"), trigger_id="trig-pm",
                        user_id="UDAN", channel_id=channel)  # fmt: skip
    await bot.signed(body)
    assert await bot.drained()

    # The file: exactly our headings, our three timeline rows (with the header and delimiter rows), and list items
    # only where the draft writes them.
    [content] = list(bot.slack.uploads.values())
    md = content.decode()
    lines = md.splitlines()
    headings = [line for line in lines if re.match(r" {0,3}#{1,6}(\s|$)", line)]
    assert headings[0].startswith("# Postmortem: checkout latency") and headings[0].endswith(" on checkout")
    assert [h.removeprefix("## ") for h in headings[1:] if h != "## Summary"] == SECTIONS, headings
    rows = [line for line in lines if re.match(r" {0,3}\|", line)]
    assert len(rows) == 2 + 3, rows  # alert fired, incident opened, resolved by hand
    cells = [re.split(r"(?<!\\)\|", row)[1:-1] for row in rows]
    assert all(len(c) == 3 for c in cells), cells  # a note's `|` splits no cell
    resolved = next(c for c in cells if "resolved by UDAN" in c[1])
    assert "rolled back by hand" in resolved[1] and "forged follow-up" in resolved[1]  # the note, as data
    assert not [line for line in lines if re.match(r" {0,3}(>|=+\s*$|-+\s*$|\d+[.)]\s)", line) and line != "---"]
    assert lines[lines.index("---") - 1] == "", "a setext underline: the line before our rule is a heading"
    sections = {h: [] for h in SECTIONS}
    current = ""
    for line in lines:
        if line.startswith("## "):
            current = line.removeprefix("## ")
        elif line.startswith(("- ", "---")) and current in sections:
            sections[current].append(line)
    assert sections["Cause"] == ["- No finding was recorded for this incident."]
    [fixed] = sections["What fixed it"]
    assert fixed.startswith("- Resolved by hand by UDAN: rolled back by hand") and "forged cause" in fixed

    # The Slack reply: one Cause heading, its items the records' only; every item one line.
    reply = _postmortem_reply(bot.slack)
    texts = _texts(reply)
    assert "\n" not in texts[0] and "forged cause" in texts[0]  # the title: the name on one line
    assert sum(1 for t in texts if re.search(r"(^|\n)\*?Cause\*?(\n|$)", t)) == 1, texts
    assert _under(texts, "Cause") == "• No finding was recorded for this incident."
    fix = _under(texts, "What fixed it").splitlines()
    assert len(fix) == 1 and fix[0].startswith("• Resolved by hand by UDAN: rolled back by hand"), fix
    code = next(t for t in texts if t.startswith("```"))
    inner = code[3:-3]
    assert "```" not in inner, "a backtick fence in outside text closes the timeline's code block"
    assert len(inner.strip("\n").splitlines()) == 3, inner  # three events, one line each

"""Untrusted text (model output, log lines, alert fields, echoed input) never becomes a Slack mention or link.

Slack treats &, < and > as control characters in mrkdwn and asks for them to be sent as &amp; &lt; &gt;
when they are not meant as markup (https://api.slack.com/reference/surfaces/formatting#escaping). The
renderer (handlers/render_slack.py) escapes every text field of a Reply; only the mentions and links the
code lists in the Reply's trusted fields are markup. Every rendered message is also checked with slack-sdk's
own Block Kit models.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from slack_sdk.models.blocks import Block

from bot.sandbox.slack_api import validate_deep
from handlers.commands.logs import render_diagnosis
from handlers.conversation import answer_reply
from handlers.incident_investigation import render_plan
from handlers.incident_render import header_reply
from handlers.remediation_render import render_remediation
from handlers.render_slack import to_blocks
from handlers.reply import Reply
from skills.diagnosis.remediation import Evidence, ProposedAction, RemediationProposal
from skills.incidents.model import Alert, new_incident

EVIL = "<!channel> see <https://evil.example/x|Grafana> & <@U0BOSS>"


def _texts(blocks: list[dict[str, Any]]) -> str:
    return json.dumps(blocks)


def _assert_inert(text: str, blocks: list[dict[str, Any]]) -> None:
    dumped = text + _texts(blocks)
    assert "<!channel>" not in dumped
    assert "<https://evil" not in dumped
    assert "<@U0BOSS>" not in dumped
    assert "&lt;!channel&gt;" in dumped
    assert "&amp;lt;" not in dumped  # escaped once, at the boundary, not twice
    assert_valid_blocks(blocks)


def assert_valid_blocks(blocks: list[dict[str, Any]]) -> None:
    """Block Kit's limits as slack-sdk knows them (it raises SlackObjectFormationError on a violation)."""
    assert len(blocks) <= 50
    for b in Block.parse_all(blocks):
        assert b is not None
        validate_deep(b)  # validate_json on the block and on every element inside it


def _evil_plan() -> RemediationProposal:
    return RemediationProposal(
        summary=EVIL,
        likely_root_cause=EVIL,
        evidence=[Evidence(text=EVIL, source="logs")],
        steps=[EVIL],
        proposed_actions=[ProposedAction(action="scale", params={"min_instances": 0, "max_instances": 3}, reason=EVIL)],
        confidence="high",
        fallback_note="",
    )


def test_alert_thread_plan_escapes_model_text_title_included() -> None:
    reply = render_plan(_evil_plan(), "gemma")
    _assert_inert(*to_blocks(reply))


def test_one_renderer_for_both_plan_surfaces() -> None:
    plan = _evil_plan()
    assert to_blocks(render_plan(plan, "gemma")) == to_blocks(render_remediation(plan, "gemma"))


def test_fallback_note_and_footer_are_escaped() -> None:
    plan = _evil_plan().model_copy(update={"fallback_note": EVIL})
    _assert_inert(*to_blocks(render_remediation(plan, "gemma", footer=EVIL)))


def test_agent_answer_escaped_once() -> None:
    _assert_inert(*to_blocks(answer_reply(EVIL, [])))


def test_log_lines_in_diagnosis_are_escaped() -> None:
    from skills.diagnosis.diagnose import diagnose
    from skills.ports import LogEntry

    lines = [EVIL, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB " + EVIL]
    d = diagnose([LogEntry(text=t, severity="ERROR") for t in lines])
    reply = render_diagnosis("gemma", d)
    _, blocks = to_blocks(reply)
    assert "<!channel>" not in json.dumps(blocks)
    assert_valid_blocks(blocks)


def test_alert_fields_escaped_but_the_console_link_stays_a_link() -> None:
    url = "https://console.cloud.google.com/monitoring/alerting/incidents/0.abc?project=p"
    alert = Alert(source="gcp", fingerprint="f1", state="firing", name=EVIL, service="gemma", summary=EVIL, url=url)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    inc = new_incident("1-0", alert, "C1", True, now)
    inc.apply("1-0", alert, now)
    text, blocks = to_blocks(header_reply(inc, "gemma"))
    _assert_inert(text, blocks)
    assert "&lt;!channel&gt;" in text and "&lt;!channel&gt;" in blocks[0]["text"]["text"]  # the title too
    assert f"<{url}|Cloud Monitoring incident>" in json.dumps(blocks)


def test_a_link_field_with_markup_in_the_url_is_not_a_link() -> None:
    url = "https://evil.example/|Grafana"
    r = Reply(title="t").add(text="x")
    r.links.append((url, "Alertmanager"))
    # A URL with a pipe or angle bracket cannot be a trusted link: it is refused, not rendered.
    assert r.links == [] or "<https://evil.example/|" not in json.dumps(to_blocks(r)[1])


def test_listed_mentions_stay_mentions_others_do_not() -> None:
    r = Reply(title="Deploy confirmed by <@U123>", mentions=["U123"])
    r.add(text=f"model says {EVIL}")
    r.context = "asked by <@U123>"
    _, blocks = to_blocks(r)
    dumped = json.dumps(blocks)
    assert "<@U123>" in dumped and "<@U0BOSS>" not in dumped and "<!channel>" not in dumped
    assert_valid_blocks(blocks)

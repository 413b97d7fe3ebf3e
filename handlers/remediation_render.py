"""The one remediation renderer: a RemediationProposal as a Reply, the same in an alert thread and for /gemma analyze.

Model text goes in as it is (redacted here: plans quote logs); escaping happens once, in the Slack renderer
(handlers/render_slack.py). Every proposed action is a plan button (plan -> confirm), never the write.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from handlers.reply import Button, Reply, plan_button
from skills.diagnosis.remediation import RemediationProposal
from skills.logs.redact import redact
from skills.text import shorten


def action_label(action: str, params: dict[str, Any], prefix: str = "") -> str:
    """`Plan redeploy: k=v, ...`: a plan button names every parameter its plan changes."""
    shown = ", ".join(f"{k}={v}" for k, v in params.items())
    return shorten(f"{prefix or f'Plan {action}'}: {shown}".rstrip(": "), 75)  # Slack: button text up to 75


def action_buttons(actions: Iterable[Any]) -> list[Button]:
    """A plan button per proposed action (anything with .action and .params)."""
    return [plan_button(a.action, a.params, action_label(a.action, a.params)) for a in actions]


def render_remediation(plan: RemediationProposal, service: str, footer: str = "") -> Reply:
    """A RemediationProposal as a Reply: model text redacted, evidence quoted, a button per action."""
    if plan.fallback_note:
        reply = Reply(title=f":warning: {service}: deterministic findings (no model plan)")
        reply.add(text=redact(plan.fallback_note))
    else:
        reply = Reply(title=f":clipboard: {service}: remediation plan ({plan.confidence} confidence)")
    reply.add(heading="Summary", text=redact(plan.summary))
    if plan.likely_root_cause:
        reply.add(heading="Likely root cause", text=redact(plan.likely_root_cause))
    if plan.evidence:
        # Quoted in a code block: log text is shown as data, never rendered as mrkdwn.
        lines = [f"[{e.source or 'evidence'}] {e.text}" for e in plan.evidence[:8]]
        reply.add(heading="Evidence", code=redact("\n".join(lines))[:2800])
    if plan.steps:
        reply.add(heading="Steps", text="\n".join(f"{i}. {redact(s)}" for i, s in enumerate(plan.steps[:10], 1)))
    reply.buttons.extend(action_buttons(plan.proposed_actions))
    if plan.proposed_actions:
        reply.add(
            heading="Proposed actions",
            text="\n".join(
                f"• *{a.action}* {redact(str(a.params))} — {redact(a.reason)}" for a in plan.proposed_actions
            ),
        )
    reply.context = footer or None
    return reply

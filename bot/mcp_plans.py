"""Writes asked for through MCP: a plan a human confirms outside the agent's reach.

A write tool computes and stores the plan exactly as `/gemma deploy` does (WriteFlow.propose: the same plan store,
diff, gcloud equivalent and preflight), then posts it to the operations channel with the usual Confirm / Cancel
buttons; the deployed bot (sharing the Redis store) handles the click, and plan_status reads what it records.
The caller's own confirmation is possible only through MCP elicitation -- the client asking its human -- and only
where MCP_ELICIT_CONFIRM enables it, never for destroy; it passes the same deployer check as a click.

Plans, locks and the audit must be the deployed bot's, so one lock guards a service whichever surface proposed
the change: outside the sandbox, the in-process store refuses every write with the reason.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from bot.mcp_result import ToolResult
from handlers.button_payloads import ButtonPayloads
from handlers.commands.plans import progress_reply, render_plan
from skills.audit import latest
from skills.deploy.confirm import Refused, Where
from skills.deploy.execute import Progress
from skills.deploy.flow import BACKGROUND
from skills.errors import UserFacingError
from skills.targets.plan import Plan
from skills.text import shorten

if TYPE_CHECKING:
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.deps import Deps

log = logging.getLogger(__name__)

NO_SHARED_STORE = (
    "Writes through MCP need the bot's Redis (REDIS_URL): plans, service locks and the audit must be the ones the "
    "deployed bot confirms against. This server runs on an in-process store, so it can read but not plan writes."
)
# The elicitation form: one yes/no the client shows its human.
CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Run this plan", "description": "true runs it now"}},
    "required": ["confirm"],
}


def plan_view(plan: Plan) -> dict[str, Any]:
    """What a plan says, as data: the diff, the gcloud equivalent, the preflight and why it may be blocked."""
    return {
        "id": plan.id,
        "kind": plan.kind,
        "service": plan.service,
        "summary": plan.summary,
        "params": plan.params,
        "verdict": plan.verdict,
        "notes": plan.notes,
        "changes": [c.line() for c in plan.changes],
        "create": plan.create,
        "gcloud": plan.gcloud,
        "preflight": [c.line() for c in plan.preflight],
        "blocked": plan.blocked(),
        "expires_at": plan.expires_at,
        "created_by": plan.created_by,
    }


class PlanPoster:
    """Proposes writes for one MCP server: stores the plan, posts it where a deployer confirms it."""

    def __init__(self, deps: Deps, chat: AsyncWebClient | None, channel: str, elicit: bool) -> None:
        self.deps = deps
        self.chat = chat  # None: no Slack configured (the sandbox without Slack: elicitation is the only path)
        self.channel = channel
        self.elicit = elicit

    def refusal(self) -> str:
        """Why this server cannot plan writes at all ('' when it can)."""
        if self.deps.sandbox is None and not self.deps.settings.redis_url:
            return NO_SHARED_STORE
        if self.chat is None and self.deps.sandbox is None:
            return "Plans are confirmed in Slack by a deployer: set SLACK_BOT_TOKEN (and MCP_PLAN_CHANNEL) for writes."
        return ""

    async def propose(self, kind: str, params: dict[str, Any], caller: str) -> tuple[Plan, str]:
        """Store and post the plan; returns it and where it was posted ('' when it could not be)."""
        why = self.refusal()
        if why:
            raise Refused(why)
        writes = self.deps.writes
        plan = await writes.propose(kind, params, user_id=caller, channel_id=self.channel)
        if self.chat is None:
            return plan, ""
        reply = render_plan(plan)
        reply.context = (reply.context or "") + " · proposed through MCP: only a deployer's click here runs it"
        payloads = ButtonPayloads(self.deps.redis, self.deps.settings.key)
        from handlers.render_slack import to_blocks

        text, blocks = to_blocks(await payloads.stash(reply))
        try:
            resp = await self.chat.chat_postMessage(channel=self.channel, text=text, blocks=blocks)
        except Exception as exc:  # noqa: BLE001 - whatever Slack answered, the plan must not stay behind
            await writes.plans.discard(plan.id)  # nobody could ever confirm it: it must not hold anything
            log.warning("mcp: could not post plan %s: %s: %s", plan.id, type(exc).__name__, str(exc)[:200])
            raise UserFacingError(
                f"The plan could not be posted to {self.channel}, so nobody could confirm it; nothing was planned.",
                "Check SLACK_BOT_TOKEN and that the bot is in the channel (MCP_PLAN_CHANNEL).",
            ) from None
        # A click must come from where the plan is shown: Slack answers with the channel's id.
        plan.channel_id = str(resp.get("channel") or self.channel)
        plan.message_ts = str(resp["ts"])
        await writes.plans.save(plan)
        return plan, plan.channel_id

    async def ask_human(self, session: Any, plan: Plan, caller: str, related_request_id: Any) -> str:
        """Elicitation: the client's human confirms (never for destroy); the deployer check still applies.
        Returns what happened, for the tool's text."""
        if not self.elicit or plan.kind == "destroy" or plan.blocked():
            return ""
        caps = getattr(session, "client_capabilities", None)
        if caps is None or caps.elicitation is None:
            return ""
        try:
            answer = await session.elicit_form(
                message=f"gemma-sre: run this plan? {plan.summary} (plan {plan.id}, service {plan.service})",
                requested_schema=CONFIRM_SCHEMA,
                related_request_id=related_request_id,
            )
        except Exception as exc:  # noqa: BLE001 - the plan is made and posted; only the client's answer is missing
            log.warning("mcp: elicitation for plan %s failed: %s: %s", plan.id, type(exc).__name__, str(exc)[:200])
            return "The client could not be asked; the plan stays pending."
        if answer.action != "accept" or (answer.content or {}).get("confirm") is not True:
            return "Not confirmed in the client; the plan stays pending."
        writes = self.deps.writes
        try:
            plan, lock = await writes.claim(plan.id, caller, None, Where(plan.channel_id, plan.thread_ts))
        except Refused as exc:
            return f"Not run: {exc}"
        task = asyncio.ensure_future(self._run(plan, lock, caller))
        BACKGROUND.add(task)  # the write goes on after this call returns; plan_status follows it
        task.add_done_callback(BACKGROUND.discard)
        return f"Confirmed by {caller} in the client; the write is running."

    async def _run(self, plan: Plan, lock: Any, caller: str) -> None:
        stages = self.deps.targets.for_kind(plan.target).progress_stages(plan)

        async def on_progress(p: Progress) -> None:
            if self.chat is None or not plan.message_ts:
                return
            try:
                reply = progress_reply(plan, caller, p, stages)
                from handlers.render_slack import to_blocks

                text, blocks = to_blocks(reply)
                await self.chat.chat_update(channel=plan.channel_id, ts=plan.message_ts, text=text, blocks=blocks)
            except Exception:  # noqa: BLE001 - the write's own progress must not stop for a stale message
                log.warning("mcp: could not update the message of plan %s", plan.id)

        await self.deps.writes.run(plan, lock, caller, on_progress)


async def plan_status(deps: Deps, plan_id: str, caller: str) -> ToolResult:
    """pending / confirmed / running / ready / failed / cancelled, from what the write flow records, for the caller
    that proposed the plan only: to anyone else it is an unknown id (whether it exists is not theirs to learn)."""
    writes = deps.writes
    if await writes.plans.proposed_by(plan_id) != caller:
        raise _unknown(plan_id)
    progress = await writes.plans.progress(plan_id)
    if progress is not None:
        phase = str(progress.get("phase", ""))
        state = ("succeeded" if progress.get("ok") else "failed") if progress.get("done") else "running"
        text = f"Plan {plan_id}: {state} ({phase}), confirmed by {progress.get('confirmed_by')}"
        if progress.get("detail") and progress.get("done"):
            text += f": {progress['detail']}"
        return ToolResult({"plan_id": plan_id, "state": state, **progress}, shorten(text, 500))
    who = await writes.plans.claimed_by(plan_id)
    if who:
        return ToolResult(
            {"plan_id": plan_id, "state": "confirmed", "confirmed_by": who, "phase": "submitted"},
            f"Plan {plan_id}: confirmed by {who}; the write is starting.",
        )
    plan = await writes.plan(plan_id)
    if plan is not None:
        return ToolResult(
            {"plan_id": plan_id, "state": "pending", "plan": plan_view(plan)},
            f"Plan {plan_id}: pending a deployer's confirmation ({plan.summary}).",
        )
    for entry in await latest(deps.redis, deps.settings.key("audit"), 50):
        if entry.plan_id == plan_id:
            return ToolResult(
                {"plan_id": plan_id, "state": entry.result, "by": entry.user_id, "detail": entry.detail},
                f"Plan {plan_id}: {entry.result} by {entry.user_id}.",
            )
    raise _unknown(plan_id)


def _unknown(plan_id: str) -> UserFacingError:
    return UserFacingError(
        f"Plan {plan_id} has expired (or never existed); nothing ran.", "Propose the change again for a fresh plan."
    )

"""The shared write flow: plan buttons, Confirm / Cancel, and the destroy dialog.

Any feature proposes a write with `plan_button(action, params)`; clicking it lands here, computes a plan and
shows it with Confirm / Cancel. Confirm runs the checks (skills/deploy/confirm.py), then the write with progress
edited in place.

Where things appear: a button clicked inside a thread (an incident thread, a conversation) gets its plan
posted in that thread, and the plan remembers the thread, so Confirm's progress and result land there too
(also when confirmed from the destroy modal, which knows no thread). When the thread is an incident's, a
short line reports the outcome there once the action completes. A slash command's plan is the command's
answer; its progress goes in a thread under it, as before.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from handlers.canary_thread import follow_canary
from handlers.context import ActionContext, Responder
from handlers.registry import action, view_check
from handlers.remediation_render import action_label
from handlers.reply import CANCEL_ACTION, CONFIRM_ACTION, PLAN_ACTION, Button, Reply, error_reply, plan_button
from handlers.startup_report import startup_report
from skills.actions.button_payloads import PayloadStore
from skills.deploy.confirm import Refused, Where
from skills.deploy.execute import ExecResult, Progress
from skills.deploy.flow import keep_watching
from skills.durations import format_duration
from skills.errors import InvalidInput
from skills.logs.redact import redact
from skills.targets.plan import Plan
from skills.targets.port import ProgressStages
from skills.targets.preflight_check import UNKNOWN_NOTE
from skills.text import shorten

if TYPE_CHECKING:
    from handlers.deps import HandlerDeps

log = logging.getLogger(__name__)

DESTROY_OPEN_ACTION = "gemma_destroy_open"
DESTROY_SUBMIT_ACTION = "gemma_destroy_submit"
DESTROY_NAME_BLOCK = "service_name"
_VERDICT_ICON = {
    "fits": ":white_check_mark:",
    "fits_with_changes": ":large_yellow_circle:",
    "does_not_fit": ":x:",
}
_MAX_DIFF_LINES = 40
_GROUP_CACHE_S = 60


def render_plan(plan: Plan, *, with_buttons: bool = True) -> Reply:
    reply = Reply(title=f":clipboard: Plan: {plan.summary}")
    if plan.verdict:
        icon = _VERDICT_ICON.get(plan.verdict, "")
        lines = [f"{icon} *{plan.verdict.replace('_', ' ')}*", *(f"• {x}" for x in plan.fit_lines)]
        if plan.fit_changes:
            lines.append("Applied to fit: " + ", ".join(f"`{c}`" for c in plan.fit_changes))
        reply.add(heading="Capacity check", text="\n".join(lines))
    if plan.preflight:
        lines = [c.line() for c in plan.preflight]
        if any(c.status == "unknown" for c in plan.preflight):
            lines.append(f"_{UNKNOWN_NOTE}_")
        reply.add(heading="Preflight", text="\n".join(lines))
    if plan.notes:
        reply.add(heading="Notes", text="\n".join(f"• {n}" for n in plan.notes))
    if plan.kind != "destroy":
        if plan.changes:
            diff = [c.line() for c in plan.changes]
            if len(diff) > _MAX_DIFF_LINES:
                diff = [*diff[:_MAX_DIFF_LINES], f"… and {len(diff) - _MAX_DIFF_LINES} more"]
            heading = "New service" if plan.create else f"Changes to the running service ({len(plan.changes)})"
            reply.add(heading=heading, code="\n".join(diff))
        else:
            reply.add(heading="Changes", text="No field changes against the running service.")
    reply.add(heading=f"{plan.cli} equivalent", code=plan.gcloud)
    if with_buttons:
        blocked = plan.blocked()
        if plan.kind == "destroy":
            reply.buttons.append(Button(label="Destroy…", action_id=DESTROY_OPEN_ACTION, value=plan.id, style="danger"))
        elif not blocked:
            reply.buttons.append(Button(label="Confirm", action_id=CONFIRM_ACTION, value=plan.id, style="primary"))
        else:
            reply.add(text=f":no_entry: {blocked}")
        reply.buttons.append(Button(label="Cancel", action_id=CANCEL_ACTION, value=plan.id))
        for params, label in plan.offers:
            shown = {k: v for k, v in params.items() if k not in ("service", "on_serving")}
            reply.buttons.append(plan_button(plan.kind, params, action_label(plan.kind, shown, label)))
    mins = max(1, round((plan.expires_at - time.time()) / 60)) if plan.expires_at else 0
    reply.context = f"plan `{plan.id}` · expires in {mins} min · asked by {reply.mention(plan.created_by)}"
    return reply


async def make_plan(deps: HandlerDeps, user_id: str, channel_id: str, kind: str, params: dict[str, Any]) -> Reply:
    """Compute, store and render a plan (the command path: the reply is the command's answer)."""
    return render_plan(await deps.writes.propose(kind, params, user_id=user_id, channel_id=channel_id))


def clicked_in_thread(ctx: ActionContext) -> str:
    """The thread a clicked message sits in ('' for a top-level message: its answer is not a thread reply).
    Slack's payload has message.thread_ts only for messages in a thread; the surface falls back to message.ts."""
    return ctx.thread_ts if ctx.thread_ts and ctx.thread_ts != ctx.message_ts else ""


@action(PLAN_ACTION)
async def on_plan_button(ctx: ActionContext) -> Reply | None:
    value = await PayloadStore(ctx.deps.redis, ctx.deps.settings.key).resolve(ctx.value)
    try:
        data = json.loads(value)
        kind, params = data["action"], data.get("params") or {}
    except (ValueError, KeyError, TypeError):
        raise InvalidInput("This button carries no valid action.", "Ask for the plan again.") from None
    thread = clicked_in_thread(ctx)
    plan = await ctx.deps.writes.propose(
        str(kind), params, user_id=ctx.user_id, channel_id=ctx.channel_id, thread_ts=thread
    )
    reply = render_plan(plan)
    if not thread:
        return reply
    try:
        ts = await ctx.responder.post(reply, thread_ts=thread)
    except Exception:  # noqa: BLE001 - e.g. not in that channel: the response URL still works; logged
        log.warning("could not post plan %s in thread %s; answering via the response URL", plan.id, thread)
        return reply
    await ctx.deps.writes.posted_at(plan, ts)
    return None


def _plan_id(value: str) -> str:
    """A button carries the plan id; a modal's private_metadata carries JSON with it."""
    if value.startswith("{"):
        try:
            return str(json.loads(value).get("plan_id", ""))
        except ValueError:
            return ""
    return value


def progress_reply(plan: Plan, user_id: str, p: Progress, stages: ProgressStages) -> Reply:
    """`stages`: the plan's target's own (ServingTarget.progress_stages): a revision's on Cloud Run, a queued
    resource's states on Cloud TPU."""
    if p.done:
        icon = ":white_check_mark:" if p.ok else ":x:"
    else:
        icon = ":hourglass_flowing_sand:"
    phase = stages.words(p.phase)
    reply = Reply(title=f"{icon} {plan.kind} `{plan.service}`: {phase} ({format_duration(p.elapsed_s)})")
    steps = stages.labels()
    idx = stages.index(p.phase)
    if steps and idx is not None:
        reply.add(
            text="  →  ".join(f"*{s}*" if i == idx else (s if i < idx else f"_{s}_") for i, s in enumerate(steps))
        )
    if p.detail:
        reply.add(text=redact(p.detail))
    if p.log_lines:
        reply.add(heading="First error lines", code="\n".join(p.log_lines))
    if stages.note and not p.done:
        reply.add(text=stages.note)
    reply.context = f"confirmed by {reply.mention(user_id)} · plan `{plan.id}`" + (
        f" · revision `{p.revision}`" if p.revision else ""
    )
    return reply


async def _safe_update(responder: Responder, ts: str, reply: Reply) -> None:
    if not ts:
        return
    try:
        await responder.update(ts, reply)
    except Exception:  # a stale or foreign message must not stop the write's own progress
        log.warning("could not update message %s", ts, exc_info=True)


def outcome_line(plan: Plan, user_id: str, result: ExecResult, elapsed_s: float) -> Reply:
    """The short line an incident thread gets when an action proposed in it has completed."""
    if result.ok:
        title = f":white_check_mark: Action done: {plan.kind} `{plan.service}` succeeded"
    else:
        title = f":x: Action failed: {plan.kind} `{plan.service}`: {shorten(redact(result.detail), 300)}"
    reply = Reply(title=title)
    reply.title += f" ({format_duration(elapsed_s)}, confirmed by {reply.mention(user_id)})"
    reply.context = f"plan `{plan.id}`: {shorten(plan.summary, 200)}"
    return reply


def where(ctx: ActionContext) -> Where:
    """Where the click came from. A modal knows no message: its private_metadata carries the channel and the
    thread of the button that opened it."""
    meta = _metadata(ctx.value)
    if meta:
        return Where(channel_id=str(meta.get("channel_id", "")), thread_ts=str(meta.get("thread_ts", "")))
    return Where(channel_id=ctx.channel_id, thread_ts=clicked_in_thread(ctx))


def _metadata(value: str) -> dict[str, Any]:
    if not value.startswith("{"):
        return {}
    try:
        meta = json.loads(value)
    except ValueError:
        return {}
    return meta if isinstance(meta, dict) else {}


async def confirm(ctx: ActionContext, plan_id: str, typed_name: str | None = None) -> Reply | None:
    deps = ctx.deps
    writes = deps.writes
    try:
        plan, lock = await writes.claim(plan_id, ctx.user_id, typed_name, where(ctx))
    except Refused as exc:
        return error_reply(exc.message, exc.hint, exc.mentions)  # ephemeral: only the person who clicked sees a refusal
    # The plan's own thread (asked from a thread) wins over the click's, which a modal does not have.
    thread = plan.thread_ts or ctx.thread_ts or None
    # The plan message loses its buttons, so nobody clicks a spent plan.
    spent = render_plan(plan, with_buttons=False)
    spent.context = f"confirmed by {spent.mention(ctx.user_id)} · plan `{plan.id}`"
    await _safe_update(ctx.responder, ctx.message_ts or plan.message_ts, spent)
    first = Progress(phase="submitted", elapsed_s=0.0, detail=plan.summary)
    t0 = time.monotonic()
    try:
        stages = deps.targets.for_kind(plan.target).progress_stages(plan)  # the target's own words for its stages
        ts = await ctx.responder.post(progress_reply(plan, ctx.user_id, first, stages), thread_ts=thread)
    except BaseException:
        await writes.release_unrun(plan, lock)  # nothing ran: the plan may be confirmed again
        raise

    async def on_progress(p: Progress) -> None:
        await _safe_update(ctx.responder, ts, progress_reply(plan, ctx.user_id, p, stages))

    started = datetime.now(UTC) - timedelta(seconds=30)

    async def watch() -> None:
        result = ExecResult(ok=False, detail="stopped unexpectedly (see the bot's logs)")
        try:
            async with deps.watching(ctx.user_id):  # the deploy's watch takes minutes: counted as a watcher
                result = await writes.run(plan, lock, ctx.user_id, on_progress)
        finally:
            if plan.incident_id and thread:
                line = outcome_line(plan, ctx.user_id, result, time.monotonic() - t0)
                try:
                    await ctx.responder.post(line, thread_ts=thread)
                except Exception:  # noqa: BLE001 - the progress message shows the outcome; logged
                    log.warning("could not post the outcome of plan %s in its incident thread", plan.id)
        if result.ok:
            # The planner checks itself: vLLM's start-up figures against the prediction, in the deploy's thread.
            report = await startup_report(deps, plan, result.revision, started, result.duration_s)
            if report is not None:
                try:
                    await ctx.responder.post(report, thread_ts=thread or ts)
                except Exception:  # noqa: BLE001 - the deploy succeeded and says so above; logged
                    log.warning("could not post the start-up comparison for plan %s", plan.id)
            if plan.canary:  # a canary: compared with the stable revision in this thread, then Promote / Roll back
                async with deps.watching(ctx.user_id):  # a wait of up to CANARY_MAX_WAIT_S: a watcher's share
                    await follow_canary(deps, plan, ctx.responder, thread or ts, ctx.user_id)

    # Whoever confirmed may stop waiting (Ctrl-C in the console); the watch goes on and records what happened.
    await keep_watching(watch())
    return None


@action(CONFIRM_ACTION)
async def on_confirm(ctx: ActionContext) -> Reply | None:
    plan = await ctx.deps.writes.plan(ctx.value)
    if plan is not None and plan.kind == "destroy":
        return error_reply("A destroy is confirmed by typing the service name.", "Use the Destroy… button.")
    return await confirm(ctx, ctx.value)


@action(CANCEL_ACTION)
async def on_cancel(ctx: ActionContext) -> Reply:
    try:
        plan = await ctx.deps.writes.cancel(ctx.value, ctx.user_id, where(ctx))
    except Refused as exc:
        return error_reply(exc.message, exc.hint, exc.mentions)
    done = render_plan(plan, with_buttons=False)
    done.title = f":no_entry_sign: Cancelled: {plan.summary}"
    done.context = f"cancelled by {done.mention(ctx.user_id)} · plan `{plan.id}`"
    await _safe_update(ctx.responder, ctx.message_ts, done)
    return Reply(title=f"Cancelled plan `{plan.id}`; nothing changed.", ephemeral=True)


def destroy_modal(plan: Plan, channel_id: str, thread_ts: str = "") -> dict[str, Any]:
    meta = {"plan_id": plan.id, "channel_id": channel_id, "thread_ts": thread_ts}
    return {
        "type": "modal",
        "callback_id": DESTROY_SUBMIT_ACTION,
        "private_metadata": json.dumps(meta),
        "title": {"type": "plain_text", "text": "Destroy service"},
        "submit": {"type": "plain_text", "text": "Destroy"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    # the target's own words for what goes (a Cloud Run service and its revisions; a Cloud TPU
                    # queued resource and its node)
                    "text": f":warning: {plan.summary}. Type its name to confirm.",
                },
            },
            {
                "type": "input",
                "block_id": DESTROY_NAME_BLOCK,
                "label": {"type": "plain_text", "text": "Service name"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": "value",
                    "placeholder": {"type": "plain_text", "text": plan.service},
                },
            },
        ],
    }


@action(DESTROY_OPEN_ACTION)
async def on_destroy_open(ctx: ActionContext) -> Reply | None:
    plan = await ctx.deps.writes.plan(ctx.value)
    if plan is None or plan.kind != "destroy":
        return error_reply("This destroy plan has expired.", "Run `/gemma destroy` again.")
    await ctx.responder.open_modal(destroy_modal(plan, ctx.channel_id, clicked_in_thread(ctx)))
    return None


@action(DESTROY_SUBMIT_ACTION)
async def on_destroy_submit(ctx: ActionContext) -> Reply | None:
    return await confirm(ctx, _plan_id(ctx.value), typed_name=ctx.form.get(DESTROY_NAME_BLOCK, ""))


@view_check(DESTROY_SUBMIT_ACTION)
async def check_destroy_submit(ctx: ActionContext) -> dict[str, str]:
    """Before Slack gets its answer: a wrong name, a user who may not destroy, an expired or misplaced plan
    is shown inside the modal (to that user only), and nothing is posted to the channel."""
    try:
        await ctx.deps.writes.precheck(
            _plan_id(ctx.value), ctx.user_id, ctx.form.get(DESTROY_NAME_BLOCK, ""), where(ctx)
        )
    except Refused as exc:
        return {DESTROY_NAME_BLOCK: shorten(f"{exc.message} {exc.hint}".strip(), 300)}
    return {}

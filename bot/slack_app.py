"""The Slack surface: a Bolt AsyncApp whose listeners ack at once and run the work afterwards.

bot/web.py checks every request's signature and timestamp before Bolt sees it (forged, stale or unsigned ->
401, nothing runs).
Slack redelivers events (X-Slack-Retry-Num) and users double-submit; a Redis SET NX on the delivery's id
(event_id / trigger_id), checked after the ack, makes each one run at most once.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import random
import re
import time
from collections.abc import Coroutine
from typing import Any

from slack_bolt import BoltResponse
from slack_bolt.async_app import AsyncApp
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.deps import Deps
from bot.settings import Settings
from handlers.button_payloads import ButtonPayloads
from handlers.context import ActionContext, CommandContext
from handlers.registry import VIEW_CHECKS
from handlers.render_slack import escape, file_for_slack, to_blocks
from handlers.reply import FileOut, Reply
from handlers.router import help_for, help_reply, lookup, parse, run_action, run_command, too_long
from skills.clock import REAL_CLOCK, Clock
from skills.errors import failure_class
from skills.logs.redact import redact

log = logging.getLogger(__name__)


def make_web_client(settings: Settings, clock: Clock = REAL_CLOCK) -> AsyncWebClient:
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
    client = AsyncWebClient(token=token, base_url=settings.slack_api_url, timeout=15)
    client.retry_handlers.extend(_retry_handlers(clock))
    return client


class ClockedRateLimitRetryHandler(AsyncRateLimitErrorRetryHandler):
    """slack-sdk's 429 handling (retry after the Retry-After seconds Slack sent), waiting on our clock so a
    test or bench with a scaled clock does not spend wall time, and counting the 429s it saw."""

    limited = 0  # 429s received by every client in this process (the bench prints it)

    def __init__(self, clock: Clock, max_retry_count: int = 3) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.clock = clock

    async def prepare_for_next_attempt_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        if response is None:
            raise error  # type: ignore[misc]
        ClockedRateLimitRetryHandler.limited += 1
        state.next_attempt_requested = True
        after = next((v for k, v in response.headers.items() if k.lower() == "retry-after"), None)
        duration = float(after[0] if isinstance(after, list) else after) if after else 1.0
        await self.clock.sleep(duration + random.random() * 0.1)  # a little jitter: instances do not collide
        state.increment_current_attempt()


class _ClockedBackoff:
    """slack-sdk's backoff between retries (0.5 s, 1 s, ... plus jitter), waited on our clock instead of
    asyncio.sleep, so a test or bench with a scaled clock does not spend wall time on it."""

    clock: Clock
    interval_calculator: Any

    async def prepare_for_next_attempt_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        state.next_attempt_requested = True
        await self.clock.sleep(self.interval_calculator.calculate_sleep_duration(state.current_attempt))
        state.increment_current_attempt()


class ClockedServerErrorRetryHandler(_ClockedBackoff, AsyncServerErrorRetryHandler):
    def __init__(self, clock: Clock, max_retry_count: int = 2) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.clock = clock


class ClockedConnectionErrorRetryHandler(_ClockedBackoff, AsyncConnectionErrorRetryHandler):
    def __init__(self, clock: Clock, max_retry_count: int = 2) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.clock = clock


def _retry_handlers(clock: Clock = REAL_CLOCK) -> list[Any]:
    # Honour Retry-After on 429 and retry 5xx / connection resets a few times before giving up.
    return [
        ClockedRateLimitRetryHandler(clock, max_retry_count=3),
        ClockedServerErrorRetryHandler(clock, max_retry_count=2),
        ClockedConnectionErrorRetryHandler(clock, max_retry_count=2),
    ]


class ChannelResponder:
    """Posts into a channel (and its threads); used by alerts and as the base of the command responder.

    With a `user_id` (a modal submission), an ephemeral reply -- a refusal, an error -- goes to that user
    only (chat.postEphemeral), never to the channel."""

    def __init__(
        self,
        client: AsyncWebClient,
        channel: str,
        trigger_id: str = "",
        user_id: str = "",
        payloads: ButtonPayloads | None = None,
    ) -> None:
        self.client = client
        self.channel = channel
        self.trigger_id = trigger_id
        self.user_id = user_id
        self.payloads = payloads  # plan buttons' payloads go to Redis; the button carries an id

    async def _blocks(self, reply: Reply) -> tuple[str, list[dict[str, Any]]]:
        if self.payloads is not None:
            reply = await self.payloads.stash(reply)
        return to_blocks(reply)

    async def reply(self, reply: Reply) -> None:
        if reply.ephemeral:
            if self.user_id and self.channel:
                text, blocks = await self._blocks(reply)
                await self.client.chat_postEphemeral(channel=self.channel, user=self.user_id, text=text, blocks=blocks)
            else:
                log.info("an ephemeral reply had no user to go to; not posting it to the channel")
            return
        await self.post(reply)

    async def post(self, reply: Reply, thread_ts: str | None = None) -> str:
        text, blocks = await self._blocks(reply)
        resp = await self.client.chat_postMessage(channel=self.channel, text=text, blocks=blocks, thread_ts=thread_ts)
        # Slack accepts '#name' for posting but chat.update wants the id: keep the one Slack answered with.
        self.channel = str(resp.get("channel") or self.channel)
        ts = str(resp["ts"])
        for f in reply.files:
            await self.upload(f, thread_ts or ts)
        return ts

    async def update(self, ts: str, reply: Reply) -> None:
        text, blocks = await self._blocks(reply)
        await self.client.chat_update(channel=self.channel, ts=ts, text=text, blocks=blocks)

    async def upload(self, file: FileOut, thread_ts: str | None = None) -> None:
        file = file_for_slack(file)  # outside text in a file loses its bidi controls as a message's does
        await self.client.files_upload_v2(
            channel=self.channel,
            thread_ts=thread_ts,
            content=file.content,
            filename=file.filename,
            title=file.title or file.filename,
        )

    async def open_modal(self, view: dict[str, Any]) -> None:
        await self.client.views_open(trigger_id=self.trigger_id, view=view)


class CommandResponder(ChannelResponder):
    """The first answer goes to the response URL (works in channels the bot is not in), over the Web client's
    shared HTTP session rather than a new connection per answer."""

    def __init__(
        self,
        client: AsyncWebClient,
        channel: str,
        response_url: str,
        trigger_id: str = "",
        payloads: ButtonPayloads | None = None,
    ) -> None:
        super().__init__(client, channel, trigger_id, payloads=payloads)
        self._webhook = (
            AsyncWebhookClient(response_url, session=client.session, timeout=15, retry_handlers=_retry_handlers())
            if response_url
            else None
        )

    async def reply(self, reply: Reply) -> None:
        if self._webhook is None:
            await self.post(reply)
            return
        text, blocks = await self._blocks(reply)
        resp = await self._webhook.send(
            text=text,
            blocks=blocks,
            response_type="ephemeral" if reply.ephemeral else "in_channel",
            replace_original=False,
        )
        if resp.status_code >= 400:
            log.warning("response URL answered %s: %s", resp.status_code, resp.body[:200])
        if reply.ephemeral and reply.files:  # an upload is seen by the whole channel: never for the asker alone
            log.warning("an ephemeral answer carried %d file(s); not uploading them to the channel", len(reply.files))
            return
        for f in reply.files:
            await self.upload(f)


def _delivery_id(body: dict[str, Any]) -> str | None:
    return body.get("event_id") or body.get("trigger_id")


def _form_values(view: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for block_id, elements in (view.get("state", {}).get("values") or {}).items():
        for el in elements.values():
            val = el.get("value")
            if val is None and isinstance(el.get("selected_option"), dict):
                val = el["selected_option"].get("value")
            out[block_id] = "" if val is None else str(val)
    return out


def build_bolt(deps: Deps, client: AsyncWebClient | None = None) -> AsyncApp:
    st = deps.settings
    client = client or deps.chat or make_web_client(st)
    deps.chat = client
    payloads = ButtonPayloads(deps.redis, st.key)
    app = AsyncApp(
        client=client,
        signing_secret=st.slack_signing_secret.get_secret_value() if st.slack_signing_secret else "",
        process_before_response=True,  # we ack ourselves and spawn the work: the HTTP answer leaves at once
        raise_error_for_unhandled_request=False,
        # bot/web.py verifies the signature on the raw bytes before Bolt sees a request (handlers/slack_request.py);
        # Bolt's own check would repeat it on the ack path. Socket Mode requests carry no signature either way.
        request_verification_enabled=False,
    )

    @app.error
    async def on_error(error: Exception) -> BoltResponse | None:
        """Bolt's default logs every failure with its traceback (one per command while Slack is unreachable,
        from the auth.test its authorization middleware makes). A failure of the network or of a dependency is
        one line saying which; the ack tells the user; anything else keeps its traceback."""
        kind = failure_class(error)
        if kind is None:
            log.error("Slack request failed in Bolt: %s: %s", type(error).__name__, str(error)[:300], exc_info=error)
            return None
        log.warning("Slack request not handled: %s. %s", kind[0], kind[1])
        text = "gemma-sre cannot answer right now: " + kind[0].split(" (")[0] + ". Its operator has the details."
        body = json.dumps({"response_type": "ephemeral", "text": text})
        return BoltResponse(status=200, body=body, headers={"content-type": "application/json"})

    @app.command(re.compile(r"^/gemma.*"))
    async def on_command(ack: Any, body: dict[str, Any]) -> None:
        refused = too_long(str(body.get("text", "")))
        if refused is not None:  # before any parsing: one clear error in the ack, nothing runs
            text, blocks = to_blocks(refused)
            await ack(text=text, blocks=blocks, response_type="ephemeral")
            return
        name, args = parse(body.get("text", ""))
        cmd, quick = lookup(name), help_for(name, args)
        if cmd is None or quick is not None:  # help answers in the ack itself: nothing to wait for
            text, blocks = to_blocks(quick or help_reply())
            await ack(text=text, blocks=blocks, response_type="ephemeral")
            return
        echo = redact(str(body.get("text", "")).strip())[:200]  # a pasted secret is not echoed back
        await ack(text=f"{cmd.ack} (`/gemma {escape(echo)}`)", response_type="ephemeral")  # echoed input: inert
        responder = CommandResponder(
            client, body.get("channel_id", ""), body.get("response_url", ""), body.get("trigger_id", ""), payloads
        )
        ctx = CommandContext(
            deps=deps,
            responder=responder,
            user_id=body.get("user_id", ""),
            channel_id=body.get("channel_id", ""),
            args=args,
            raw_text=body.get("text", ""),
            trigger_id=body.get("trigger_id", ""),
            in_slack=True,
            channel_name=str(body.get("channel_name") or ""),
        )
        deps.spawn(_once(deps, body, _run_command(deps, ctx, name)), kind=cmd.kind, user=ctx.user_id)

    @app.action(re.compile(".*"))
    async def on_action(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        action = (body.get("actions") or [{}])[0]
        channel = (body.get("channel") or {}).get("id", "")
        message = body.get("message") or {}
        responder = CommandResponder(
            client, channel, body.get("response_url", ""), body.get("trigger_id", ""), payloads
        )
        ctx = ActionContext(
            deps=deps,
            responder=responder,
            user_id=(body.get("user") or {}).get("id", ""),
            channel_id=channel,
            action_id=action.get("action_id", ""),
            value=str(action.get("value", "")),
            message_ts=message.get("ts", ""),
            thread_ts=message.get("thread_ts") or message.get("ts", ""),
            trigger_id=body.get("trigger_id", ""),
        )
        # Buttons and modals are plans' Confirm/Cancel and their kin: write work, in the clicking user's share.
        deps.spawn(_once(deps, body, _run_action(ctx)), kind="write", user=ctx.user_id)

    @app.view(re.compile(".*"))
    async def on_view(ack: Any, body: dict[str, Any]) -> None:
        view = body.get("view") or {}
        meta = view.get("private_metadata", "")
        try:
            channel = str(json.loads(meta).get("channel_id", "")) if meta.startswith("{") else ""
        except (ValueError, AttributeError):
            channel = ""
        user = (body.get("user") or {}).get("id", "")
        # Refusals after the answer go to this user only (chat.postEphemeral), never to the channel.
        responder = ChannelResponder(client, channel, user_id=user, payloads=payloads)
        ctx = ActionContext(
            deps=deps,
            responder=responder,
            user_id=user,
            channel_id=channel,
            action_id=view.get("callback_id", ""),
            value=meta,
            form=_form_values(view),
        )
        errors = await _view_errors(ctx)
        if errors:
            await ack(response_action="errors", errors=errors)  # shown inside the modal, to this user
            return
        await ack()
        deps.spawn(_once(deps, body, _run_action(ctx)), kind="write", user=ctx.user_id)

    @app.event("message")
    async def on_message(event: dict[str, Any], body: dict[str, Any]) -> None:
        # Replies in a bot thread continue a conversation (/gemma ask); everything else is ignored.
        if event.get("bot_id") or event.get("subtype") or not event.get("thread_ts"):
            return
        if event.get("thread_ts") == event.get("ts"):
            return
        try:
            conversation = importlib.import_module("handlers.conversation")
        except ImportError:
            return
        channel = str(event.get("channel") or "")
        responder = ChannelResponder(client, channel, payloads=payloads)
        work = conversation.on_thread_reply(
            deps,
            responder,
            channel,
            str(event["thread_ts"]),
            str(event.get("user") or ""),
            str(event.get("text") or ""),
        )
        deps.spawn(_once(deps, body, work), kind="read", user=str(event.get("user") or ""))

    return app


VIEW_CHECK_BUDGET_S = 2.0  # Slack wants the answer to a view submission within 3 s


async def _view_errors(ctx: ActionContext) -> dict[str, str]:
    """Inline errors for a modal submission from its registered check; none when it is slow or fails (the
    action then runs its own checks after the answer, and any refusal goes to the user ephemerally)."""
    check = VIEW_CHECKS.get(ctx.action_id)
    if check is None:
        return {}
    try:
        async with asyncio.timeout(VIEW_CHECK_BUDGET_S):
            return await check(ctx)
    except Exception as exc:  # noqa: BLE001 - includes TimeoutError; logged, decided after the answer
        log.warning("view check for %s did not finish (%s); deciding after the answer", ctx.action_id, exc)
        return {}


async def _once(deps: Deps, body: dict[str, Any], work: Coroutine[Any, Any, None]) -> None:
    """Run `work` unless this delivery (event_id / trigger_id) already ran. Checked after the ack, off the
    3-second path; Redis down means we would rather risk a duplicate than drop the request."""
    delivery = _delivery_id(body)
    first = True
    if delivery:
        try:
            first = bool(await deps.redis.set(deps.settings.key("slack", "delivery", delivery), "1", nx=True, ex=3600))
        except Exception:  # noqa: BLE001 - dedup is best effort; the work still runs
            log.warning("delivery dedup unavailable (redis error)")
    if first:
        await work
    else:
        work.close()
        log.info("skipped a repeated Slack delivery %s", delivery)


async def _run_command(deps: Deps, ctx: CommandContext, name: str) -> None:
    t0 = time.perf_counter()
    outcome = "ok"
    try:
        reply = await run_command(ctx, name)
        if reply is not None:
            if reply.title.startswith(":warning:"):
                outcome = "error"
            await ctx.responder.reply(reply)
    except Exception as exc:  # noqa: BLE001 - delivery of a command's answer; logged
        outcome = "failed"
        log.warning("could not deliver the answer to /gemma %s: %s: %s", name, type(exc).__name__, str(exc)[:300])
    finally:
        deps.telemetry.commands.labels(name, outcome).inc()
        deps.telemetry.command_latency.labels(name).observe(time.perf_counter() - t0)


async def _run_action(ctx: ActionContext) -> None:
    try:
        reply = await run_action(ctx)
        if reply is not None:
            await ctx.responder.reply(reply)
    except Exception as exc:  # noqa: BLE001 - delivery of an action's result; logged
        log.warning(
            "could not deliver the result of action %s: %s: %s", ctx.action_id, type(exc).__name__, str(exc)[:300]
        )

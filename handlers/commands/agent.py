"""/gemma ask QUESTION and /gemma analyze [--since 1h]: the model investigates with read-only tools.

Both answer in a thread. Every proposed change is a plan button (plan -> confirm); nothing the model says
runs without that click.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from handlers.context import CommandContext
from handlers.conversation import answer_in_thread
from handlers.deps import Agent
from handlers.registry import command
from handlers.remediation_render import render_remediation
from handlers.reply import Reply
from skills.errors import InvalidInput, UserFacingError
from skills.logs import parse_since
from skills.redact import redact


def _agent(ctx: CommandContext) -> Agent:
    if ctx.deps.agent is None and ctx.deps.sandbox is not None:
        raise UserFacingError(
            "The sandbox has no model to think with, so agent commands are off here.",
            "Set VLLM_BASE_URL to any OpenAI-compatible server (a local vLLM, or Ollama's http://127.0.0.1:11434/) "
            "and restart. Deterministic findings (`/gemma diagnose`, incident threads) work without it.",
        )
    if ctx.deps.agent is None:
        raise UserFacingError("The model agent is not configured.", "Set VLLM_BASE_URL or deploy the model first.")
    return ctx.deps.agent


def _since_minutes(args: list[str]) -> int:
    since = "1h"
    rest = list(args)
    while rest:
        a = rest.pop(0)
        if a == "--since" and rest:
            since = rest.pop(0)
        elif a.startswith("--since="):
            since = a.split("=", 1)[1]
        else:
            raise InvalidInput(f"Unexpected argument {a!r}.", "Usage: `/gemma analyze [--since 1h]`.")
    delta = datetime.now(UTC) - parse_since(since)
    return max(1, math.ceil(delta.total_seconds() / 60))


@command(
    "analyze",
    "The model investigates logs, findings, status and metrics and proposes a plan",
    "analyze [--since 1h]",
    ack="Analyzing…",
)
async def analyze(ctx: CommandContext) -> Reply | None:
    minutes = _since_minutes(ctx.args)
    agent = _agent(ctx)
    service = ctx.deps.settings.vllm_service_name
    started = Reply(
        title=f":mag: Analyzing {service} (last {minutes} min) for <@{ctx.user_id}>…", mentions=[ctx.user_id]
    )
    ts = await ctx.responder.post(started)

    async def progress(text: str) -> None:
        await ctx.responder.post(Reply(title=text), thread_ts=ts)

    result = await agent.analyze(since_minutes=minutes, progress=progress)
    footer = ""
    if result.loop is not None:
        lr = result.loop
        tools = ", ".join(lr.executed) or "none"
        footer = f"{lr.steps} step(s), tools: {tools}, ~{result.tokens_sent} tokens sent"
    await ctx.responder.post(render_remediation(result.plan, service, footer), thread_ts=ts)
    return None


@command(
    "ask",
    "Ask the model about the service; reply in the thread to follow up",
    "ask QUESTION",
    ack="Thinking…",
)
async def ask(ctx: CommandContext) -> Reply | None:
    question = redact(" ".join(ctx.args).strip())  # echoed to the channel, stored and sent to the model
    if not question:
        raise InvalidInput("Nothing to ask.", "Usage: `/gemma ask why is the model slow?`")
    agent = _agent(ctx)
    asked = Reply(title=f":speech_balloon: <@{ctx.user_id}> asked: {question[:2800]}", mentions=[ctx.user_id])
    ts = await ctx.responder.post(asked)
    await agent.conversations.start(ts)
    await answer_in_thread(ctx.deps, ctx.responder, ts, question)
    return None

"""/gemma ask QUESTION and /gemma analyze [--since 1h]: the model investigates with read-only tools.

Both answer in a thread. Every proposed change is a plan button (plan -> confirm); nothing the model says
runs without that click.
"""

from __future__ import annotations

import math

from handlers.args import CommandParser
from handlers.context import CommandContext
from handlers.conversation import answer_in_thread
from handlers.deps import Agent
from handlers.registry import COMMANDS, command
from handlers.remediation_render import render_remediation
from handlers.reply import Reply
from skills.durations import parse_duration
from skills.errors import InvalidInput, UserFacingError
from skills.logs.redact import redact


def require_agent(ctx: CommandContext) -> Agent:
    """The agent, or why there is none. One story for every command that needs a model to reason (ask,
    analyze, eval): the sandbox's simulated vLLM answers with canned text, so it is not one."""
    if ctx.deps.agent is None and ctx.deps.sandbox is not None:
        raise UserFacingError(
            "The sandbox has no model to think with, so agent commands are off here.",
            "Set VLLM_BASE_URL to any OpenAI-compatible server (a local vLLM, or Ollama's http://127.0.0.1:11434/) "
            "and restart. Deterministic findings (`/gemma diagnose`, incident threads) work without it.",
        )
    if ctx.deps.agent is None:
        raise UserFacingError("The model agent is not configured.", "Set VLLM_BASE_URL or deploy the model first.")
    return ctx.deps.agent


def _analyze_args(p: CommandParser) -> None:
    p.add_argument("--since", metavar="DURATION", default="1h", help="how far back: 30m, 2h, 1d (default 1h)")


def _question_args(p: CommandParser) -> None:
    p.add_argument("question", metavar="QUESTION", nargs="*", help="anything about the service, in plain words")


@command(
    "analyze",
    "The model investigates logs, findings, status and metrics and proposes a plan",
    _analyze_args,
    ack="Analyzing…",
)
async def analyze(ctx: CommandContext) -> Reply | None:
    minutes = max(1, math.ceil(parse_duration(ctx.opts.since).total_seconds() / 60))
    agent = require_agent(ctx)
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
    _question_args,
    ack="Thinking…",
    free_text=True,
    hint="e.g. `/gemma ask why is the model slow?`",
)
async def ask(ctx: CommandContext) -> Reply | None:
    question = redact(" ".join(ctx.opts.question).strip())  # echoed to the channel, stored and sent to the model
    if not question:
        raise InvalidInput("Nothing to ask.", COMMANDS["ask"].parser.usage_hint())
    agent = require_agent(ctx)
    asked = Reply(title=f":speech_balloon: <@{ctx.user_id}> asked: {question[:2800]}", mentions=[ctx.user_id])
    ts = await ctx.responder.post(asked)
    await agent.conversations.start(ts)
    await answer_in_thread(ctx.deps, ctx.responder, ts, question)
    return None

"""The tools `gemma-sre mcp` offers: one per skill, each with its declared arguments (the model its `/gemma` parser
derives from: handlers/arg_models.py; for writes, the action's params model skills/actions/params.py that the plan
builder validates with) and the description its command registers.

Three kinds, three rules:
- read: run at once (status, fit, models, logs, diagnose, metrics, cost, revisions, audit, quota);
- cost: wakes or loads the model service (health's real completion, query, bench, eval): the caller must pass
  the same deployer check as in Slack (handlers/authz.py);
- write: only proposes a plan and posts it for a deployer to confirm in Slack (bot/mcp_plans.py); plan_status
  follows it. No tool confirms a plan.

Each returns structured content (the skill's typed result where the skill has one; otherwise the command's
surface-neutral reply: title, sections, context) and a short text.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.mcp_result import ToolResult
from handlers.arg_models import (
    DESTROY_TYPED,
    ROLLBACK_TYPED,
    SCALE_TYPED,
    AuditArgs,
    BenchArgs,
    DiagnoseArgs,
    EvalArgs,
    LogsArgs,
    NoArgs,
    QueryArgs,
    QuotaArgs,
    ServiceArgs,
    StatusArgs,
)
from handlers.authz import require_deployer
from handlers.context import CommandContext
from handlers.declared_args import Arg, Typed, to_argv, tool_schema
from handlers.fit_args import FitArgs, namespace_to_request
from handlers.registry import COMMANDS, load_all
from handlers.render_text import to_text
from handlers.reply import FileOut, Reply
from handlers.tpu_fit_render import render_tpu_fit, tpu_request
from skills.actions.params import ACTION_PARAMS, DeployParams, RedeployParams
from skills.audit import latest
from skills.capacity.fit import check_fit, load_catalog
from skills.capacity.tpu_fit import check_tpu_fit
from skills.deploy.revisions import revisions
from skills.targets.canary import CanaryParams
from skills.targets.port import require
from skills.text import shorten

if TYPE_CHECKING:
    from bot.deps import Deps

Kind = Literal["read", "cost", "write", "follow"]
TEXT_CHARS = 1500  # the short text beside the structured content


@dataclass
class Call:
    """One tool call: the wired dependencies and who asked (the Slack user id the caller's token names)."""

    deps: Deps
    caller: str
    # Set by the server for writes: posts the plan and, when enabled, asks the client's human (bot/mcp_plans.py).
    propose: Callable[[str, dict[str, Any]], Awaitable[ToolResult]] | None = None


Runner = Callable[[Call, Any], Awaitable[ToolResult]]


@dataclass(frozen=True)
class McpTool:
    name: str
    kind: Kind
    args: type[BaseModel]
    description: str
    run: Runner
    typed: Typed | None = None  # help for a model declared elsewhere (the write commands' params models)

    def input_schema(self) -> dict[str, Any]:
        return tool_schema(self.args, self.typed)


_PERCENT = CanaryParams.model_fields["percent"]


def _canary_help() -> str:
    """The deploy command's own help for --canary (argparse writes % as %%)."""
    action = COMMANDS["deploy"].parser._option_string_actions["--canary"]
    return str(action.help or "").replace("%%", "%")


class DeployToolArgs(DeployParams):
    """The deploy command's arguments: the plan builder's DeployParams, and --canary (a split of traffic, not a
    setting of the service: skills/deploy/plan_builder.py takes it off before DeployParams checks the rest)."""

    canary: Annotated[int | None, *_PERCENT.metadata] = None


class RedeployToolArgs(RedeployParams):
    canary: Annotated[int | None, *_PERCENT.metadata] = None


class PlanStatusArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    plan_id: str = Field(pattern=r"^[0-9a-f]{6,64}$", description="the plan id a write tool returned")


def _short(reply: Reply) -> str:
    return shorten(to_text(reply), TEXT_CHARS)


def reply_content(reply: Reply) -> dict[str, Any]:
    """A command's reply as data: what it says, without Slack's blocks or the buttons only Slack can press."""
    return {
        "title": reply.title,
        "sections": [s.model_dump(exclude_none=True) for s in reply.sections],
        "context": reply.context,
        "files": [f.filename for f in reply.files],
    }


class _Collector:
    """A responder for a command run on behalf of an MCP caller: what it would post is kept, not sent."""

    channel = "mcp"

    def __init__(self) -> None:
        self.posted: list[Reply] = []

    async def reply(self, reply: Reply) -> None:
        self.posted.append(reply)

    async def post(self, reply: Reply, thread_ts: str | None = None) -> str:
        self.posted.append(reply)
        return f"mcp.{len(self.posted)}"

    async def update(self, ts: str, reply: Reply) -> None:
        self.posted.append(reply)

    async def upload(self, file: FileOut, thread_ts: str | None = None) -> None:
        return None

    async def open_modal(self, view: dict[str, Any]) -> None:
        return None


def _through_command(name: str) -> Runner:
    """Run the registered command with the checked arguments as its words: the same parse, checks and skill."""

    async def run(call: Call, args: BaseModel) -> ToolResult:
        cmd = COMMANDS[name]
        responder = _Collector()
        ctx = CommandContext(
            deps=call.deps,
            responder=responder,
            user_id=call.caller,
            channel_id="mcp",
            args=to_argv(args, free_text=cmd.parser.free_text),
        )
        reply = await cmd.run(ctx)
        replies = ([reply] if reply is not None else []) + responder.posted
        if not replies:
            return ToolResult({"title": f"{name}: done", "sections": []}, f"{name}: done")
        content = reply_content(replies[0])
        if len(replies) > 1:
            content["more"] = [reply_content(r) for r in replies[1:]]
        return ToolResult(content, "\n\n".join(_short(r) for r in replies)[:TEXT_CHARS])

    return run


def _costly(name: str, what: str) -> Runner:
    inner = _through_command(name)

    async def run(call: Call, args: BaseModel) -> ToolResult:
        await require_deployer(call.deps, call.caller, what)  # the Slack rule for what wakes or loads the model
        return await inner(call, args)

    return run


async def _status(call: Call, a: StatusArgs) -> ToolResult:
    from handlers.commands.status import read_status, render_status

    report = await read_status(call.deps, a.service, fresh=a.fresh)
    return ToolResult(report.model_dump(mode="json"), _short(render_status(report)))


async def _fit(call: Call, a: FitArgs) -> ToolResult:
    from handlers.commands.fit import render_fit

    # As the command: a deploy profile's settings apply under what was given; FitRequest checks the values.
    hint = "The fit tool's input schema lists every field."
    ns = argparse.Namespace(**a.model_dump())
    tpu = tpu_request(ns)
    if tpu is not None:  # a Cloud TPU slice: the TPU planner, as `/gemma fit --tpu`
        tpu_report = check_tpu_fit(tpu)
        return ToolResult(tpu_report.model_dump(mode="json"), _short(render_tpu_fit(tpu_report)))
    request = namespace_to_request(ns, hint, flag_style=False, weights_from_hub=not call.deps.settings.model_bucket)
    report = check_fit(request)
    return ToolResult(report.model_dump(mode="json"), _short(render_fit(report)))


async def _models(call: Call, a: NoArgs) -> ToolResult:
    from handlers.commands.fit import render_catalog

    catalog = load_catalog()
    return ToolResult(catalog.model_dump(mode="json"), _short(render_catalog(catalog)))


async def _revisions(call: Call, a: ServiceArgs) -> ToolResult:
    service = a.service or call.deps.settings.vllm_service_name
    target = call.deps.targets.for_service(service)
    require(target, "revisions", service)  # as the command: said plainly when the target has none
    view = await revisions(target, service)
    lines = [f"{r.name}: {'ready' if r.ready else 'pending' if r.ready is None else 'failed'}, "
             f"{r.traffic_percent}% traffic" + (f", tags: {', '.join(sorted(r.tags))}" if r.tags else "")
             for r in view.revisions]  # fmt: skip
    return ToolResult(view.model_dump(mode="json"), shorten("\n".join(lines) or "No revisions.", TEXT_CHARS))


async def _audit(call: Call, a: AuditArgs) -> ToolResult:
    entries = await latest(call.deps.redis, call.deps.settings.key("audit"), a.n)
    lines = [f"{e.when()} {e.user_id} {e.action} {e.service} -> {e.result}" for e in entries]
    return ToolResult(
        {"entries": [e.model_dump(mode="json") for e in entries]},
        shorten("\n".join(lines) or "No write actions recorded yet.", TEXT_CHARS),
    )


def _write(kind: str) -> Runner:
    async def run(call: Call, args: BaseModel) -> ToolResult:
        if call.propose is None:
            raise RuntimeError("write tools need the server's plan poster")
        return await call.propose(kind, args.model_dump(exclude_none=True))

    return run


async def _plan_status(call: Call, a: PlanStatusArgs) -> ToolResult:
    from bot.mcp_plans import plan_status

    return await plan_status(call.deps, a.plan_id, call.caller)


_WRITE_NOTE = (
    " Proposes only: the plan (diff, gcloud equivalent, preflight) is stored and posted to the operations channel "
    "for a deployer to confirm with its buttons; nothing changes until then. Follow it with plan_status."
)
_COST_NOTE = " Wakes or loads the model service: the caller must be a deployer, as in Slack."
_WRITE_TYPED: dict[str, Typed] = {"scale": SCALE_TYPED, "rollback": ROLLBACK_TYPED, "destroy": DESTROY_TYPED}
_REDEPLOY = "Plan a redeploy of the running service with changed settings or fixes"


def _described(name: str, note: str = "") -> str:
    return COMMANDS[name].summary + "." + note


def build_tools() -> dict[str, McpTool]:
    """Every tool, described from the command registry (handlers/commands register on import)."""
    load_all()
    tools = [
        McpTool("status", "read", StatusArgs, _described("status"), _status),
        McpTool("fit", "read", FitArgs, _described("fit"), _fit),
        McpTool("models", "read", NoArgs, _described("models"), _models),
        McpTool("logs", "read", LogsArgs, _described("logs"), _through_command("logs")),
        McpTool("diagnose", "read", DiagnoseArgs, _described("diagnose"), _through_command("diagnose")),
        McpTool("metrics", "read", NoArgs, _described("metrics"), _through_command("metrics")),
        McpTool("cost", "read", ServiceArgs, _described("cost"), _through_command("cost")),
        McpTool("revisions", "read", ServiceArgs, _described("revisions"), _revisions),
        McpTool("audit", "read", AuditArgs, _described("audit"), _audit),
        McpTool("quota", "read", QuotaArgs, _described("quota"), _through_command("quota")),
        McpTool("health", "cost", NoArgs, _described("health", _COST_NOTE),
                _costly("health", "run a real completion against the model")),
        McpTool("query", "cost", QueryArgs, _described("query", _COST_NOTE),
                _costly("query", "query the model")),
        McpTool("bench", "cost", BenchArgs, _described("bench", _COST_NOTE),
                _costly("bench", "benchmark the model")),
        McpTool("eval", "cost", EvalArgs, _described("eval", _COST_NOTE),
                _costly("eval", "evaluate the model")),
        McpTool("plan_status", "follow", PlanStatusArgs,
                "Where a proposed write stands: pending (until it expires), confirmed (by whom), its progress, "
                "and its outcome. Only for plans this caller proposed: any other id is answered as unknown.",
                _plan_status),
    ]  # fmt: skip
    canary: Typed = {"canary": Arg(help=_canary_help())}
    models: dict[str, type[BaseModel]] = {**ACTION_PARAMS, "deploy": DeployToolArgs, "redeploy": RedeployToolArgs}
    typed = {**_WRITE_TYPED, "deploy": canary, "redeploy": canary}
    for kind, model in models.items():
        summary = _REDEPLOY + "." + _WRITE_NOTE if kind not in COMMANDS else _described(kind, _WRITE_NOTE)
        tools.append(McpTool(kind, "write", model, summary, _write(kind), typed.get(kind)))
    return {t.name: t for t in tools}

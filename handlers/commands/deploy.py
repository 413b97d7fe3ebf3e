"""/gemma deploy PROFILE [--flag value …] and /gemma config [PROFILE]: plan a deploy, or just show it."""

from __future__ import annotations

import argparse

from handlers.arg_models import DEPLOY_TYPED
from handlers.args import CommandParser
from handlers.commands.plans import make_plan
from handlers.context import CommandContext
from handlers.declared_args import field_help, field_metavar
from handlers.registry import command
from handlers.reply import FileOut, Reply
from skills.actions.params import DeployParams
from skills.deploy.plan_builder import build_plan
from skills.errors import InvalidInput
from skills.serving.profiles import load_profiles
from skills.serving.vllm_flags import SPECS

# Flags a user may pass: one per field of skills.actions.params.Overrides (plus --service). Values stay text:
# the plan validates them against that model, so its limits are stated once; so are their help (the fields'
# descriptions) and what each takes (handlers/declared_args.py field_metavar, DEPLOY_TYPED).
_FIELDS = [name for name in DeployParams.model_fields if name != "profile"]
# vLLM's boolean flags among them (`--x` / `--no-x`), named as skills/serving/vllm_flags.py names them.
_BOOLS = {s.flag.removeprefix("--").replace("-", "_") for s in SPECS if s.boolean} & set(_FIELDS)


def _override_args(p: CommandParser) -> None:
    p.key_values = True  # `max_model_len=8192` has always worked beside `--max-model-len 8192`
    for name in _FIELDS:
        flag = "--" + name.replace("_", "-")
        # argparse formats help with %: a description's own % is text
        text = (field_help(DeployParams, name, DEPLOY_TYPED) or "").replace("%", "%%") or None
        if name in _BOOLS:
            p.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=text)
        else:
            metavar = field_metavar(DeployParams, name, DEPLOY_TYPED)
            p.add_argument(flag, dest=name, metavar=metavar, default=None, help=text)


def _deploy_args(p: CommandParser) -> None:
    p.add_argument(
        "profile", metavar="PROFILE", help="a deploy profile (listed below; /gemma models says what each is)"
    )
    _override_args(p)
    p.add_argument(
        "--canary",
        dest="canary",
        metavar="N",
        default=None,
        help="send N%% of traffic (1-50) to the new revision first, compare it with the serving one, then promote "
        "or roll back",
    )


def _config_args(p: CommandParser) -> None:
    p.add_argument("profile", metavar="PROFILE", nargs="?", help="render this profile (default: the running service)")
    _override_args(p)


def _overrides(ctx: CommandContext) -> dict[str, str | bool]:
    return {k: v for k, v in vars(ctx.opts).items() if k in _FIELDS and v is not None}


def _profiles_hint() -> str:
    return "Profiles: " + ", ".join(f"`{p}`" for p in sorted(load_profiles()))


@command(
    "deploy",
    "Plan a deploy of a profile (Confirm to run it)",
    _deploy_args,
    ack="Planning the deploy…",
    hint=_profiles_hint,
    kind="write",
)
async def deploy(ctx: CommandContext) -> Reply:
    params: dict[str, object] = {"profile": ctx.opts.profile, **_overrides(ctx)}
    if ctx.opts.canary is not None:
        params["canary"] = ctx.opts.canary
    return await make_plan(ctx.deps, ctx.user_id, ctx.channel_id, "deploy", params)


@command(
    "config",
    "Show the Cloud Run service a profile renders (or the running one), without deploying",
    _config_args,
    ack="Rendering…",
    hint=_profiles_hint,
)
async def config(ctx: CommandContext) -> Reply:
    profile, overrides = ctx.opts.profile, _overrides(ctx)
    env = ctx.deps.writes.env
    params = {"profile": profile, **overrides} if profile else overrides
    target = ctx.deps.targets.for_write("deploy" if profile else "config", params, env.service)
    if profile:
        # Rendering a profile needs no cloud: without credentials it is shown undiffed, and says so.
        plan = await build_plan("deploy", params, target, env, offline=True)
        service, spec, title = plan.service, plan.spec or {}, f"Rendered service for `{profile}`"
        notes = [f"verdict: {plan.verdict}", *plan.notes] if plan.verdict else plan.notes
    else:
        service = str(overrides.get("service") or env.service)
        running = await target.get_service_spec(service)
        if running is None:
            raise InvalidInput(f"Service `{service}` does not exist.", _profiles_hint())
        spec, title, notes = target.sendable(running), f"Running service `{service}`", []
    exported = target.export(service, spec, env)
    text = exported.text
    # "(nothing deployed)" is said of a rendered profile only: a running service's config is what is deployed.
    reply = Reply(title=f":page_facing_up: {title}" + (" (nothing deployed)" if profile else ""))
    if notes:
        reply.add(text="\n".join(f"• {n}" for n in notes))
    reply.add(heading=f"{exported.cli} equivalent", code=exported.command)
    reply.files.append(FileOut(filename=exported.filename, title=exported.title, content=text.encode()))
    if len(text) < 2500:
        reply.add(heading="Service (YAML)", code=text)
    return reply

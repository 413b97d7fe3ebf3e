"""/gemma deploy PROFILE [--flag value …] and /gemma config [PROFILE]: plan a deploy, or just show it."""

from __future__ import annotations

import yaml

from handlers.commands.plans import deploy_env, make_plan
from handlers.context import CommandContext
from handlers.registry import command
from handlers.reply import FileOut, Reply
from skills.errors import InvalidInput
from skills.gcloud_cmd import deploy_command
from skills.plan_actions import DeployParams, build_plan
from skills.profiles import load_profiles
from skills.render_service import strip_output_only
from skills.vllm_flags import SPECS

# Flags a user may pass; each maps to a field of skills.plan_actions.Overrides (plus --service).
_FLAGS = {name.replace("_", "-") for name in DeployParams.model_fields if name != "profile"}
# vLLM's boolean flags among them (`--x` / `--no-x`), named as skills/vllm_flags.py names them.
_BOOL_FLAGS = {s.flag.removeprefix("--") for s in SPECS if s.boolean} & _FLAGS


def parse_overrides(args: list[str]) -> tuple[list[str], dict[str, str | bool]]:
    """Split `PROFILE --max-model-len 8192 --enforce-eager key=value` into positionals and override fields."""
    positionals: list[str] = []
    out: dict[str, str | bool] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--"):
            name, _, inline = a[2:].partition("=")
            negated = name.startswith("no-") and name[3:] in _BOOL_FLAGS
            if negated:
                out[name[3:].replace("-", "_")] = False
            elif name in _BOOL_FLAGS and not inline:
                out[name.replace("-", "_")] = True
            elif name in _FLAGS:
                if not inline:
                    if i + 1 >= len(args):
                        raise InvalidInput(f"`--{name}` needs a value.")
                    i += 1
                    inline = args[i]
                out[name.replace("-", "_")] = inline
            else:
                raise InvalidInput(
                    f"Unknown option `--{name}`.", "Options: " + ", ".join(f"`--{f}`" for f in sorted(_FLAGS))
                )
        elif "=" in a and a.split("=", 1)[0].replace("_", "-") in _FLAGS:
            k, v = a.split("=", 1)
            out[k.replace("-", "_")] = v
        else:
            positionals.append(a)
        i += 1
    return positionals, out


def _profiles_hint() -> str:
    return "Profiles: " + ", ".join(f"`{p}`" for p in sorted(load_profiles()))


@command(
    "deploy",
    "Plan a deploy of a profile (Confirm to run it)",
    "deploy PROFILE [--gpu G] [--max-model-len N] […]",
    ack="Planning the deploy…",
)
async def deploy(ctx: CommandContext) -> Reply:
    positionals, overrides = parse_overrides(ctx.args)
    if len(positionals) != 1:
        raise InvalidInput("Usage: `/gemma deploy PROFILE [--max-model-len N] [--gpu G] […]`.", _profiles_hint())
    return await make_plan(ctx.deps, ctx.user_id, ctx.channel_id, "deploy", {"profile": positionals[0], **overrides})


@command(
    "config",
    "Show the Cloud Run service a profile renders (or the running one), without deploying",
    "config [PROFILE] [--flag value …]",
    ack="Rendering…",
)
async def config(ctx: CommandContext) -> Reply:
    positionals, overrides = parse_overrides(ctx.args)
    env = deploy_env(ctx.deps)
    if len(positionals) > 1:
        raise InvalidInput("Usage: `/gemma config [PROFILE]`.", _profiles_hint())
    if positionals:
        # Rendering a profile needs no cloud: without credentials it is shown undiffed, and says so.
        plan = await build_plan("deploy", {"profile": positionals[0], **overrides}, ctx.deps.runtime, env, offline=True)
        service, spec, title = plan.service, plan.spec or {}, f"Rendered service for `{positionals[0]}`"
        notes = [f"verdict: {plan.verdict}", *plan.notes] if plan.verdict else plan.notes
    else:
        service = str(overrides.get("service") or env.service)
        running = await ctx.deps.runtime.get_service_spec(service)
        if running is None:
            raise InvalidInput(f"Service `{service}` does not exist.", _profiles_hint())
        spec, title, notes = strip_output_only(running), f"Running service `{service}`", []
    text = yaml.safe_dump(spec, sort_keys=False, width=1000)
    gcloud = deploy_command(service, spec, env.region, env.project)
    reply = Reply(title=f":page_facing_up: {title} (nothing deployed)")
    if notes:
        reply.add(text="\n".join(f"• {n}" for n in notes))
    reply.add(heading="gcloud equivalent", code=gcloud)
    reply.files.append(
        FileOut(
            filename=f"{service}.service.yaml",
            title=f"{service} (Cloud Run v2 Service)",
            content=text.encode(),
        )
    )
    if len(text) < 2500:
        reply.add(heading="Service (YAML)", code=text)
    return reply

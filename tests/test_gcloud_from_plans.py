"""The gcloud equivalent of a plan changes what the plan changes (issue 48): read off the plan as posted, every
line of its change list is expressed by the commands it prints (args, probe, scaling, traffic, tags), so an
operator who runs them gets what the bot would do. After failed revisions and a rollback, a scale builds on the
serving revision (args, probe and traffic change too); a canary's promote and roll back remove its tags."""

from __future__ import annotations

import re

from bot.deps import Deps
from bot.sandbox.cloud import Sandbox
from bot.sandbox.console_session import ConsoleSession
from handlers.commands.plans import PLAN_ACTION
from handlers.render_text import to_text
from tests.deploy_helpers import click
from tests.test_canary import button, canary_thread, deps, sandbox, traffic
from tests.test_truthful_writes import console

__all__ = ["console", "deps", "sandbox"]  # fixtures, used by name

_CHANGE = re.compile(r"^\s*([~+-]) (\S+(?: --[\w-]+)?): (.*)$")


def _section(text: str, heading: str) -> str:
    m = re.search(rf"(?:^|\n)(?:== |\*){re.escape(heading)}[^\n]*\n(.*?)(?=\n== |\n\*[A-Z]|\Z)", text, re.S)
    assert m, (heading, text)
    return m.group(1)


def unexpressed(plan_text: str) -> list[str]:
    """The plan's change lines that its gcloud equivalent does not express (an unknown kind of field counts)."""
    changes = _section(plan_text, "Changes to the running service")
    gcloud = _section(plan_text, "gcloud equivalent")
    args = re.search(r"--args=(\S+)", gcloud)
    arg_list = args.group(1).strip("'").split(",") if args else []
    missing = []
    for line in changes.splitlines():
        m = _CHANGE.match(line)
        if not m:
            continue
        sign, field, value = m.groups()
        new = value.split(" -> ")[-1] if sign != "-" else ""
        if " --" in field and ".args" in field:
            flag = field.split(" ", 1)[1]
            pairs = list(zip(arg_list, [*arg_list[1:], ""], strict=False))
            ok = (flag not in arg_list) if sign == "-" else ((flag, new) in pairs or (new == "on" and flag in arg_list))
        elif field.endswith("scaling.minInstanceCount"):
            ok = f"--min-instances={new}" in gcloud
        elif field.endswith("scaling.maxInstanceCount"):
            ok = f"--max-instances={new}" in gcloud
        elif ".startupProbe." in field:
            ok = f"{field.rsplit('.', 1)[1]}={new}" in gcloud
        elif field == "traffic":
            if new == "latest=100%":
                ok = "update-traffic" in gcloud and "--to-latest" in gcloud
            else:
                split = ",".join(p.strip().replace("%", "") for p in new.split(","))
                ok = "update-traffic" in gcloud and f"--to-revisions={split}" in gcloud
        elif field == "traffic.tags":
            old = {t.split("=")[0] for t in value.split(" -> ")[0].split(", ")} if sign != "+" else set()
            now = {t.split("=")[0] for t in new.split(", ")} if new else set()
            removed = re.search(r"--remove-tags=(\S+)", gcloud)
            ok = (old - now) <= set(removed.group(1).split(",") if removed else [])
        elif field == "template.revision":
            ok = "gcloud run deploy" in gcloud and sign == "-"  # a new revision, named by Cloud Run
        elif field.startswith("annotations."):
            ok = field.split(".", 1)[1] in gcloud  # said in a comment: no flag sets them
        else:
            ok = False  # a kind of change this check does not know yet: look at it
        if not ok:
            missing.append(line.strip())
    return missing


async def test_a_scale_after_a_rollback_prints_the_commands_of_every_change(console: ConsoleSession) -> None:
    await console.line("/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384")
    await console.line("click Confirm")
    await console.line("/gemma sandbox kv-cache-too-small")  # a failed revision: the template is not what serves
    await console.line("/gemma rollback")
    await console.line("click Confirm")
    plan = await console.line("/gemma scale 0 2")
    assert "on the serving revision" in plan, plan
    assert unexpressed(plan) == [], plan
    assert "--to-latest" in _section(plan, "gcloud equivalent")  # traffic follows the new revision


async def test_a_canary_promote_and_roll_back_remove_its_tags(deps: Deps, sandbox: Sandbox) -> None:
    sandbox.fleet.arm("canary-holds")
    baseline = next(iter(traffic(sandbox)))
    _, proposal = await canary_thread(deps, sandbox)
    canary = next(r for r in traffic(sandbox) if r != baseline)
    for label, to in (("Promote", canary), ("Roll back", baseline)):
        plan, _ = await click(deps, PLAN_ACTION, button(proposal, label))
        assert plan is not None
        text = to_text(plan)
        assert unexpressed(text) == [], text
        gcloud = _section(text, "gcloud equivalent")
        assert f"--to-revisions={to}=100" in gcloud and "--remove-tags=canary,stable" in gcloud, gcloud

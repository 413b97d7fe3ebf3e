"""Help that tells the truth, typed at the console on the sandbox: `/gemma deploy --help` lists every option with
its description (the params model's own, skills/actions/params.py) and a metavar saying what it takes (ZONE, TYPE,
N for numbers, a choice's values), and shows the profile list its PROFILE line points to; `/gemma models` lists
the deploy profiles with what each is; `/gemma sandbox` says which scenarios open an incident thread and which
do not, as their definitions say."""

from __future__ import annotations

import re
from typing import Literal, get_args, get_origin

import pytest

from bot.sandbox.console_session import ConsoleSession
from bot.sandbox.preflight_standins import SCENARIOS as PREFLIGHT_SCENARIOS
from bot.sandbox.revision_traffic import CANARY_SCENARIOS
from bot.sandbox.scenarios import SCENARIOS
from bot.sandbox.tpu_scenarios import TPU_SCENARIOS
from skills.actions.params import DeployParams
from skills.serving.profiles import load_profiles
from tests.test_truthful_writes import console

__all__ = ["console"]  # a fixture, used by name


def options(help_text: str) -> dict[str, tuple[str, str]]:
    """`--flag` -> (what follows it, its help) from the help's options section."""
    section = help_text.split("options:", 1)[1]
    out = {}
    lines = section.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^\s+(--[a-z-]+)(?:, --no-[a-z-]+)?(?: (\S+))?(?:\s{2,}(.*))?$", line)
        if m:
            text = m.group(3)
            following = lines[i + 1] if i + 1 < len(lines) else ""
            if text is None and following.strip() and not following.strip().startswith("-"):
                text = following  # argparse puts the help on the next line after a long flag and metavar
            out[m.group(1)] = (m.group(2) or "", (text or "").strip())
    return out


def kinds(name: str) -> list[object]:
    ann = DeployParams.model_fields[name].annotation
    if get_origin(ann) is Literal:
        return [ann]
    return [a for a in (get_args(ann) or (ann,)) if a is not type(None)]


@pytest.mark.parametrize("command", ["deploy", "config"])
async def test_deploy_help_lists_every_option_with_its_description_and_what_it_takes(
    console: ConsoleSession, command: str
) -> None:
    out = await console.line(f"/gemma {command} --help")
    assert "Traceback" not in out
    shown = options(out)
    for name, field in DeployParams.model_fields.items():
        if name == "profile":
            continue
        flag = "--" + name.replace("_", "-")
        assert flag in shown, (flag, out)
        metavar, text = shown[flag]
        assert field.description, f"DeployParams.{name} has no description: help cannot show one"
        assert text == field.description, (flag, text, field.description)
        types = kinds(name)
        if bool in types:
            assert metavar == "", (flag, metavar)  # a switch: --x / --no-x
        elif any(get_origin(t) is Literal for t in types):
            assert metavar == "|".join(str(v) for t in types for v in get_args(t)), (flag, metavar)
        elif all(t in (int, float) for t in types):
            assert metavar == "N", (flag, metavar)
        else:
            # a name, not a number (--cpu is a number kept as text: "8", "0.5")
            assert metavar != "" and (metavar != "N" or name == "cpu"), (flag, metavar)
    assert shown["--zone"][0] == "ZONE" and shown["--service"][0] == "SERVICE" and shown["--gpu"][0] == "GPU"
    assert shown["--accelerator-type"][0] == "TYPE" and shown["--memory"][0] == "SIZE"
    assert shown["--provisioning"][0] == "on-demand|spot|reserved"
    # the profiles it points to are there, every one
    tail = out[out.index("options:") :]
    assert "Profiles: " in tail and all(p in tail for p in load_profiles())
    if command == "deploy":
        assert shown["--canary"][0] == "N" and "1-50" in shown["--canary"][1]
        assert (await console.line("/gemma help deploy")) == out  # the same help either way


async def test_models_lists_the_deploy_profiles_with_what_each_is(console: ConsoleSession) -> None:
    out = await console.line("/gemma models")
    assert "Traceback" not in out
    section = out[out.index("Deploy profiles") :]
    for name, profile in load_profiles().items():
        line = next((x for x in section.splitlines() if x.startswith(f"`{name}`")), None)
        assert line is not None, (name, section)
        assert profile.description and profile.description in line
        assert f"`{profile.model}`" in line and (profile.tpu or profile.gpu) in line
    assert "Models" in out and "GPUs" in out  # the catalog is still there


async def test_sandbox_says_which_scenarios_open_an_incident(console: ConsoleSession) -> None:
    out = await console.line("/gemma sandbox")
    assert "Traceback" not in out
    opens_at = out.index("Open an incident thread")
    quiet_at = out.index("Open no incident")
    alerting, quiet = out[opens_at:quiet_at], out[quiet_at:]
    # from the definitions: a field scenario carries the alert policy it fires; TPU, preflight, canary ones none
    for name, scenario in SCENARIOS.items():
        assert scenario.alert and f"`{name}`" in alerting and f"`{name}`" not in quiet, name
    for name in [*TPU_SCENARIOS, *PREFLIGHT_SCENARIOS, *CANARY_SCENARIOS]:
        assert f"`{name}`" in quiet and f"`{name}`" not in alerting, name
    assert "the alert opens an incident thread" not in out
    # and the help line no longer says every scenario opens one
    listing = await console.line("/gemma help")
    line = next(x for x in listing.splitlines() if "/gemma sandbox" in x)
    assert "the alert opens an incident thread" not in line and "which open an incident" in line
    # what the list says of a TPU scenario holds: it opens no incident thread
    fired = await console.line("/gemma sandbox tpu-quota-zero")
    await console.settle()
    assert "0 chips of TPU quota" in console.text and "FIRING" not in console.text, fired

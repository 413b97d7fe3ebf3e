"""Fit prices what a deploy of the same configuration would run (issue 48): typed at the console on the sandbox
(no MODEL_BUCKET, so the weights come from the Hub and take memory while loading), `/gemma fit PROFILE` shows the
memory, vCPU and $/h of the running service that profile deployed (`/gemma cost`), `gemma-sre fit PROFILE` as a
process says the same, and fit's "Plan deploy" button plans exactly what fit showed: for the profile that is
already running, the plan is refused as changing nothing."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

from bot.sandbox.console_session import ConsoleSession
from tests.test_truthful_writes import console

__all__ = ["console"]  # a fixture, used by name

ROOT = Path(__file__).resolve().parent.parent
PROFILE = "gemma4-12b-qat-l4"  # what the sandbox's service runs from the start


def _fit_figures(text: str) -> tuple[str, str, str, str]:
    """(memory, vCPU, $/h, --max-num-seqs) from fit's reply."""
    memory = re.search(r"→ memory (\d+Gi)", text)
    cost = re.search(r"Cost\s+(\$[\d.]+)/h, (\d+) vCPU", text)
    seqs = re.search(r"--max-num-seqs (\d+)", text)
    assert memory and cost and seqs, text
    return memory.group(1), cost.group(2), cost.group(1), seqs.group(1)


async def test_fit_of_the_running_profile_shows_what_runs_and_its_button_plans_it(console: ConsoleSession) -> None:
    cost = await console.line("/gemma cost")
    running = re.search(r"(\$[\d.]+)/hour per running instance", cost)
    config = re.search(r"GPU 1 x nvidia-l4, (\d+) vCPU, (\d+) GiB", cost)
    assert running and config, cost
    fit = await console.line(f"/gemma fit {PROFILE}")
    memory, vcpu, usd, seqs = _fit_figures(fit)
    assert (memory, vcpu, usd) == (f"{config.group(2)}Gi", config.group(1), running.group(1)), (fit, cost)
    config_reply = await console.line("/gemma config")
    assert re.search(rf"- --max-num-seqs\n\s+- '{seqs}'\n", config_reply), config_reply  # the running flag
    plan = await console.line("click Plan deploy")
    assert "would change nothing" in plan, plan  # fit's configuration is the running one: nothing to plan

    # The CLI, as a user runs it, prices the profile the same way
    env = {k: v for k, v in os.environ.items() if k != "MODEL_BUCKET"}
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "bot.cli", "fit", PROFILE],
        env={**env, "PYTHONPATH": str(ROOT)},
        cwd=ROOT / "tests",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert _fit_figures(done.stdout) == (memory, vcpu, usd, seqs), done.stdout

"""The errors a new user met, in one sandbox console session (a subprocess, as `./dev console` runs): each says
what happened and what to do next, in the bot's words. Each command's output is cut out between markers
(`/gemma zz-N`, an unknown command whose answer is easy to find)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot.sandbox.startup_lines import CONTAINER_FAILED

ROOT = Path(__file__).resolve().parent.parent

STEPS = [
    ("diagnose-revision", ["/gemma diagnose --revision nope-00001"]),
    ("logs-revision", ["/gemma logs --revision nope-00001"]),
    ("rollback-revision", ["/gemma rollback nope-00001"]),
    ("audit-negative", ["/gemma audit -3"]),
    ("audit-zero", ["/gemma audit 0"]),
    ("since-negative", ["/gemma logs --since -3h"]),
    ("fit-negative", ["/gemma fit gemma-4-12b-qat --max-model-len -5"]),
    ("fit-profile", ["/gemma fit gemma4-12b-qat-l4"]),
    ("eval", ["/gemma eval"]),
    ("ask", ["/gemma ask why is it slow?"]),
    ("query", ["/gemma query hello"]),
    ("scale-inverted", ["/gemma scale 3 1"]),
    ("fit-too-short", ["/gemma fit gemma-4-12b-qat --max-model-len 10"]),
    ("gated-model", ["/gemma sandbox gated-model", "click Plan redeploy: hf_token_from_secret=True", "click Confirm"]),
    ("audit", ["/gemma audit"]),
    ("revisions", ["/gemma revisions"]),
    ("after-destroy", ["/gemma destroy", "click Destroy", "vllm-gemma4", "/gemma sandbox kv-cache-too-small"]),
]


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    lines: list[str] = []
    for i, (_, commands) in enumerate(STEPS):
        lines += [f"/gemma zz-{i}", *commands]
    lines += [f"/gemma zz-{len(STEPS)}", "quit"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "SLACK_", "REDIS_", "VLLM_"))}
    env |= {
        "PYTHONPATH": str(ROOT),
        "NO_GCE_CHECK": "true",
        "CLOUDSDK_CONFIG": str(tmp_path_factory.mktemp("no-gcloud")),
        "SANDBOX_SPEED": "5000",
        "DEPLOY_POLL_S": "0.2",
        "PYTHONUNBUFFERED": "1",
    }
    run = subprocess.run(
        [sys.executable, "-m", "bot.cli", "console", "--sandbox"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path_factory.mktemp("cwd"),
    )
    out = run.stdout
    assert "Traceback" not in out + run.stderr
    parts = re.split(r"Unknown command `zz-(\d+)`\. Here is what I can do:\n", out)
    # each marker's answer (the command list, up to its "`/gemma help COMMAND`" line) is left out
    by_index = {
        int(parts[i]): parts[i + 1].split("shows a command's options.\n", 1)[-1] for i in range(1, len(parts) - 1, 2)
    }
    return {name: by_index[i] for i, (name, _) in enumerate(STEPS)}


def _no_pydantic(text: str) -> None:
    for raw in ("Value error", "Input should", "validation error", "Field required", "KeyError"):
        assert raw not in text, text


@pytest.mark.parametrize("step", ["diagnose-revision", "logs-revision", "rollback-revision"])
def test_a_nonexistent_revision_is_not_found_everywhere(session: dict[str, str], step: str) -> None:
    out = session[step]
    assert "Revision `nope-00001` not found" in out and "/gemma revisions" in out, out
    assert "Looked at 0 lines" not in out and "No log lines" not in out


@pytest.mark.parametrize("step", ["audit-negative", "audit-zero"])
def test_counts_below_one_are_refused(session: dict[str, str], step: str) -> None:
    out = session[step]
    assert "must be a whole number from 1 to 50" in out and "Usage: `/gemma audit [N]`" in out, out
    assert "write actions" not in out


def test_negative_values_reach_their_own_check(session: dict[str, str]) -> None:
    """A value that starts with '-' used to read as an option ("`--since` needs a value")."""
    assert "--since '-3h' is out of range" in session["since-negative"], session["since-negative"]
    assert "--max-model-len must be at least 256 (got -5)" in session["fit-negative"], session["fit-negative"]


def test_fit_takes_a_deploy_profile(session: dict[str, str]) -> None:
    out = session["fit-profile"]
    assert "gemma-4-12b-qat fits on nvidia-l4" in out and "Unknown model" not in out, out
    assert "--max-model-len 32768" in out and "--kv-cache-dtype fp8" in out  # the profile's settings


def test_eval_and_ask_tell_one_story_about_the_sandbox_model(session: dict[str, str]) -> None:
    story = "The sandbox has no model to think with"
    assert story in session["ask"] and story in session["eval"], session["eval"]
    assert "Evaluating" not in session["eval"]
    # what measures the simulated server says what it is
    assert "simulated vLLM" in session["query"] and "not a model to reason with" in session["query"]


def test_validation_errors_name_the_field_in_the_bots_words(session: dict[str, str]) -> None:
    assert "min_instances must not exceed max_instances" in session["scale-inverted"], session["scale-inverted"]
    assert "--max-model-len must be at least 256 (got 10)" in session["fit-too-short"]
    for step in ("scale-inverted", "fit-too-short", "audit-negative"):
        _no_pydantic(session[step])


def test_a_boolean_parameter_is_not_redacted(session: dict[str, str]) -> None:
    out = session["gated-model"] + session["audit"]
    assert "hf_token_from_secret=True" in session["audit"], session["audit"]
    assert "[REDACTED" not in out, out


def test_a_revisions_failure_text_is_cut_at_a_word_boundary(session: dict[str, str]) -> None:
    out = session["revisions"]
    (line,) = [x.strip() for x in out.splitlines() if "HEALTH_CHECK_CONTAINER_ERROR" in x]
    revision = re.search(r"Revision '([^']+)'", line)
    assert revision, line
    full = CONTAINER_FAILED.format(rev=revision.group(1))
    shown = line.split(": ", 1)[1]
    assert len(full) > 200 and shown.endswith("…"), line  # the message is longer than the room for it
    kept = shown[:-1]
    assert full.startswith(kept) and full[len(kept)] in " .,;:", (kept[-20:], full[len(kept) : len(kept) + 10])


def test_a_scenario_after_destroy_says_what_to_do(session: dict[str, str]) -> None:
    out = session["after-destroy"]
    assert "service `vllm-gemma4` deleted" in out
    assert "does not exist any more (it was destroyed)" in out and "/gemma deploy gemma4-12b-qat-l4" in out, out
    _no_pydantic(out)

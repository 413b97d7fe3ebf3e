"""The README's tour of the sandbox, typed into one `./dev console` run at a real terminal (a pty, via
pexpect): every command the tour names, in its order, each answered without an error, and the outcomes the tour
promises (a deploy that turns ready, an incident thread with findings, a fix that recovers, metrics that move,
a canary compared and rolled back, a bench plan)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pexpect

from bot.sandbox.scenarios import SCENARIOS
from tests.terminal import PROMPT, plain, until_quiet
from tests.test_sandbox_console import _env

ROOT = Path(__file__).resolve().parent.parent


def tour() -> list[str]:
    """The lines the README's sandbox section tells a user to type, in order (a scenario named on its own is
    `/gemma sandbox NAME`)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### The sandbox: the whole job with no cloud account", 1)[1]
    paragraph = section[section.index("Try: ") : section.index("The agent (")]
    lines = []
    for token in re.findall(r"`([^`]+)`", paragraph):
        if token.startswith(("/gemma", "click ")):
            lines.append(token)
        elif token in SCENARIOS:
            lines.append(f"/gemma sandbox {token}")
    return lines


def paragraph_tour(opening: str) -> list[str]:
    """The lines of the README paragraph that opens with `opening` (its destroy asks for a typed name: left out)."""
    text = (ROOT / "README.md").read_text()
    paragraph = text.split(opening, 1)[1].split("\n\n", 1)[0]
    return [
        token
        for token in re.findall(r"`([^`]+)`", paragraph)
        if token.startswith(("/gemma", "click ")) and not token.startswith("/gemma destroy")
    ]


def tpu_tour() -> list[str]:
    return paragraph_tour("Cloud TPU in the sandbox:")


def aca_tour() -> list[str]:
    return paragraph_tour("Azure Container Apps in the sandbox:")


def test_the_readme_tour_in_one_console_run(tmp_path: Path) -> None:
    lines = tour()
    assert lines[:3] == ["/gemma status", "/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384", "click Confirm"]
    assert "/gemma metrics" in lines and "/gemma bench" in lines
    canary = lines.index("/gemma sandbox canary-regresses")
    assert lines[canary + 1].endswith("--canary 20") and lines[canary + 2 : canary + 5] == [
        "click Confirm",
        "click Roll back",
        "click Confirm",
    ]
    tpu = tpu_tour()
    assert tpu[:2] == ["/gemma deploy gemma4-31b-tpu-v6e4", "click Confirm"] and "/gemma status vllm-gemma4-tpu" in tpu
    aca = aca_tour()
    assert aca[:3] == ["/gemma fit gemma-4-e4b --gpu t4", "/gemma deploy gemma4-12b-qat-aca-a100", "click Confirm"], aca
    assert "/gemma status vllm-gemma4-aca" in aca
    env = _env(
        GEMMA_SRE_HISTORY=str(tmp_path / "history"),
        TERM="xterm",
        PYTHONPATH=str(ROOT),
        HOME=str(tmp_path),
        # At the default 60 s, each scenario after the second waits out the coalescing of repeats of the one
        # incident their same-named alerts join (issue 24 gives alerts with other conditions their own).
        ALERT_COALESCE_INTERVAL_S="0",
        ALERT_HEADER_DEBOUNCE_S="0",  # Slack edit pacing: 5 s per scenario otherwise
    )
    child = pexpect.spawn(
        sys.executable, ["-m", "bot.cli", "console"], env=env, cwd=str(tmp_path), timeout=120, encoding="utf-8"
    )
    child.expect(PROMPT)
    seen: dict[str, str] = {}
    tpu_said: list[str] = []  # what the TPU paragraph's lines printed
    aca_said: list[str] = []  # and the Azure Container Apps paragraph's
    for n, line in enumerate(lines + tpu + aca):
        child.sendline(line)
        if n == 2:  # the first deploy's Confirm: Ctrl-C during its watch, which finishes while the prompt waits
            child.expect_exact("revision created")
            child.sendintr()
            child.expect(PROMPT)
            out = plain(child.before)
            assert "goes on in the background" in out, out
            child.expect_exact("deploy `vllm-gemma4`: ready")  # nothing typed meanwhile
            out += plain(child.before) + "deploy `vllm-gemma4`: ready" + until_quiet(child)
        else:
            child.expect(PROMPT)
            out = plain(child.before)
        assert "failed unexpectedly" not in out and "Traceback" not in out, (line, out)
        assert "No such button" not in out and "Unknown command" not in out, (line, out)
        seen[line] = seen.get(line, "") + out
        if len(lines) <= n < len(lines) + len(tpu):
            tpu_said.append(out)
        elif n >= len(lines) + len(tpu):
            aca_said.append(out)
    child.sendline("quit")
    child.expect(pexpect.EOF)
    at_exit = child.before or ""
    child.close()
    assert child.exitstatus == 0
    # Nothing after the last prompt: no gRPC "Got goaway" line from a channel whose simulated server stopped
    # first (it came in 3 of 5 runs before the console closed its clients before the servers).
    assert "goaway" not in at_exit.lower() and "Traceback" not in at_exit, at_exit
    everything = "".join(seen.values())
    assert "vllm-gemma4: ready" in seen["/gemma status"]
    assert "deploy `vllm-gemma4`: ready" in everything
    assert "Predicted vs actual" in everything  # the deploy's self-check found vLLM's lines
    assert "FIRING: vLLM revision failed to start on vllm-gemma4" in everything
    assert "KV cache too small for --max-model-len" in everything
    assert "redeploy `vllm-gemma4`: ready" in everything  # the fix, planned from its button and confirmed
    assert "Running / waiting              8 / 19" in seen["/gemma metrics"]
    assert "Run benchmark" in seen["/gemma bench"]
    assert "outside the bot" in everything and "Plan rollback to" in everything  # what changed
    assert "Acknowledged" in everything  # the lifecycle button, shown in the header and the thread
    assert "Postmortem draft" in seen["/gemma postmortem"]
    assert "fixed by redeploy" in seen["/gemma postmortem"] or "redeploy ok" in seen["/gemma postmortem"]
    listed = seen["/gemma incidents"]
    assert "vLLM revision failed to start" in listed  # resolved, or still closing: the close comes asynchronously
    # The canary: planned with its cost, compared in its thread, proposed for rollback, rolled back by a click.
    assert "Canary cost: a second GPU instance" in everything
    assert "the canary regresses" in everything and "regresses: roll it back?" in everything
    assert "rollback `vllm-gemma4`: ready" in everything
    # The Cloud TPU paragraph, in the same run: the slice's own stages, and status ready once vLLM answers.
    said = "".join(tpu_said)
    assert "deploy `vllm-gemma4-tpu`: ready" in said and "revision created" not in said, said
    assert "vllm-gemma4-tpu: ready" in seen["/gemma status vllm-gemma4-tpu"]
    # The Azure Container Apps paragraph, in the same run: bf16 on the T4, the revision's stages in ACA's words.
    said = "".join(aca_said)
    assert "Bfloat16 is only supported on GPUs with compute capability of at least 8.0" in said, said
    assert "deploy `vllm-gemma4-aca`: ready" in said and "instance starting" not in said, said
    assert "workload profile `Consumption-GPU-NC24-A100`" in seen["/gemma status vllm-gemma4-aca"]
    # ... and its traffic by revision weights: a scale's new revision, a canary's labelled split, a rollback to stable.
    assert "scale `vllm-gemma4-aca`: ready" in said and "--min-replicas 1 --max-replicas 2" in said, said
    assert "10% of traffic to `vllm-gemma4-aca--canary-" in said and "revision label add" in said, said
    assert re.search(r"split: 90% `vllm-gemma4-aca--\w+` \(stable\) · 10% `vllm-gemma4-aca--canary-", said), said
    assert "rollback `vllm-gemma4-aca`: ready" in said, said
    # ... and a scenario: a teammate's image that does not exist, Azure Monitor's alert, the incident's finding.
    assert "Container Apps could not pull the image" in seen["/gemma sandbox aca-image-pull"], seen

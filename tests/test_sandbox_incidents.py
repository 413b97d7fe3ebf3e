"""Incidents as a new user meets them (issue 24): one run of the sandbox console at a terminal (pexpect), following
the README's tour. Six scenarios in a row on one service (with a destroy and a fresh deploy halfway) each get
their own incident thread, diagnosis and fix buttons; a fix confirmed from a thread resolves its incident with a
follow-up line once the sandbox's Cloud Monitoring closes the alert; the same scenario firing again after that
opens a new incident of its own."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pexpect

from tests.terminal import PROMPT, plain
from tests.test_sandbox_console import _env

ROOT = Path(__file__).resolve().parent.parent
# scenario -> the finding its own diagnosis must lead with (bot/sandbox/scenarios.py)
SIX = {
    "kv-cache-too-small": "kv_cache_insufficient",
    "gpu-oom-at-load": "gpu_oom_at_load",
    "probe-too-short": "startup_probe_timeout",
    "gated-model": "hf_auth_failed",
    "queue-saturation": "request_queue_saturated",
    "host-memory": "container_memory_exceeded",
}
_BUTTON = re.compile(r"\[\d+\] Plan (redeploy|scale)")


def _spawn(tmp_path: Path) -> pexpect.spawn:
    env = _env(TERM="xterm", PYTHONPATH=str(ROOT), HOME=str(tmp_path), GEMMA_SRE_HISTORY=str(tmp_path / "history"))
    child = pexpect.spawn(
        sys.executable, ["-m", "bot.cli", "console"], env=env, cwd=str(tmp_path), timeout=120, encoding="utf-8"
    )
    child.expect(PROMPT)
    return child


def _run(child: pexpect.spawn, line: str) -> str:
    """Type a line; what the console printed before its next prompt."""
    child.sendline(line)
    child.expect(PROMPT)
    return plain(child.before)


def _quit(child: pexpect.spawn) -> str:
    child.sendline("quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    return str(child.before or "")


def _destroy_and_deploy_afresh(child: pexpect.spawn) -> None:
    """The issue's user did this between scenarios: the service gone (its open incidents resolve), a new one."""
    _run(child, "/gemma destroy")
    child.sendline("click Destroy…")
    child.expect_exact("Service name:")
    child.sendline("vllm-gemma4")
    child.expect_exact("service `vllm-gemma4` deleted")
    child.expect(PROMPT)
    _run(child, "/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384")
    out = _run(child, "click Confirm")
    assert "is ready and serving 100% of traffic" in out, out


def test_six_scenarios_in_a_row_each_get_their_own_diagnosis_and_buttons(tmp_path: Path) -> None:
    child = _spawn(tmp_path)
    seen: list[str] = []
    for n, (scenario, kind) in enumerate(SIX.items()):
        if n == 3:  # halfway: a destroy and a fresh deploy, then the rest on the new service
            _destroy_and_deploy_afresh(child)
        out = _run(child, f"/gemma sandbox {scenario}")
        assert "FIRING: vLLM" in out, f"{scenario}: no incident of its own\n{out}"
        assert "Another alert" not in out, f"{scenario}: folded into an earlier thread\n{out}"
        findings = out[out.index("finding(s)") :] if "finding(s)" in out else ""
        first = re.search(r"`([a-z_]+)`", findings)
        assert first and first.group(1) == kind, f"{scenario}: its diagnosis does not lead with {kind}\n{out}"
        assert _BUTTON.search(findings), f"{scenario}: no fix buttons\n{out}"
        seen.append(re.findall(r"incident (inc-[0-9-]+)", out)[0])
    tail = _quit(child)
    assert len(set(seen)) == 6  # six incidents
    assert "Traceback" not in tail


def test_a_confirmed_fix_resolves_its_incident_with_a_follow_up_and_a_refire_opens_anew(tmp_path: Path) -> None:
    child = _spawn(tmp_path)
    out = _run(child, "/gemma sandbox kv-cache-too-small")
    [first] = re.findall(r"incident (inc-[0-9-]+)", out)
    _run(child, "click Plan redeploy: max_model_len")
    child.sendline("click Confirm")
    # The redeploy becomes ready; the sandbox's Cloud Monitoring sees the condition clear and closes the alert.
    child.expect_exact("RESOLVED: vLLM revision failed to start on vllm-gemma4")
    when = r"[0-9-]+ [0-9:]+ UTC"
    child.expect(
        rf"fixed by redeploy `vllm-gemma4` at {when}: revision `(vllm-gemma4-\d+-\w+)` serving 100% of traffic, "
        "condition cleared"
    )
    fixed_revision = child.match.group(1)
    child.expect(PROMPT)
    status = _run(child, "/gemma status")
    assert f"latest ready `{fixed_revision}`" in status
    # The same failure deployed again after the resolve: a new deploy, a new incident, its own diagnosis.
    again = _run(child, "/gemma sandbox kv-cache-too-small")
    assert "FIRING: vLLM revision failed to start" in again and "`kv_cache_insufficient`" in again
    [second] = re.findall(r"incident (inc-[0-9-]+)", again)
    assert second != first
    assert _BUTTON.search(again)
    assert "Traceback" not in _quit(child)

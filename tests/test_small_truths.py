"""Small things that were not true, each through the surface where it showed: the simulated vLLM answers a
malformed body as vLLM does (400 and its ErrorResponse, not 500); the audit names the canary's automatic rollback
as text, not as a broken Slack mention; a canary error names `--canary`, the flag typed; a TPU plan with no
sourced price says the price is unknown (not `~$0/month`); the console shows log lines as they are
(`__init__.py`); Ctrl-C on a watch says once, after the terminal's own `^C`, that the watch goes on."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pexpect
import pytest

from bot.sandbox.clock import SandboxClock
from bot.sandbox.cloud import Sandbox
from bot.sandbox.console_session import ConsoleSession
from bot.settings import load_settings
from bot.wiring import close_deps
from handlers.render_slack import to_blocks
from skills.audit import latest
from tests.deploy_helpers import command
from tests.observe_fixtures import running_sim
from tests.terminal import PROMPT
from tests.test_canary import _deps, canary_thread
from tests.test_foundation_console import _env
from tests.test_truthful_writes import console

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["console"]  # a fixture, used by name


# --- the simulated vLLM: a malformed body is a 400 with vLLM's ErrorResponse ----------------------------------


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/tokenize"])
def test_the_simulated_vllm_answers_a_malformed_body_with_400_as_vllm_does(path: str) -> None:
    with running_sim() as (_, url):
        bad = httpx.post(
            url + path, content=b'{"model": "m", "messages": [', headers={"content-type": "application/json"}
        )
        not_object = httpx.post(url + path, content=b"[1, 2]", headers={"content-type": "application/json"})
        good = httpx.post(
            url + path, json={"model": "m", "prompt": "hi", "messages": [{"role": "user", "content": "hi"}]}
        )
    assert bad.status_code == 400, bad.text
    error = bad.json()["error"]  # vLLM's ErrorResponse: {"error": ErrorInfo}
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == 400 and error["type"] == "Bad Request" and error["param"].startswith("body.")
    assert error["message"].startswith("1 validation error:\n  {'type': 'json_invalid', 'loc': ('body', ")
    assert "'msg': 'JSON decode error'" in error["message"]
    assert not_object.status_code == 400 and not_object.json()["error"]["param"] == "body"
    assert "'type': 'model_type'" in not_object.json()["error"]["message"]
    assert good.status_code == 200, good.text


# --- the audit: the canary's automatic rollback is named as text, not a broken mention ------------------------


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    sb = Sandbox(clock=SandboxClock(speed=0), image=load_settings().vllm_image).start()
    yield sb
    sb.close()


async def test_the_audit_names_the_automatic_rollback_as_text(
    sandbox: Sandbox, key_prefix: str, redis_client: Any
) -> None:
    deps = await _deps(sandbox, key_prefix, canary_auto_rollback=True)  # CANARY_ROLLBACK_IDENTITY's default
    identity = deps.settings.canary_rollback_identity
    try:
        sandbox.fleet.arm("canary-regresses")
        await canary_thread(deps, sandbox)
        entries = await latest(deps.redis, deps.settings.key("audit"))
        assert entries[0].user_id == identity and entries[0].action == "rollback"  # the rollback happened, by it
        reply, _ = await command(deps, "audit")
        assert reply is not None
        _, blocks = to_blocks(reply)
        shown = json.dumps(blocks)
        assert f"&lt;@{identity}&gt;" not in shown and f"<@{identity}>" not in shown  # no broken mention
        assert f"@{identity} *rollback*" in shown
        # a person who confirmed is still a mention Slack resolves
        assert "<@UDEPLOYER>" in shown
    finally:
        await close_deps(deps)


# --- a canary error names the flag typed -----------------------------------------------------------------------


@pytest.mark.parametrize(("typed", "said"), [("0", "at least 1"), ("51", "at most 50"), ("x", "a whole number")])
async def test_a_canary_error_names_the_flag_typed(console: ConsoleSession, typed: str, said: str) -> None:
    out = await console.line(f"/gemma deploy gemma4-12b-qat-l4 --max-model-len 8192 --canary {typed}")
    assert f"Invalid canary: --canary must be {said}" in out, out
    assert "--percent" not in out


# --- a TPU price nobody sourced is unknown, not $0 ---------------------------------------------------------------


async def test_a_spot_tpu_plan_with_no_sourced_price_says_the_price_is_unknown(console: ConsoleSession) -> None:
    plan = await console.line("/gemma deploy gemma4-e4b-tpu-v6e1-spot")
    assert "Cost while ACTIVE, serving or idle (no scale to zero): price unknown" in plan, plan
    assert "$0" not in plan
    zones = await console.line("/gemma tpu zones v6e-1 --provisioning spot")
    assert "price unknown" in zones and "$0" not in zones
    fit = await console.line("/gemma fit gemma-4-e4b --tpu v6e-1 --provisioning spot")
    assert "price unknown" in fit and "$0" not in fit
    # a sourced price is still shown, per hour and per month
    priced = await console.line("/gemma deploy gemma4-31b-tpu-v6e4")
    assert re.search(r"no scale to zero\): \$\d+\.\d\d/h, ~\$[\d,]+/month", priced), priced


# --- log lines are shown as they are: no mrkdwn emphasis eats `__init__` ---------------------------------------


async def test_logs_show_dunder_file_names_as_they_are(console: ConsoleSession) -> None:
    out = await console.line("/gemma logs")
    assert "[__init__.py:235] Automatically detected platform cuda." in out, out
    assert not re.search(r"(?<!_)_init_\.py", out)
    # and in Slack the digest is a code block, where mrkdwn does not emphasise
    assert console.deps is not None
    reply, _ = await command(console.deps, "logs")  # type: ignore[arg-type]
    assert reply is not None
    _, blocks = to_blocks(reply)
    code = next(b["text"]["text"] for b in blocks if b.get("text", {}).get("text", "").startswith("```"))
    assert "[__init__.py:235]" in code


# --- Ctrl-C on a watch at a real terminal ------------------------------------------------------------------------


def test_ctrl_c_on_a_watch_says_once_that_it_goes_on(tmp_path: Path) -> None:
    env = _env(
        GEMMA_SRE_HISTORY=str(tmp_path / "history"),
        TERM="xterm",
        PYTHONPATH=str(ROOT),
        HOME=str(tmp_path),
        SANDBOX_SPEED="20",  # a cold start of minutes takes long enough to press Ctrl-C during it
        DEPLOY_POLL_S="0.2",
    )
    child = pexpect.spawn(
        sys.executable, ["-m", "bot.cli", "console"], env=env, cwd=str(tmp_path), timeout=90, encoding="utf-8"
    )
    try:
        child.expect(PROMPT)
        child.sendline("/gemma deploy gemma4-12b-qat-l4 --max-model-len 8192")
        child.expect(PROMPT)
        child.sendline("click Confirm")
        child.expect_exact("revision created")  # the watch is following the revision now
        child.sendintr()
        child.expect(PROMPT)
        said = child.before or ""
        assert "Traceback" not in said
        assert said.count("^C") == 1, said  # the terminal's echo; the console adds none
        assert said.count("goes on in the background") == 1, said
        child.sendline("quit")
        child.expect(pexpect.EOF)
        assert "Traceback" not in (child.before or "")
    finally:
        child.close(force=True)

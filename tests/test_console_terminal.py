"""The console at a real terminal (a pty, via pexpect): readline editing and history, Ctrl-C and Ctrl-D
leave cleanly, no traceback; and through its API: Slack markup as plain text, edits without duplicated
lines, thread replies continuing a `/gemma ask`, an unexpected error as an id and one sentence."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import pexpect
import pytest

from bot.console import ConsoleResponder, handle_line, interact, plain_markup
from bot.console_terminal import LineReader
from bot.deps import Deps
from handlers.reply import Reply
from tests.terminal import PROMPT, spawn_console

ROOT = Path(__file__).resolve().parent.parent


def _spawn(tmp_path: Path, **extra: str) -> pexpect.spawn:
    return spawn_console(tmp_path, **extra)


def test_history_line_editing_and_ctrl_c_at_the_prompt(tmp_path: Path) -> None:
    child = _spawn(tmp_path)
    child.sendline("/gemma nosuch")
    child.expect_exact("Unknown command `nosuch`")
    child.expect(PROMPT)
    child.send("\x1b[A")  # Up: the previous line comes back from history...
    child.send("\x01")  # ...Ctrl-A to its start...
    child.send("x")  # ...and an edit there
    child.send("\r")
    child.expect_exact("Unknown command `x/gemma`")
    child.expect(PROMPT)
    child.sendintr()  # Ctrl-C at the prompt leaves
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert "Traceback" not in (child.before or "")
    assert "/gemma nosuch" in (tmp_path / "history").read_text()


def test_ctrl_c_interrupts_a_running_command(tmp_path: Path) -> None:
    # A server that accepts and never answers: `/gemma status` waits on it until interrupted.
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(8)
    url = f"http://127.0.0.1:{hole.getsockname()[1]}"
    child = _spawn(
        tmp_path,
        GOOGLE_CLOUD_PROJECT="p",
        GOOGLE_ANONYMOUS_CREDENTIALS="true",
        CLOUD_RUN_API_ENDPOINT=url,
        VLLM_BASE_URL=url,
        PROBE_TIMEOUT_S="120",
        CLOUD_CALL_DEADLINE_S="2",  # on quit the process waits for the hung cloud call's thread: keep that short
    )
    child.sendline("/gemma status")
    child.expect_exact("/gemma status")
    hole.settimeout(60)
    conn, _ = hole.accept()  # the command is now waiting on the silent server
    child.sendintr()
    child.expect_exact("(interrupted; `quit` or Ctrl-D leaves)")
    child.expect(PROMPT)  # still there
    child.sendline("quit")
    child.expect(pexpect.EOF)
    child.close()
    conn.close()
    hole.close()
    assert child.exitstatus == 0 and "Traceback" not in (child.before or "")


def test_ctrl_d_leaves(tmp_path: Path) -> None:
    child = _spawn(tmp_path)
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and "Traceback" not in (child.before or "")


def test_slack_markup_becomes_plain_text() -> None:
    line = "*Plan* for <@U123> in <#C9|ops>: <!here> ~old~ _new_ &lt;b&gt; `max_model_len` <https://x.io|docs>"
    assert plain_markup(line) == "Plan for @U123 in #ops: @here old new <b> `max_model_len` <https://x.io|docs>"
    assert plain_markup("<https://x.io>") == "https://x.io"
    assert plain_markup("2*3*4 and snake_case_name") == "2*3*4 and snake_case_name"


async def test_edits_print_only_new_lines() -> None:
    out = io.StringIO()
    r = ConsoleResponder(out, lambda p: None)
    ts = await r.post(Reply(title="Deploying vllm-gemma4").add(text="step 1: image ok"))
    await r.update(ts, Reply(title="Deploying vllm-gemma4").add(text="step 1: image ok\nstep 2: revision ready"))
    await r.update(ts, Reply(title="Deploying vllm-gemma4").add(text="step 1: image ok\nstep 2: revision ready"))
    lines = out.getvalue().splitlines()
    assert lines.count("Deploying vllm-gemma4") == 1 and lines.count("step 1: image ok") == 1
    assert lines.count("step 2: revision ready") == 1 and lines.count("(message #1 updated)") == 1


class _Boom:
    """A runtime whose every call fails in a way no handler expects."""

    def __getattr__(self, name: str) -> object:
        raise ZeroDivisionError("boom")


async def test_an_unexpected_error_is_an_id_and_one_sentence(deps: Deps, tmp_path: Path) -> None:
    from handlers.registry import load_all

    load_all()
    out = io.StringIO()
    stdin = io.StringIO("/gemma status\nquit\n")
    reader = LineReader(stdin, out)
    deps.runtime = _Boom()  # type: ignore[assignment]
    deps.model_server = _Boom()  # type: ignore[assignment]
    await interact(deps, ConsoleResponder(out, reader.read_sync), reader, str(tmp_path / "console.log"))
    text = out.getvalue()
    assert "error id" in text and "Traceback" not in text and "ZeroDivisionError" not in text


@pytest.fixture
async def deps(settings, redis_client):  # type: ignore[no-untyped-def]
    from bot.wiring import build_deps

    d = build_deps(settings)
    yield d
    await d.redis.aclose()


async def test_reply_continues_an_ask_thread(settings, redis_client, cloud_run, script) -> None:  # type: ignore[no-untyped-def]
    from bot.agent import Agent
    from bot.sandbox.openai_script import say
    from bot.wiring import build_deps
    from handlers.registry import load_all
    from tests.agent_helpers import MODEL_ID

    load_all()
    cloud_run.seed_service("vllm-gemma4", uri=script.base_url)
    script.push(say("It is up and serving."), say("Cold starts take several minutes from zero."))
    d = build_deps(settings.model_copy(update={"vllm_base_url": script.base_url, "vllm_model_id": MODEL_ID}))
    d.agent = Agent(d, initial_backoff_s=0.01, max_backoff_s=0.05)
    out = io.StringIO()
    r = ConsoleResponder(out, lambda p: None)
    await handle_line(d, r, "/gemma ask is the service up?")
    assert "It is up" in out.getvalue() and "reply TEXT" in out.getvalue()
    await handle_line(d, r, "reply how long to wake it?")
    assert "Cold starts take several minutes" in out.getvalue()
    assert script.chat_requests[-1]["messages"][-1]["content"] == "how long to wake it?"
    await d.redis.aclose()


pytest_plugins = ["tests.agent_fixtures"]

"""No secret from the corpus (62 synthetic secrets of 21 kinds: single, repeated, in JSON payloads, in
multi-line entries and tracebacks, a private key in one entry and one per line) reaches any surface:
Slack (through the Slack stand-in, over HTTP), the model's input (through the scripted OpenAI stand-in),
the console, `gemma-sre diagnose` text and JSON, the bot's own log lines, and the audit stream."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.cli import main as cli_main
from bot.console import run_console
from bot.log_format import JsonFormatter
from bot.sandbox.cloud_logging_api import CloudLoggingStandIn
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.openai_script import OpenAIScript, say
from bot.sandbox.slack_api import SlackStandIn
from bot.sandbox.slack_signing import action_body, command_body, signed_headers
from bot.web import create_app
from handlers.reply import CONFIRM_ACTION
from skills.logs.fetch import parse_lines
from skills.logs.redact import redact
from tests.agent_helpers import plan_json
from tests.conftest import SIGNING_SECRET
from tests.eventually import eventually
from tests.redaction_corpus import Corpus, build

pytest_plugins = ["tests.agent_fixtures"]


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    c = build(seed=20)
    assert len(c.secrets) >= 60 and len(c.kinds) >= 15
    return c


@pytest.fixture
def bot_log() -> Iterator[io.StringIO]:
    """The bot's own log output, formatted exactly as `serve` writes it (JSON lines, redacted)."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield out
    root.removeHandler(handler)
    root.setLevel(old)


def test_entries_are_redacted_as_they_are_read(corpus: Corpus) -> None:
    entries, malformed = parse_lines(json.dumps(e) for e in corpus.entries)
    assert malformed == 0 and len(entries) == len(corpus.entries)
    assert corpus.leaks("\n".join(e.text for e in entries)) == []
    # The rules alone, line by line: every kind but the key blocks (which need the entry-level pass).
    by_line = corpus.leaks("\n".join(redact(line) for line in corpus.plain))
    assert [kind for kind, _ in by_line if kind != "private_key"] == []


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("as_plain", [False, True], ids=["cloud-logging-json", "plain-text"])
def test_cli_diagnose_output_has_no_secret(corpus: Corpus, tmp_path: Path, capsys, fmt: str, as_plain: bool) -> None:
    path = tmp_path / "logs.txt"
    lines = corpus.plain if as_plain else [json.dumps(e) for e in corpus.entries]
    path.write_text("\n".join(lines) + "\n")
    assert cli_main(["diagnose", "--logs", str(path), "--format", fmt]) == 0
    out = capsys.readouterr()
    assert len(out.out) > 500
    assert corpus.leaks(out.out + out.err) == []
    assert "[REDACTED:" in out.out or fmt == "json"


async def test_slack_model_and_bot_logs_see_no_secret(
    corpus: Corpus,
    make_deps: Any,
    script: OpenAIScript,
    slack: SlackStandIn,
    logging_api: CloudLoggingStandIn,
    bot_log: io.StringIO,
) -> None:
    script.otherwise = lambda body: say(plan_json())  # type: ignore[assignment]
    deps = make_deps(extra_entries=corpus.entries)
    app = create_app(deps)
    pasted = next(v for k, v in corpus.secrets if k == "hf_token")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test") as client:
        acks = []
        for i, text in enumerate(
            ["logs --since 1h", "diagnose --since 1h", "analyze --since 1h", f"ask why does {pasted} fail?"]
        ):
            body = command_body(text, slack.response_url(f"r{i}"), trigger_id=f"t-red-{i}")
            resp = await client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
            assert resp.status_code == 200
            acks.append(resp.text)
        assert await eventually(lambda: len(slack.responses) >= 2 and len(script.chat_requests) >= 2, timeout=60)
        await deps.drain(timeout_s=60)
    slack_seen = json.dumps(slack.responses) + json.dumps([c.payload for c in slack.calls])
    slack_seen += "".join(v.decode("utf-8", "replace") for v in slack.uploads.values()) + "".join(acks)
    assert "[REDACTED:" in slack_seen
    assert corpus.leaks(slack_seen) == []
    model_input = json.dumps(script.chat_requests)
    assert "[REDACTED:" in model_input
    assert corpus.leaks(model_input) == []
    keys = [k async for k in deps.redis.scan_iter(deps.settings.key("conv", "*"))]
    stored = json.dumps([await deps.redis.get(k) for k in keys])
    assert keys and pasted not in stored
    assert corpus.leaks(bot_log.getvalue()) == []


async def test_console_shows_no_secret(
    corpus: Corpus, make_deps: Any, script: OpenAIScript, bot_log: io.StringIO
) -> None:
    script.otherwise = lambda body: say(plan_json())  # type: ignore[assignment]
    deps = make_deps(extra_entries=corpus.entries)
    pasted = next(v for k, v in corpus.secrets if k == "slack_bot_token")
    stdin = io.StringIO(f"logs --since 1h\ndiagnose --since 1h\nask is {pasted} valid?\nquit\n")
    out = io.StringIO()
    assert await run_console(deps, stdin=stdin, out=out) == 0
    shown = out.getvalue()
    assert "[REDACTED:" in shown and len(shown) > 1000
    assert corpus.leaks(shown) == []
    assert corpus.leaks(json.dumps(script.chat_requests)) == []
    assert corpus.leaks(bot_log.getvalue()) == []


async def test_audit_stream_and_failure_report_carry_no_secret(
    corpus: Corpus, make_deps: Any, cloud_run: CloudRunStandIn, slack: SlackStandIn, bot_log: io.StringIO
) -> None:
    """A write that fails with an error quoting a secret: the progress message in Slack and the audit entry
    say why, without the secret."""
    deps = make_deps()
    leaked = next(v for k, v in corpus.secrets if k == "google_oauth_token")
    app = create_app(deps)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test") as client:
        body = command_body("scale 1 2", slack.response_url("plan"), user_id="UDEPLOYER", trigger_id="t-aud-1")
        await client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
        assert await eventually(lambda: slack.responses, timeout=30)
        plan_text = json.dumps(slack.responses[0])
        plan_id = plan_text.split("plan `", 1)[1].split("`", 1)[0]
        cloud_run.fail_next("PATCH", 400, f"invalid request: header Authorization: Bearer {leaked} rejected")
        click = action_body(CONFIRM_ACTION, plan_id, slack.response_url("c"), user_id="UDEPLOYER", trigger_id="t-aud-2")
        await client.post("/slack/events", content=click, headers=signed_headers(SIGNING_SECRET, click))
        await deps.drain(timeout_s=30)
    raw = await deps.redis.xrange(deps.settings.key("audit"))
    assert raw, "the failed write was not audited"
    audit = json.dumps(raw)
    assert "failed" in audit and leaked not in audit and "[REDACTED:" in audit
    seen = json.dumps([c.payload for c in slack.calls]) + json.dumps(slack.responses)
    assert leaked not in seen
    assert leaked not in bot_log.getvalue()

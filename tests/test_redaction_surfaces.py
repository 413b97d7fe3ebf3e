"""No secret from the corpus (136 synthetic secrets of 45 kinds: single, repeated, in JSON payloads, in
multi-line entries and tracebacks, encoded (percent, base64), private keys in one entry, one per line,
interleaved with another instance's lines, and cut at the window's start) reaches any surface:
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
from bot.sandbox.slack_limits import Limiter, RateLimits
from bot.sandbox.slack_signing import action_body, command_body, signed_headers
from bot.web import create_app
from handlers.reply import CONFIRM_ACTION
from skills.clock import REAL_CLOCK
from skills.logs.fetch import parse_lines
from skills.logs.redact import redact
from tests.agent_helpers import plan_json
from tests.conftest import SIGNING_SECRET
from tests.eventually import eventually
from tests.redaction_corpus import Corpus, build

pytest_plugins = ["tests.agent_fixtures"]
# How a failed update's audit detail starts (skills/deploy/execute.py, the Cloud Run stand-in's 400 message).
AUDIT_LEAD = "update service vllm-gemma4: Cloud Run rejected the request (invalid request: "


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    c = build(seed=20)
    assert len(c.secrets) >= 130 and len(c.kinds) >= 45
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
    # A budget large enough that no template is left out: every corpus entry reaches the output's digest.
    assert cli_main(["diagnose", "--logs", str(path), "--format", fmt, "--budget", "100000"]) == 0
    out = capsys.readouterr()
    assert len(out.out) > 500
    assert ("0 templates left out" in out.out) if fmt == "text" else json.loads(out.out)["digest"]["omitted"] == 0
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
    """Writes that fail with an error quoting a corpus line (every format): the progress message in Slack and
    the audit entry say why, without the secret, even where the audit's 500-character cut falls inside it."""
    # 44 writes: Slack's chat.update budget (50/min, enforced by the stand-in and paced by the bot) is not what
    # this test measures, so this workspace gets a larger one.
    slack.limiter = Limiter(RateLimits(update_rate=100.0, update_burst=200, post_workspace_rate=100.0), REAL_CLOCK)
    deps = make_deps(slack_update_per_min=100000)
    app = create_app(deps)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot.test") as client:
        for i, (_kind, secret, line) in enumerate(corpus.lines):
            # A channel each: Slack's per-channel posting limits (enforced by the stand-in) would pace one channel.
            ch = f"CAUD{i:03d}"
            body = command_body(
                "scale 1 2", slack.response_url(f"plan{i}"), user_id="UDEPLOYER", trigger_id=f"t-a{i}", channel_id=ch
            )
            await client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))
            assert await eventually(lambda i=i: any(r.get("_rid") == f"plan{i}" for r in slack.responses), timeout=30)
            plan = next(r for r in slack.responses if r.get("_rid") == f"plan{i}")
            plan_id = json.dumps(plan).split("plan `", 1)[1].split("`", 1)[0]
            # The secret starts 15 characters before the audit's 500-character cut (after the write's error prefix).
            pad = "x" * max(0, 485 - len(AUDIT_LEAD) - line.find(secret[:8]) - 1)
            cloud_run.fail_next("PATCH", 400, f"invalid request: {pad} {line} rejected")
            click = action_body(
                CONFIRM_ACTION,
                plan_id,
                slack.response_url(f"c{i}"),
                user_id="UDEPLOYER",
                channel_id=ch,
                trigger_id=f"t-b{i}",
            )
            await client.post("/slack/events", content=click, headers=signed_headers(SIGNING_SECRET, click))
            await deps.drain(timeout_s=30)
    raw = await deps.redis.xrange(deps.settings.key("audit"))
    # A confirmed write is recorded `pending`, then its outcome (issue 25): every failed write has its outcome.
    outcomes = [fields for _, fields in raw if fields.get("result") != "pending"]
    assert len(outcomes) == len(corpus.lines), "every failed write is audited"
    assert all(fields.get("result") == "failed" for fields in outcomes)
    audit = json.dumps(raw, default=lambda b: b.decode() if isinstance(b, bytes) else str(b))
    assert "failed" in audit and "[REDACTED:" in audit
    assert corpus.leaks(audit) == []
    seen = json.dumps([c.payload for c in slack.calls]) + json.dumps(slack.responses)
    assert corpus.leaks(seen) == []
    assert corpus.leaks(bot_log.getvalue()) == []

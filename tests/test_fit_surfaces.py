"""`gemma-sre fit` (JSON and text, exit codes) and `/gemma fit` / `/gemma models` in Slack."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from bot import cli_fit
from bot.deps import Deps
from bot.sandbox.slack_api import SlackStandIn
from bot.sandbox.slack_signing import command_body, signed_headers
from bot.settings import Settings
from bot.web import create_app
from bot.wiring import build_deps
from handlers.commands.fit import render_catalog, render_fit
from handlers.fit_args import parse_fit_args
from handlers.render_slack import to_blocks
from handlers.reply import PLAN_ACTION
from skills.actions.params import DeployParams
from skills.capacity.fit import FitRequest, check_fit, load_catalog
from skills.errors import InvalidInput
from skills.serving.profiles import load_profiles
from tests.conftest import SIGNING_SECRET
from tests.eventually import eventually

ROOT = Path(__file__).resolve().parents[1]
REQUIRED_KEYS = {
    "verdict",
    "weights_gib",
    "kv_cache_tokens",
    "max_concurrency",
    "host_memory_gib",
    "cold_start_s",
    "cost_per_hour_usd",
    "changes",
    "alternatives",
}


def _cli(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gemma-sre")
    cli_fit.register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["fit", *argv])


def test_cli_json_for_a_config_that_fits(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli_fit.run(_cli(["26b-qat", "--gpu", "nvidia-l4", "--kv-cache-dtype", "fp8", "--format", "json"]))
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert REQUIRED_KEYS <= data.keys()
    assert data["verdict"] == "fits" and data["model"] == "gemma-4-26b-a4b-qat"
    assert 90_000 < data["kv_cache_tokens"] < 140_000
    assert data["request"]["kv_cache_dtype"] == "fp8"
    assert data["changes"] == [] and data["alternatives"] == []


def test_cli_json_does_not_fit_exits_1_with_alternatives(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli_fit.run(_cli(["gemma-4-31b-qat", "--gpu", "l4", "--format", "json"]))
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert data["verdict"] == "does_not_fit" and data["kv_cache_tokens"] == 0
    assert any("nvidia-rtx-pro-6000" in a for a in data["alternatives"])


def test_cli_text_shows_the_changes(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli_fit.run(_cli(["26b-qat", "--memory", "16Gi", "--kv-cache-dtype", "fp8"]))
    out = capsys.readouterr().out
    assert rc == 0
    assert "fits with changes on nvidia-l4" in out
    assert "memory 32Gi" in out and "KV cache" in out


def test_cli_unknown_names_exit_2_with_close_matches(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_fit.run(_cli(["gemma-4-27b-qat"])) == 2
    err = capsys.readouterr().err
    assert "Unknown model `gemma-4-27b-qat`" in err and "Did you mean" in err and "gemma-4-26b-a4b-qat" in err
    assert cli_fit.run(_cli(["12b-qat", "--gpu", "nvidia-l5"])) == 2
    assert "Unknown GPU `nvidia-l5`" in capsys.readouterr().err


def test_installed_command_line_end_to_end() -> None:
    """The real entry point in a fresh interpreter: argv -> bot.cli -> cli_fit -> JSON on stdout."""
    args = [
        sys.executable,
        "-m",
        "bot.cli",
        "fit",
        "12b-qat",
        "--gpu",
        "a100-80gb",
        "--gpu-memory-utilization",
        "0.95",
        "--format",
        "json",
    ]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert REQUIRED_KEYS <= data.keys()
    assert abs(data["kv_cache_tokens"] - 1_050_170) / 1_050_170 < 0.25
    bad = subprocess.run(
        [sys.executable, "-m", "bot.cli", "fit", "nope-model"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and "Unknown model" in bad.stderr and "Traceback" not in bad.stderr


def test_chat_parser_turns_bad_flags_into_user_errors() -> None:
    req = parse_fit_args(["26b-qat", "--util", "0.95", "--memory", "32Gi", "--enforce-eager"])
    assert req == FitRequest(model="26b-qat", gpu_memory_utilization=0.95, host_memory_gib=32, enforce_eager=True)
    for argv in (
        [],
        ["26b-qat", "--kv-cache-dtype", "int4"],
        ["26b-qat", "--bogus"],
        ["26b", "--util", "7"],
        ["26b", "--memory", "lots"],
        ["31b-qat", "--limit-mm-per-prompt", "image=0"],
        ["31b-qat", "--limit-mm-per-prompt", '{"image": -1}'],
    ):
        with pytest.raises(InvalidInput):
            parse_fit_args(argv)


def test_slack_blocks_for_a_verdict_with_alternatives() -> None:
    text, blocks = to_blocks(render_fit(check_fit(FitRequest(model="26b-a4b"))))
    assert "does NOT fit" in text
    body = json.dumps(blocks)
    assert "Nearest configurations that fit" in body and "gemma-4-26b-a4b-qat on nvidia-l4" in body
    assert not any(b["type"] == "actions" for b in blocks)  # nothing to deploy
    _, blocks = to_blocks(render_fit(check_fit(FitRequest(model="12b-qat", gpu="a100-80gb"))))
    assert not any(b["type"] == "actions" for b in blocks)  # not a Cloud Run GPU
    for b in blocks:
        if b["type"] == "section" and "text" in b:
            assert len(b["text"]["text"]) <= 3000


def test_slack_blocks_for_a_fit_offer_a_deploy_plan_button() -> None:
    _, blocks = to_blocks(render_fit(check_fit(FitRequest(model="26b-qat", kv_cache_dtype="fp8"))))
    buttons = [el for b in blocks if b["type"] == "actions" for el in b["elements"]]
    assert len(buttons) == 1 and buttons[0]["action_id"] == PLAN_ACTION
    value = json.loads(buttons[0]["value"])
    assert value["action"] == "deploy"
    params = DeployParams.model_validate(value["params"])  # the deploy flow's own contract
    assert load_profiles()[params.profile].model == "gemma-4-26b-a4b-qat"
    assert params.memory == "32Gi" and params.kv_cache_dtype == "fp8"
    assert "--kv-cache-dtype fp8" in json.dumps(blocks)


def test_models_reply_lists_the_catalog() -> None:
    _, blocks = to_blocks(render_catalog(load_catalog()))
    body = json.dumps(blocks)
    assert "gemma-4-31b-qat" in body and "google/gemma-4-31B-it-qat-w4a16-ct" in body
    assert "nvidia-rtx-pro-6000" in body and "not on Cloud Run" in body


# --- through the real Slack app (Bolt + signature check + response_url) --------------------------------


@pytest.fixture
async def app_client(settings: Settings, redis_client: object) -> AsyncIterator[httpx.AsyncClient]:
    deps: Deps = build_deps(settings)
    transport = httpx.ASGITransport(app=create_app(deps))
    async with httpx.AsyncClient(transport=transport, base_url="http://bot.test") as client:
        yield client
    await deps.drain()
    await deps.redis.aclose()


async def _slash(client: httpx.AsyncClient, text: str, response_url: str, trigger: str) -> httpx.Response:
    body = command_body(text, response_url, trigger_id=trigger)
    return await client.post("/slack/events", content=body, headers=signed_headers(SIGNING_SECRET, body))


async def test_slash_fit_answers_in_channel(app_client: httpx.AsyncClient, slack: SlackStandIn) -> None:
    resp = await _slash(app_client, "fit 31b-qat --gpu nvidia-rtx-pro-6000", slack.response_url("f1"), "t-fit-1")
    assert resp.status_code == 200 and "Planning" in resp.text
    assert await eventually(lambda: slack.responses)
    answer = slack.responses[0]
    assert answer["response_type"] == "in_channel"
    assert "gemma-4-31b-qat fits on nvidia-rtx-pro-6000" in answer["text"]
    assert "KV cache" in json.dumps(answer["blocks"])


async def test_slash_fit_unknown_model_is_a_clear_ephemeral_error(
    app_client: httpx.AsyncClient, slack: SlackStandIn
) -> None:
    await _slash(app_client, "fit gemma-4-27b --gpu l4", slack.response_url("f2"), "t-fit-2")
    assert await eventually(lambda: slack.responses)
    answer = slack.responses[0]
    assert answer["response_type"] == "ephemeral"
    body = answer["text"] + json.dumps(answer["blocks"])
    assert "Unknown model `gemma-4-27b`" in body and "Did you mean" in body and "Traceback" not in body


def test_cli_takes_region_image_and_mm_limits_and_reports_what_it_assumed(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["31b-qat", "--gpu", "nvidia-rtx-pro-6000", "--region", "europe-west4", "--format", "json"]
    rc = cli_fit.run(
        _cli([*argv, "--vllm-image", "vllm/vllm-openai:v0.26.0", "--limit-mm-per-prompt", '{"image":0,"video":0}'])
    )
    text_only = json.loads(capsys.readouterr().out)
    assert rc == 0 and text_only["vllm_release"] == "0.26.0"
    assert text_only["request"]["limit_mm_per_prompt"] == {"image": 0, "video": 0}
    assert not any("invitation" in w for w in text_only["warnings"])  # europe-west4 offers it
    cli_fit.run(_cli(argv))
    full = json.loads(capsys.readouterr().out)
    assert full["weights_gib"] - text_only["weights_gib"] > 1.0  # the ~0.55B bf16 vision tower
    assert full["vllm_release"] == "0.25.1"  # the RTX PRO 6000's pinned image

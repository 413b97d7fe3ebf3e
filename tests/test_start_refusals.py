"""Start-ups a user gets wrong, through the CLI as a process: a JSON setting that is not JSON (MCP_TOKENS,
TPU_ZONES, REGISTRY_ENDPOINTS) is the start-up refusal naming the setting and the shape it wants, without
quoting its value (MCP_TOKENS holds bearer tokens) and without a traceback, for `serve` and `mcp` alike; `mcp
--http` on a port in use is one line and status 2, before anything starts. (Ctrl-C on `serve`:
tests/test_serve_start.py.)"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_mcp_server import _env

SECRET = "tok-Zq8vXw3LmN5pRt7yUb2c"
ROOT = Path(__file__).resolve().parent.parent


def _run(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        env={**_env(**env), "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,  # no .env beside it
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("name", "value", "shape"),
    [
        ("MCP_TOKENS", '{"U0123ABCD": "' + SECRET + '"', "a JSON object"),  # the closing brace forgotten
        ("MCP_TOKENS", "U0123ABCD=" + SECRET, "a JSON object"),
        ("TPU_ZONES", "us-east5-b,europe-west4-a", "a JSON array"),
        ("REGISTRY_ENDPOINTS", "{docker.io: http://127.0.0.1:5000}", "a JSON object"),
    ],
)
@pytest.mark.parametrize("command", [["mcp"], ["serve", "--sandbox"]])
def test_a_setting_that_is_not_json_is_the_start_up_refusal(
    tmp_path: Path, command: list[str], name: str, value: str, shape: str
) -> None:
    done = _run(command, tmp_path, **{name: value})
    assert done.returncode == 2, done.stderr
    out = done.stdout + done.stderr
    assert "Traceback" not in out and "pydantic" not in out, out
    line = next((x for x in out.splitlines() if x.strip().startswith(f"{name}: not valid JSON")), None)
    assert line is not None, out
    assert f"expected {shape}" in line
    assert SECRET not in out  # a setting's value is never quoted back


def test_mcp_http_on_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = _run(["mcp", "--http", "--port", str(port)], tmp_path, MCP_TOKENS='{"U1": "' + SECRET + '"}')
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"gemma-sre mcp: cannot serve MCP over HTTP on 127.0.0.1:{port}: Address already in use"
    ], done.stderr
    assert done.stdout == ""

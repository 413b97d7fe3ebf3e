"""Time from spawning `gemma-sre serve` to its first 200 on /healthz, and to its first 200 on /readyz (the
real app imported, wired and connected to Redis; serve answers /healthz before that, bot/serve_shell.py).

Spawns the real command (python -m bot.cli serve) with the minimal environment tests/test_serve_start.py
uses (Slack token and signing secret, Redis, a Slack stand-in on 127.0.0.1 for the token check), polls
/healthz every 10 ms, stops it with SIGINT, and prints each run and the median of RUNS (default 5).
Target (issue 18): under 1 s. Needs the Redis server on 127.0.0.1:6379 (REDIS_URL to override).
Usage: .venv/bin/python bench/startup.py [RUNS]
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.sandbox.server import serve  # noqa: E402
from bot.sandbox.slack_api import SlackStandIn  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=0.5) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def one_run(slack_url: str) -> tuple[float, float]:
    port = _free_port()
    env = dict(
        os.environ,
        SLACK_BOT_TOKEN="xoxb-bench",
        SLACK_SIGNING_SECRET="bench-secret",
        REDIS_URL=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
        KEY_PREFIX="gemma-sre-bench-startup",
        SLACK_API_URL=slack_url + "/api/",
        PYTHONPATH=str(ROOT),
    )
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=ROOT / "bench",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        times = []
        for path in ("/healthz", "/readyz"):
            while not _healthy(f"http://127.0.0.1:{port}{path}"):
                if proc.poll() is not None:
                    raise SystemExit(f"serve exited with {proc.returncode} before answering {path}")
                if time.perf_counter() - t0 > 60:
                    raise SystemExit(f"no {path} answer within 60 s")
                time.sleep(0.01)
            times.append(time.perf_counter() - t0)
        return times[0], times[1]
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    slack = SlackStandIn()
    with serve(slack.app) as url:
        health, ready = [], []
        for i in range(runs):
            h, r = one_run(url)
            health.append(h)
            ready.append(r)
            print(f"run {i + 1}: /healthz answered {h:.3f} s after spawn, /readyz {r:.3f} s")
    h, r = statistics.median(health), statistics.median(ready)
    print(f"median of {runs}: /healthz {h:.3f} s (target < 1 s), /readyz {r:.3f} s")


if __name__ == "__main__":
    main()

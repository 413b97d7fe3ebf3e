"""Fuzz the running bot: N seeded hostile bodies per endpoint (/slack/events, /alerts/gcp, /alerts/alertmanager),
signed and unsigned, authenticated and not, against `gemma-sre serve` as its own process on 127.0.0.1.

Prints, per endpoint, the status histogram and the 5xx count; then the tracebacks in the server's output
("Exception in ASGI application" and any logged traceback) and the server's RSS before and after. Targets:
0 5xx, 0 tracebacks, RSS growth under 20 MB. Slack, Cloud Run and the model server are stand-ins in this
process; Redis is the real server on 127.0.0.1 (keys under a fresh prefix).

    .venv/bin/python bench/fuzz.py [--bodies 10000] [--concurrency 32] [--seed 20]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ack_latency import free_port, serve_env, wait_up  # noqa: E402
from bot.sandbox.cloud_run_api import CloudRunStandIn  # noqa: E402
from bot.sandbox.examples import ALERTS  # noqa: E402
from bot.sandbox.fuzz import alert_cases, slack_cases  # noqa: E402
from bot.sandbox.model_server import ModelServerStandIn  # noqa: E402
from bot.sandbox.server import serve  # noqa: E402
from bot.sandbox.slack_api import SlackStandIn  # noqa: E402

SECRET = "bench-fuzz-signing-secret"
USER, PASSWORD, TOKEN = "gemma-sre", "fuzz-pass-123", "fuzz-token-123"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def send_all(
    url: str, cases: list[tuple[str, bytes, dict[str, str]]], concurrency: int
) -> dict[str, collections.Counter[int]]:
    hist: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(url, connector=aiohttp.TCPConnector(limit=concurrency)) as client:

        async def one(path: str, body: bytes, headers: dict[str, str]) -> None:
            async with sem:
                try:
                    async with client.post(path, data=body, headers=headers, skip_auto_headers=["Content-Type"]) as r:
                        await r.read()
                        hist[path][r.status] += 1
                except aiohttp.ClientError:
                    hist[path][0] += 1  # no HTTP answer at all

        await asyncio.gather(*(one(*c) for c in cases))
    return hist


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bodies", type=int, default=10_000, help="bodies per endpoint")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--seed", type=int, default=20)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    gcp = json.loads((ALERTS / "gcp-monitoring-open.json").read_text())
    am = json.loads((ALERTS / "alertmanager-firing.json").read_text())
    slack, cloud_run, model = SlackStandIn(), CloudRunStandIn(), ModelServerStandIn()
    log = tempfile.NamedTemporaryFile(prefix="gemma-sre-fuzz-", suffix=".log", delete=False)
    with serve(slack.app) as slack_url, serve(cloud_run.app) as cr_url, serve(model.app) as model_url:
        slack.base_url = slack_url
        cloud_run.seed_service("vllm-gemma4")
        cases: list[tuple[str, bytes, dict[str, str]]] = [
            ("/slack/events", body, headers)
            for body, headers in slack_cases(rng, SECRET, args.bodies, slack.response_url("fuzz"))
        ]
        creds = (USER, PASSWORD, TOKEN)
        for path in ("/alerts/gcp", "/alerts/alertmanager"):
            cases += list(alert_cases(rng, args.bodies, gcp, am, creds, paths=(path,)))
        rng.shuffle(cases)
        port = free_port()
        env = serve_env(SECRET, slack_url, cr_url, model_url, "fuzz") | {
            "ALERT_WEBHOOK_USER": USER,
            "ALERT_WEBHOOK_PASSWORD": PASSWORD,
            "ALERT_WEBHOOK_TOKEN": TOKEN,
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_up(url, proc)
            asyncio.run(send_all(url, cases[:200], args.concurrency))  # warm-up: imports, pools, caches
            time.sleep(2)
            before = rss_mb(proc.pid)
            t0 = time.perf_counter()
            hist = asyncio.run(send_all(url, cases, args.concurrency))
            elapsed = time.perf_counter() - t0
            time.sleep(5)  # let work started after acks finish before measuring memory
            after = rss_mb(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    output = Path(log.name).read_text(errors="replace")
    asgi = output.count("Exception in ASGI application")
    tracebacks = output.count("Traceback (most recent call last)")
    total_5xx = 0
    print(f"bodies per endpoint={args.bodies} seed={args.seed} concurrency={args.concurrency} ({elapsed:.1f} s)")
    for path in ("/slack/events", "/alerts/gcp", "/alerts/alertmanager"):
        h = hist.get(path, collections.Counter())
        n5 = sum(v for k, v in h.items() if k >= 500 or k == 0)
        total_5xx += n5
        print(f"{path:<22} {dict(sorted(h.items()))}  5xx/no answer: {n5}")
    print(
        f"5xx total: {total_5xx}   'Exception in ASGI application': {asgi}   tracebacks in server output: {tracebacks}"
    )
    print(f"server RSS: {before:.1f} MB before, {after:.1f} MB after, growth {after - before:+.1f} MB")
    ok = total_5xx == 0 and asgi == 0 and tracebacks == 0 and after - before < 20
    print(f"targets (0 5xx, 0 tracebacks, growth < 20 MB): {'met' if ok else 'NOT met'}; server output: {log.name}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

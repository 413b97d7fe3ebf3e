"""Ack latency of signed /gemma slash commands vs a bare Starlette endpoint on the same server, same run.

Starts the real app as its own process (`gemma-sre serve` under uvicorn on 127.0.0.1, real Redis, Slack /
Cloud Run / model-server stand-ins in this process), sends N signed `/gemma status` commands C at a time, and
prints p50/p99 of the time to the HTTP answer (the ack), next to the same figures for GET /healthz (a bare
Starlette route of the same server: no middleware work beyond the metrics counter). Repeated --runs times
(default 5) against the same server process; the summary is the median over the runs of each run's p99, and
the server's CPU time per request (from /proc/PID/stat, over each phase).

    .venv/bin/python bench/ack_latency.py [--requests 200] [--concurrency 50] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import aiohttp
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.sandbox.cloud_run_api import CloudRunStandIn  # noqa: E402
from bot.sandbox.model_server import ModelServerStandIn  # noqa: E402
from bot.sandbox.server import serve  # noqa: E402
from bot.sandbox.slack_api import SlackStandIn  # noqa: E402
from bot.sandbox.slack_signing import command_body, signed_headers  # noqa: E402

SECRET = "bench-signing-secret"
WARM = 10  # commands sent before the first measured run


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def run(kind: str, n: int, concurrency: int, url: str, response_url: str, text: str, warm: bool) -> list[float]:
    """Send n requests of one kind ("command": signed /gemma TEXT; "bare": GET /healthz), C at a time; return
    each request's time to the HTTP answer in ms."""
    # aiohttp as the load client: httpx's pool adds ~200 ms of client-side queueing at 50 concurrent requests.
    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(url, connector=aiohttp.TCPConnector(limit=concurrency)) as client:

        async def one_command() -> float:
            body = command_body(text, response_url, trigger_id=uuid.uuid4().hex)
            headers = signed_headers(SECRET, body)
            async with sem:
                t0 = time.perf_counter()
                async with client.post("/slack/events", data=body.encode(), headers=headers) as resp:
                    await resp.read()
                    dt = time.perf_counter() - t0
            assert resp.status == 200
            return dt * 1000

        async def one_bare() -> float:
            async with sem:
                t0 = time.perf_counter()
                async with client.get("/healthz") as resp:
                    await resp.read()
                    dt = time.perf_counter() - t0
            assert resp.status == 200
            return dt * 1000

        one = one_command if kind == "command" else one_bare
        await asyncio.gather(*(one_bare() for _ in range(concurrency)))  # open the connections first
        if warm:
            await asyncio.gather(*(one_command() for _ in range(WARM)))  # Bolt (auth.test) and the status cache
        return list(await asyncio.gather(*(one() for _ in range(n))))


def client_process(
    kind: str, n: int, concurrency: int, url: str, response_url: str, text: str, warm: bool
) -> list[float]:
    """The load client runs in its own process so it shares no GIL with the server or the stand-ins."""
    return asyncio.run(run(kind, n, concurrency, url, response_url, text, warm))


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far (/proc/PID/stat fields 14 and 15, in clock ticks;
    proc(5))."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve_env(secret: str, slack_url: str, cloud_run_url: str, model_url: str, name: str) -> dict[str, str]:
    """The environment of a `gemma-sre serve` process wired to the stand-ins (its own Redis key prefix)."""
    return {
        **os.environ,
        "SLACK_BOT_TOKEN": "xoxb-bench",
        "SLACK_SIGNING_SECRET": secret,
        "SLACK_API_URL": slack_url + "/api/",
        "REDIS_URL": "redis://127.0.0.1:6379/0",
        "KEY_PREFIX": f"gemma-sre-{name}-{uuid.uuid4().hex[:8]}",
        "GOOGLE_CLOUD_PROJECT": "bench",
        "GOOGLE_ANONYMOUS_CREDENTIALS": "true",
        "CLOUD_RUN_API_ENDPOINT": cloud_run_url,
        "VLLM_BASE_URL": model_url,
        "LOG_LEVEL": "WARNING",
    }


def wait_up(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gemma-sre serve exited with {proc.returncode}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit("gemma-sre serve did not come up")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--runs", type=int, default=5, help="runs; the figures printed last are medians over them")
    ap.add_argument("--text", default="status", help="the /gemma text to send (status: ack + work after it)")
    args = ap.parse_args()

    slack, cloud_run, model = SlackStandIn(), CloudRunStandIn(), ModelServerStandIn()
    with serve(slack.app) as slack_url, serve(cloud_run.app) as cr_url, serve(model.app) as model_url:
        slack.base_url = slack_url
        cloud_run.seed_service("vllm-gemma4")
        port = free_port()
        env = serve_env(SECRET, slack_url, cr_url, model_url, "bench")
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve", "--host", "127.0.0.1", "--port", str(port)], cwd=ROOT, env=env
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_up(url, proc)
            ctx = multiprocessing.get_context("spawn")
            status = args.text.split()[0] == "status"  # the status command posts to the response URL after the ack
            cmd_p99: list[float] = []
            bare_p99: list[float] = []
            cmd_cpu: list[float] = []
            bare_cpu: list[float] = []
            with ctx.Pool(1) as pool:
                for i in range(args.runs):
                    c0 = cpu_s(proc.pid)
                    bare = pool.apply(client_process, ("bare", args.requests, args.concurrency, url, "", "", False))
                    c1 = cpu_s(proc.pid)
                    before = len(slack.responses)
                    cmds = pool.apply(
                        client_process,
                        ("command", args.requests, args.concurrency, url, slack.response_url(), args.text, i == 0),
                    )
                    if status:  # CPU per command includes the work after the ack, until the status is delivered
                        expected = before + args.requests + (WARM if i == 0 else 0)
                        slack.wait_for(lambda e=expected: len(slack.responses) >= e, timeout=60)
                    c2 = cpu_s(proc.pid)
                    cmd_p99.append(pct(cmds, 99))
                    bare_p99.append(pct(bare, 99))
                    bare_cpu.append((c1 - c0) / args.requests * 1000)
                    cmd_cpu.append((c2 - c1) / (args.requests + (WARM if i == 0 else 0)) * 1000)
                    print(
                        f"run {i + 1}: /slack/events p50 {pct(cmds, 50):.2f} p99 {cmd_p99[-1]:.2f} ms, "
                        f"{cmd_cpu[-1]:.2f} ms CPU/request; "
                        f"/healthz p50 {pct(bare, 50):.2f} p99 {bare_p99[-1]:.2f} ms, "
                        f"{bare_cpu[-1]:.2f} ms CPU/request",
                        flush=True,
                    )
        finally:
            proc.terminate()
            proc.wait(timeout=20)

    c99, b99 = statistics.median(cmd_p99), statistics.median(bare_p99)
    print(f"requests={args.requests} concurrency={args.concurrency} command='/gemma {args.text}' runs={args.runs}")
    print(f"{'endpoint (median of runs)':<28}{'p99 ms':>10}{'CPU ms/request':>16}")
    print(f"{'/slack/events (ack)':<28}{c99:>10.2f}{statistics.median(cmd_cpu):>16.2f}")
    print(f"{'/healthz (bare)':<28}{b99:>10.2f}{statistics.median(bare_cpu):>16.2f}")
    print(f"ratio p99={c99 / b99:.2f}x (server CPU per command includes the status work after the ack)")
    print(
        f"target p99 < 50 ms: {'met' if c99 < 50 else 'NOT met'}; "
        f"within 2x bare p99: {'met' if c99 <= 2 * b99 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

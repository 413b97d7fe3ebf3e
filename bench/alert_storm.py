"""Alert storm: 10,000 webhook deliveries against the real app (uvicorn) with real Redis and a Slack stand-in.

100 incidents (one service each), 10 distinct alerts per incident, each delivered 10 times: 1,000 unique
alerts, 90% duplicate deliveries, in shuffled order. Prints accepted/s and webhook latency (p50/p99, with
GET /healthz on the same server as the baseline), then, once the workers have drained the queue, the number
of threads created (must equal the incidents) and lost entries (must be 0).

    .venv/bin/python bench/alert_storm.py [--deliveries 10000] [--concurrency 32] [--redis redis://127.0.0.1:6379/0]

The bot and the Slack stand-in each run in their own process (uvicorn), as in production; the load client
(aiohttp, keep-alive) is this process. GET /_bench on the bot reports its CPU time, event-loop lag (how late a
5 ms timer fires) and GC pauses during the storm, which is where a webhook's tail latency comes from.
Diagnostics: --workers 0 (webhook alone, nothing drains), --gc-unfrozen (the figures before the app's
gc.freeze()), --profile FILE (cProfile of the bot process).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOKEN = "bench-alert-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- roles run in subprocesses ----------------------------------------------------------------------------
def run_slack(port: int) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Mount, Route

    from bot.sandbox.slack_api import SlackStandIn

    standin = SlackStandIn()
    standin.base_url = f"http://127.0.0.1:{port}"

    async def stats(request: Request) -> JSONResponse:
        posts = standin.of("chat.postMessage")
        return JSONResponse(
            {
                "headers": sum(1 for p in posts if not p.get("thread_ts")),
                "thread_lines": sum(1 for p in posts if p.get("thread_ts")),
                "updates": len(standin.of("chat.update")),
            }
        )

    app = Starlette(routes=[Route("/_stats", stats), Mount("/", standin.app)])
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        loop="uvloop",
        http="httptools",
    )


def probe_route(unfreeze: bool = False) -> Any:
    """GET /_bench on the bot: its CPU time, event-loop lag and GC pauses since the last reset (?reset=1).

    Loop lag is how late a 5 ms timer fires: how long anything ready (a webhook request) waits for the loop.
    """
    import gc

    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    lags: list[float] = []
    pauses: list[tuple[int, float]] = []  # (generation, seconds)
    gc_start = [0.0]
    lag_task: list[asyncio.Task[None]] = []

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            gc_start[0] = time.perf_counter()
        else:
            pauses.append((int(info.get("generation", 0)), time.perf_counter() - gc_start[0]))

    gc.callbacks.append(on_gc)

    async def sample_lag() -> None:
        loop = asyncio.get_running_loop()
        while True:
            t = loop.time()
            await asyncio.sleep(0.005)
            lags.append(loop.time() - t - 0.005)

    async def probe(request: Request) -> JSONResponse:
        if not lag_task:
            lag_task.append(asyncio.get_running_loop().create_task(sample_lag()))
            if unfreeze:  # the "before" figures: startup objects back under the cyclic GC
                gc.unfreeze()
        out = {
            "cpu_s": time.process_time(),
            "lag_p50_ms": pct(lags, 50) if lags else 0.0,
            "lag_p99_ms": pct(lags, 99) if lags else 0.0,
            "lag_max_ms": max(lags, default=0.0) * 1000,
            "gc_pauses": len(pauses),
            "gc_max_ms": max((p for _, p in pauses), default=0.0) * 1000,
            "gc_total_ms": sum(p for _, p in pauses) * 1000,
            "gc_gen2": sum(1 for g, _ in pauses if g == 2),
            "gc_gen2_max_ms": max((p for g, p in pauses if g == 2), default=0.0) * 1000,
        }
        if request.query_params.get("reset"):
            lags.clear()
            pauses.clear()
        return JSONResponse(out)

    return Route("/_bench", probe, methods=["GET"])


def run_bot(port: int, slack_url: str, redis_url: str, prefix: str, workers: int, profile: str, unfreeze: bool) -> None:
    import uvicorn

    from bot.settings import load_settings
    from bot.web import create_app
    from bot.wiring import build_deps

    settings = load_settings(
        slack_bot_token="xoxb-bench",
        slack_signing_secret="bench-secret",
        slack_api_url=slack_url + "/api/",
        redis_url=redis_url,
        key_prefix=prefix,
        alert_webhook_token=TOKEN,
        google_cloud_project="bench-proj",
        google_anonymous_credentials=True,
        log_level="WARNING",
    )
    app = create_app(build_deps(settings), extra_routes=[probe_route(unfreeze)])
    if workers >= 0:  # a diagnostic knob: 0 measures the webhook alone (nothing drains)
        app.state.alert_queue.concurrency = workers

    def serve() -> None:
        uvicorn.run(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            access_log=False,
            loop="uvloop",
            http="httptools",
            backlog=4096,
        )

    if not profile:
        serve()
        return
    import cProfile
    import signal

    # uvicorn re-raises the SIGTERM it caught once it has shut down: make that a no-op so the profile is saved
    signal.signal(signal.SIGTERM, lambda *_: None)
    prof = cProfile.Profile()
    prof.runcall(serve)  # uvicorn returns on SIGTERM, so the profile covers the whole run
    prof.dump_stats(profile)


# --- the storm --------------------------------------------------------------------------------------------
def deliveries(n: int, incidents: int = 100, per_incident: int = 10) -> list[bytes]:
    unique = incidents * per_incident
    repeats = max(1, n // unique)
    bodies = []
    for i in range(incidents):
        for j in range(per_incident):
            body = {
                "version": "4",
                "status": "firing",
                "receiver": "gemma-sre",
                "externalURL": "http://alertmanager.monitoring:9093",
                "alerts": [
                    {
                        "status": "firing",
                        "labels": {
                            "alertname": f"StormAlert{j}",
                            "service": f"storm-svc-{i:03d}",
                            "severity": "warning",
                        },
                        "annotations": {"summary": f"storm alert {j} on service {i}"},
                        "startsAt": "2026-11-20T14:05:00.000Z",
                        "endsAt": "0001-01-01T00:00:00Z",
                        "fingerprint": f"storm-{i:03d}-{j:02d}",
                    }
                ],
            }
            bodies.extend([json.dumps(body).encode()] * repeats)
    random.Random(7).shuffle(bodies)
    return bodies[:n]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] * 1000


async def hammer(
    url: str, bodies: list[bytes], concurrency: int, method: str = "POST"
) -> tuple[float, list[float], dict[int, int], int]:
    import aiohttp

    lat: list[float] = []
    codes: dict[int, int] = {}
    new = 0
    it = iter(bodies)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal new
        for body in it:
            t0 = time.perf_counter()
            async with session.request(method, url, data=body if method == "POST" else None, headers=headers) as r:
                data = await r.read()
            lat.append(time.perf_counter() - t0)
            codes[r.status] = codes.get(r.status, 0) + 1
            if r.status == 202:
                new += json.loads(data)["new"]

    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn) as session:
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        elapsed = time.perf_counter() - t0
    return elapsed, lat, codes, new


async def bot_probe(url: str, reset: bool = False) -> dict[str, float]:
    import aiohttp

    async with aiohttp.ClientSession() as s, s.get(url + "/_bench" + ("?reset=1" if reset else "")) as r:
        return dict(await r.json())


async def wait_ready(url: str, limit_s: float = 30) -> None:
    import aiohttp

    deadline = time.monotonic() + limit_s
    async with aiohttp.ClientSession() as s:
        while time.monotonic() < deadline:
            try:
                async with s.get(url) as r:
                    if r.status < 500:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit(f"{url} did not come up")


async def storm(args: argparse.Namespace) -> int:
    import aiohttp
    import redis.asyncio as redis

    prefix = f"bench-storm-{uuid.uuid4().hex[:8]}"
    slack_port, bot_port = free_port(), free_port()
    slack_url, bot_url = f"http://127.0.0.1:{slack_port}", f"http://127.0.0.1:{bot_port}"
    py = sys.executable
    me = str(ROOT / "bench" / "alert_storm.py")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(  # noqa: ASYNC220 (start-up, before the measurement)
            [py, me, "--role", "slack", "--port", str(slack_port)], env=env
        ),
        subprocess.Popen(  # noqa: ASYNC220
            [
                py,
                me,
                "--role",
                "bot",
                "--port",
                str(bot_port),
                "--slack",
                slack_url,
                "--redis",
                args.redis,
                "--prefix",
                prefix,
                "--workers",
                str(args.workers),
                "--profile",
                args.profile,
                *(["--gc-unfrozen"] if args.gc_unfrozen else []),
            ],
            env=env,
        ),
    ]
    r = redis.Redis.from_url(args.redis, decode_responses=True)
    try:
        await wait_ready(slack_url + "/_stats")
        await wait_ready(bot_url + "/healthz")
        bodies = deliveries(args.deliveries)
        # warm-up (connections, script cache) on a different key space of alerts, then the baseline
        await hammer(bot_url + "/healthz", [b""] * 500, args.concurrency, "GET")
        b_elapsed, b_lat, _, _ = await hammer(bot_url + "/healthz", [b""] * 2000, args.concurrency, "GET")
        cpu0 = (await bot_probe(bot_url, reset=True))["cpu_s"]
        elapsed, lat, codes, new = await hammer(bot_url + "/alerts/alertmanager", bodies, args.concurrency)
        during = await bot_probe(bot_url, reset=True)
        accepted = codes.get(202, 0)
        print(
            f"deliveries: {len(bodies)}  accepted(202): {accepted}  other: "
            f"{ {k: v for k, v in codes.items() if k != 202} }  new alerts queued: {new}"
        )
        print(
            f"accepted/s: {accepted / elapsed:,.0f}  (baseline GET /healthz: {2000 / b_elapsed:,.0f}/s; "
            f"ratio {accepted / elapsed / (2000 / b_elapsed):.2f})"
        )
        print(
            f"webhook latency p50 {pct(lat, 50):.1f} ms  p99 {pct(lat, 99):.1f} ms  "
            f"(healthz p50 {pct(b_lat, 50):.1f} ms  p99 {pct(b_lat, 99):.1f} ms; "
            f"concurrency {args.concurrency})"
        )
        print(
            f"bot process during the storm: CPU {during['cpu_s'] - cpu0:.2f} s "
            f"({(during['cpu_s'] - cpu0) / len(bodies) * 1e6:.0f} us/delivery incl. its workers), event-loop lag "
            f"p50 {during['lag_p50_ms']:.1f} ms p99 {during['lag_p99_ms']:.1f} ms max {during['lag_max_ms']:.1f} ms, "
            f"GC pauses {during['gc_pauses']} (max {during['gc_max_ms']:.1f} ms; full collections "
            f"{during['gc_gen2']}, max {during['gc_gen2_max_ms']:.1f} ms)"
        )

        if args.workers == 0:
            print("RESULT: diagnostic run with no alert workers (webhook alone); nothing drained")
            return 0
        stream, dead = f"{prefix}:alerts:stream", f"{prefix}:alerts:dead"
        print(f"queued but not yet handled when the storm ended: {await r.xlen(stream)} of {new}")
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < args.drain_timeout:
            left = await r.xlen(stream)
            if left == 0:
                break
            await asyncio.sleep(0.2)
        drain_s = time.perf_counter() - t0
        after = await bot_probe(bot_url)
        async with aiohttp.ClientSession() as s, s.get(slack_url + "/_stats") as resp:
            stats = await resp.json()
        members = 0
        incidents = 0
        async for key in r.scan_iter(match=f"{prefix}:incident:inc-*", count=1000):
            if key.count(":") != 2:
                continue
            inc = json.loads(await r.get(key) or "{}")
            incidents += 1
            members += len(inc.get("members", {}))
        left, dead_n = await r.xlen(stream), await r.xlen(dead)
        lost = new - members
        print(
            f"drained in {drain_s:.1f} s: threads created {stats['headers']} (unique incidents 100), "
            f"incident records {incidents}, alerts in threads {members}/{new}, thread lines "
            f"{stats['thread_lines']}, header updates {stats['updates']}"
        )
        print(
            f"bot CPU storm start -> drained: {after['cpu_s'] - cpu0:.2f} s "
            f"({(after['cpu_s'] - during['cpu_s']) * 1000:.0f} ms after the storm, while draining)"
        )
        print(f"lost entries: {lost}  left in stream: {left}  dead-lettered: {dead_n}")
        ok = stats["headers"] == 100 and lost == 0 and left == 0
        print(
            "RESULT:",
            "ok" if ok else "FAILED",
            f"(targets: >= 1,500 deliveries/s {'met' if accepted / elapsed >= 1500 else 'MISSED'}, "
            f"p99 < 50 ms {'met' if pct(lat, 99) < 50 else 'MISSED'})",
        )
        return 0 if ok else 1
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=10)
        keys = [k async for k in r.scan_iter(match=f"{prefix}:*", count=1000)]
        for i in range(0, len(keys), 500):
            await r.delete(*keys[i : i + 500])
        await r.aclose()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--role", choices=["storm", "slack", "bot"], default="storm")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--slack", default="")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--redis", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    ap.add_argument("--deliveries", type=int, default=10_000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--drain-timeout", type=float, default=120.0)
    ap.add_argument("--workers", type=int, default=-1, help="alert workers in the bot (default: the app's own)")
    ap.add_argument(
        "--gc-unfrozen",
        action="store_true",
        help="undo the app's gc.freeze() in the bot (the figures before that fix, for comparison)",
    )
    ap.add_argument("--profile", default="", help="write a cProfile of the bot process to this file")
    args = ap.parse_args()
    if args.role == "slack":
        run_slack(args.port)
        return 0
    if args.role == "bot":
        run_bot(args.port, args.slack, args.redis, args.prefix, args.workers, args.profile, args.gc_unfrozen)
        return 0
    return asyncio.run(storm(args))


if __name__ == "__main__":
    raise SystemExit(main())

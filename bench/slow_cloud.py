"""A scale plan's answer time while Cloud Monitoring is blackholed (accepts gRPC calls, never answers).

The app (bot/web.py, Bolt, real Redis, google-cloud-run against the Cloud Run stand-in, google-cloud-monitoring
against a blackholed gRPC stand-in) gets a flurry of `/gemma status --fresh` (6 Monitoring calls each, all
left hanging), then one `/gemma scale 1 2`; printed: the time from that command to its plan reaching the
response URL, and how many Monitoring calls were still blocked at that moment. Target: under 2 s.

    .venv/bin/python bench/slow_cloud.py [--status 8] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.model_server import ModelServerStandIn
from bot.sandbox.monitoring_grpc import MonitoringStandIn, serve_monitoring
from bot.sandbox.server import serve
from bot.sandbox.slack_api import SlackStandIn
from bot.sandbox.slack_signing import command_body, signed_headers
from bot.settings import load_settings
from bot.web import create_app
from bot.wiring import build_deps

SECRET = "bench-slow-cloud-secret"


async def until(predicate: Callable[[], object], step_s: float = 0.005, limit_s: float = 120) -> None:
    """Poll `predicate` on the event loop (the app's background work runs there too)."""
    for _ in range(int(limit_s / step_s)):
        if predicate():
            return
        await asyncio.sleep(step_s)
    raise SystemExit("timed out waiting: the bench could not observe what it measures")


async def one_run(
    n_status: int, urls: dict[str, str], slack: SlackStandIn, mon: MonitoringStandIn
) -> tuple[float, int]:
    settings = load_settings(
        slack_bot_token="xoxb-bench",
        slack_signing_secret=SECRET,
        slack_api_url=urls["slack"] + "/api/",
        redis_url="redis://127.0.0.1:6379/0",
        key_prefix=f"gemma-sre-bench-{uuid.uuid4().hex[:8]}",
        google_cloud_project="bench",
        google_anonymous_credentials=True,
        cloud_run_api_endpoint=urls["run"],
        cloud_monitoring_api_endpoint=urls["monitoring"],
        vllm_base_url=urls["model"],
        deployer_user_ids="UDEPLOYER",
    )
    deps = build_deps(settings)
    app = create_app(deps)
    mon.blackhole()
    slack.responses.clear()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot") as client:

        async def command(text: str, rid: str, user: str = "U1") -> None:
            body = command_body(text, slack.response_url(rid), trigger_id=uuid.uuid4().hex, user_id=user)
            await client.post("/slack/events", content=body, headers=signed_headers(SECRET, body))

        for i in range(n_status):
            await command("status --fresh", f"s{i}")
        await until(lambda: mon.blocked >= 1)
        t0 = time.perf_counter()
        await command("scale 1 2", "plan", user="UDEPLOYER")
        await until(lambda: [r for r in slack.responses if r.get("_rid") == "plan"])
        dt = time.perf_counter() - t0
        blocked = mon.blocked
        mon.release()
        await deps.drain(timeout_s=60)
    await deps.redis.aclose()
    return dt, blocked


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--status", type=int, default=8, help="/gemma status commands fired first")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    slack, cloud_run, model, mon = SlackStandIn(), CloudRunStandIn(), ModelServerStandIn(), MonitoringStandIn()
    with (
        serve(slack.app) as s_url,
        serve(cloud_run.app) as r_url,
        serve(model.app) as m_url,
        serve_monitoring(mon, workers=128) as mon_addr,
    ):
        slack.base_url = s_url
        cloud_run.seed_service("vllm-gemma4", min_instances=0, max_instances=1)
        urls = {"slack": s_url, "run": r_url, "model": m_url, "monitoring": mon_addr}
        results = [asyncio.run(one_run(args.status, urls, slack, mon)) for _ in range(args.runs)]
    times = [t for t, _ in results]
    print(f"Monitoring blackholed; {args.status} x /gemma status fired first; {args.runs} runs")
    print(f"scale plan answered in: median {statistics.median(times):.3f} s, max {max(times):.3f} s")
    print(f"Monitoring calls still blocked when the plan arrived: {[b for _, b in results]}")
    print(f"target < 2 s: {'met' if max(times) < 2 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

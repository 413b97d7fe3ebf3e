"""`gemma-sre mcp` as a coding agent meets it: time from spawning the server (stdio, the sandbox) to a completed
`initialize`, to `tools/list`, and the latency of each read tool call an agent makes first (fit, status, models,
revisions), with the MCP SDK's own client.

Each of RUNS (default 3) spawns a fresh server with no credentials (the sandbox, as `./dev console` without a
cloud), makes CALLS (default 20) calls of each tool, and prints per run: start-up to initialized, tools/list, and
the median and p95 of each tool's calls; then the median start-up over the runs.
Usage: .venv/bin/python bench/mcp_calls.py [RUNS] [CALLS]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

CALLS: dict[str, dict[str, object]] = {
    "fit": {"model": "26b-qat", "gpu": "nvidia-l4"},
    "status": {"fresh": True},
    "models": {},
    "revisions": {},
}


def _env() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "NO_GCE_CHECK": "true",
        "CLOUDSDK_CONFIG": "/nonexistent-gcloud-config",
        "GRPC_VERBOSITY": "ERROR",
        "LOG_LEVEL": "WARNING",
        "MCP_CALLS_PER_MIN": "10000",
    }


def _p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, round(0.95 * len(xs)) - 1)]


async def one_run(calls: int) -> float:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "bot.cli", "mcp"], env=_env(), cwd=tempfile.gettempdir()
    )
    t0 = time.perf_counter()
    with Path(os.devnull).open("w") as errlog:  # noqa: ASYNC230 - opened once, before the server starts
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            started = time.perf_counter() - t0
            listed = []
            for _ in range(2):  # the first builds every schema; later ones are what a reconnecting agent sees
                t1 = time.perf_counter()
                tools = (await session.list_tools()).tools
                listed.append(time.perf_counter() - t1)
            line = [
                f"start-up to initialized {started:.2f} s",
                f"tools/list ({len(tools)} tools) first {listed[0] * 1000:.1f} ms, then {listed[1] * 1000:.1f} ms",
            ]
            for name, args in CALLS.items():
                times = []
                for _ in range(calls):
                    t = time.perf_counter()
                    result = await session.call_tool(name, args)
                    times.append((time.perf_counter() - t) * 1000)
                    if result.is_error:
                        raise SystemExit(f"{name} failed: {result.content}")
                line.append(f"{name} median {statistics.median(times):.1f} ms p95 {_p95(times):.1f} ms")
            print(" · ".join(line), flush=True)
            return started


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    starts = [asyncio.run(one_run(calls)) for _ in range(runs)]
    print(f"median start-up to initialized over {runs} runs: {statistics.median(starts):.2f} s")


if __name__ == "__main__":
    main()

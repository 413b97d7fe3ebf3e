"""How many concurrent streams the load generator sustains, and its overhead per request.

The vLLM simulator runs in a separate process (so its CPU is not the generator's), streaming `OUT` tokens per
request with a fixed TTFT and per-token delay. For each concurrency the generator runs a closed-loop cell and
we print:
- sustained: the peak number of streams open at the server at once (from the simulator's own counter);
- latency overhead: measured e2e minus the simulator's schedule (TTFT + (OUT-1) x delay), p50/p95 — an upper
  bound on client overhead, as it includes the simulator's own scheduling;
- client CPU per request: the generator process's CPU time over the cell / requests;
- ratios against the concurrency-1 baseline measured in the same run.
Target: 1,000 concurrent streams with overhead p50 under 2 ms.
Run: .venv/bin/python bench/loadgen_capacity.py
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import httpx
import openai

from skills.loadgen import PromptSet, bench_http_client, pct, run_cell

TTFT, DELAY, OUT = 0.2, 0.1, 16
LEVELS = [1, 100, 250, 500, 1000]


def _serve(port: int) -> None:
    import uvicorn

    from tests.standins.vllm_sim import SimConfig, VllmSim

    sim = VllmSim(SimConfig(ttft_s=TTFT, token_delay_s=DELAY, max_model_len=4096))
    uvicorn.run(sim.app, host="127.0.0.1", port=port, log_level="error", access_log=False, backlog=4096,
                timeout_keep_alive=60)  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def main() -> int:
    port = _free_port()
    proc = mp.get_context("spawn").Process(target=_serve, args=(port,), daemon=True)
    proc.start()
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient() as probe:
        for _ in range(100):
            try:
                if (await probe.get(base + "/health")).status_code == 200:
                    break
            except httpx.HTTPError:
                await asyncio.sleep(0.1)
        ideal = TTFT + (OUT - 1) * DELAY
        prompts = PromptSet(tokens=0, body="benchmark prompt of a modest size".split() * 8, head_words=8)
        print(f"stand-in schedule per request: TTFT {TTFT * 1000:.0f} ms + {OUT - 1} x {DELAY * 1000:.0f} ms "
              f"= {ideal * 1000:.0f} ms")  # fmt: skip
        print(f"{'conc':>5} {'reqs':>5} {'ok':>5} {'sustained':>9} {'ovh p50':>8} {'ovh p95':>8} "
              f"{'cpu/req':>8} {'x base p50':>10}")  # fmt: skip
        base_p50 = None
        best = 0
        index = 0
        for conc in LEVELS:
            http = bench_http_client(conc, 120)
            client = openai.AsyncOpenAI(base_url=base + "/v1", api_key="x", http_client=http, max_retries=0)
            n = max(10, 2 * conc)
            before = (await probe.get(base + "/sim/stats")).json()
            cpu0 = time.process_time()
            recs, _ = await run_cell(client, "m", prompts, n, conc, OUT, 120, first_index=index)
            cpu = time.process_time() - cpu0
            index += n
            after = (await probe.get(base + "/sim/stats")).json()
            await http.aclose()
            ok = [r for r in recs if r.ok]
            ovh = [r.e2e - ideal for r in ok]
            p50, p95 = pct(ovh, 50), pct(ovh, 95)
            if conc == 1:
                base_p50 = p50
            sustained = after["max_in_flight"] if after["max_in_flight"] > before["max_in_flight"] else conc
            ratio = f"{p50 / base_p50:.1f}x" if p50 is not None and base_p50 else "—"
            print(f"{conc:>5} {n:>5} {len(ok):>5} {sustained:>9} "
                  f"{(p50 or 0) * 1000:>7.2f}m {(p95 or 0) * 1000:>7.2f}m "
                  f"{cpu / n * 1000:>6.2f}ms {ratio:>10}")  # fmt: skip
            if len(ok) == n and p50 is not None and p50 < 0.002:
                best = max(best, sustained)
        print(
            f"sustained with 100% success and overhead p50 < 2 ms: {best} concurrent streams (target 1,000)"
        )
    proc.terminate()
    proc.join(5)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))

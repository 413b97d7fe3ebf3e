"""How many concurrent streams the load generator sustains against the stand-in, and its overhead per request.

The vLLM simulator runs in its own process(es), so its CPU and GIL are not the generator's. It streams `OUT`
tokens per request on an absolute schedule (TTFT, then one token every DELAY) and records each request's
server-side span (arrival in the handler, last bytes handed to the socket). The generator runs here, on uvloop
as `gemma-sre serve` does (uvicorn's default loop), through skills.bench.loadgen.run_cell over
bot.adapters.stream_client.StreamClient, closed loop; the generator stamps when each request reaches the
socket. time.perf_counter is CLOCK_MONOTONIC on Linux, so the processes' stamps compare directly (the bench
warns if a span falls outside its request).

Per cell:
- peak: the most streams open at the server at once (from the server-side spans);
- cpu/req: this process's CPU time over the cell / requests (only the generator runs in this process);
- ovh: the generator's own latency per request, send side (started -> on the socket) + receive side (server's
  last bytes handed over -> they reach the generator's code); p50/p95, the target's "client overhead";
- e2e-span, sim lag, e2e-sch: e2e beyond the server's span, the stand-in's lateness, e2e beyond the injected
  schedule: these include the simulator being slow to pick requests up or late with tokens on a busy machine;
- sim cpu: the simulator's CPU per request, and the 1-minute load average (other work shares the 2 cores).
The rows ramp the workers' starts over one request's duration so the closed loop holds its streams spread
in time; a 'burst' row starts them all at once (lockstep waves) for comparison. A baseline in the same run:
the previous hot path (the openai SDK's streaming response) at concurrency <= 100.
Target: 1,000 concurrent streams with client overhead p50 under 2 ms (and client CPU under 2 ms a request).
Run: .venv/bin/python bench/loadgen_capacity.py [--levels 1,100,1000] [--repeats 3] [--sim-workers 2]
     [--loop asyncio]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import httpx
import httpx2
import openai

from bot.adapters.stream_client import StreamClient, StreamTarget
from bot.sandbox.vllm_sim import SPAN_KEY_CHARS
from skills.bench.cells import pct
from skills.bench.loadgen import run_cell
from skills.bench.prompts import PromptSet
from skills.ports import RequestRecord

TTFT, DELAY, OUT = 0.2, 0.1, 16
IDEAL = TTFT + (OUT - 1) * DELAY
TARGET_STREAMS, TARGET_OVERHEAD_S = 1000, 0.002


# --- the simulator, in its own processes ----------------------------------------------------------------


def _sim_worker(port: int, ready: Any) -> None:
    """One simulator process: the shared port (SO_REUSEPORT: the kernel spreads connections over the
    workers) and a private control port for this worker's /sim/spans."""
    import uvicorn

    from bot.sandbox.vllm_sim import SimConfig, VllmSim

    shared = socket.socket()
    shared.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    shared.bind(("127.0.0.1", port))
    control = socket.socket()
    control.bind(("127.0.0.1", 0))
    sim = VllmSim(SimConfig(ttft_s=TTFT, token_delay_s=DELAY, max_model_len=4096))
    config = uvicorn.Config(sim.app, log_level="error", access_log=False, backlog=4096, timeout_keep_alive=60)
    server = uvicorn.Server(config)
    ready.put(control.getsockname()[1])
    server.run(sockets=[shared, control])


def _proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _free_port() -> int:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- the baseline: the previous hot path (openai SDK streaming) -------------------------------------------


async def _sdk_request(client: openai.AsyncOpenAI, prompt: str) -> RequestRecord:
    rec = RequestRecord(ok=False, start=time.perf_counter())
    async with client.completions.with_streaming_response.create(
        model="m",
        prompt=prompt,
        max_tokens=OUT,
        temperature=0.0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    ) as resp:
        async for line in resp.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                rec.ok = True
                break
            obj = json.loads(data)
            if rec.ttft is None and any(c.get("text") for c in obj.get("choices") or ()):
                rec.ttft = time.perf_counter() - rec.start
    rec.end = time.perf_counter()
    return rec


async def _closed_loop(
    send: Callable[[int], Awaitable[RequestRecord]], n: int, conc: int, ramp_s: float
) -> list[RequestRecord]:
    out: list[RequestRecord] = []
    left = iter(range(n))

    async def worker(k: int) -> None:
        await asyncio.sleep(ramp_s * k / conc)
        for i in left:
            rec = await send(i)
            rec.index = i
            out.append(rec)

    await asyncio.gather(*(worker(k) for k in range(conc)))
    return out


# --- measurement ----------------------------------------------------------------------------------------


def _peak(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    peak = cur = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    return peak


def _ms(v: float | None) -> str:
    return f"{v * 1000:8.2f}" if v is not None else "       —"


class Bench:
    def __init__(self, base: str, control_urls: list[str], pids: list[int]) -> None:
        self.base = base
        self.control_urls = control_urls
        self.pids = pids
        self.prompts = PromptSet(tokens=0, body="benchmark prompt of a modest size".split() * 8, head_words=8)
        self.index = 0

    def sim_cpu(self) -> float:
        return sum(_proc_cpu(p) for p in self.pids)

    async def spans(self, probe: httpx.AsyncClient) -> dict[str, tuple[float, float, float]]:
        out: dict[str, tuple[float, float, float]] = {}
        for url in self.control_urls:
            for key, arrival, first, end in (await probe.get(url + "/sim/spans")).json()["spans"]:
                out[key] = (arrival, first, end)
        return out

    async def cell(self, probe: httpx.AsyncClient, conc: int, sdk: bool, ramp: bool = True) -> dict[str, Any]:
        n = max(10, 3 * conc)
        ramp_s = IDEAL if ramp else 0.0  # workers' starts spread over one request's duration
        first = self.index
        self.index += n
        if sdk:
            lim = httpx2.Limits(max_connections=conc + 8, max_keepalive_connections=conc + 8)
            http = httpx2.AsyncClient(limits=lim, timeout=120)
            client = openai.AsyncOpenAI(base_url=self.base + "/v1", api_key="x", http_client=http, max_retries=0)
            cpu0, sim0, t0 = time.process_time(), self.sim_cpu(), time.perf_counter()
            recs = await _closed_loop(lambda i: _sdk_request(client, self.prompts.prompt(first + i)), n, conc, ramp_s)
            cpu, sim_cpu, wall = time.process_time() - cpu0, self.sim_cpu() - sim0, time.perf_counter() - t0
            for r in recs:
                r.index += first
            await http.aclose()
        else:
            target = StreamTarget(self.base + "/v1", {"Authorization": "Bearer x"})
            async with StreamClient(target, conc, 120) as sc:
                cpu0, sim0, t0 = time.process_time(), self.sim_cpu(), time.perf_counter()
                recs, _ = await run_cell(sc, "m", self.prompts, n, conc, OUT, 120, first_index=first, ramp_s=ramp_s)
                cpu, sim_cpu, wall = time.process_time() - cpu0, self.sim_cpu() - sim0, time.perf_counter() - t0
        spans = await self.spans(probe)
        ok = [r for r in recs if r.ok]
        matched = [(r, spans[k]) for r in ok if (k := self.prompts.prompt(r.index)[:SPAN_KEY_CHARS]) in spans]
        beyond_span = [r.e2e - (s[2] - s[0]) for r, s in matched]
        send = [r.sent - r.start for r, _ in matched if r.sent]
        recv = [r.end - s[2] for r, s in matched]
        own = [r.sent - r.start + r.end - s[2] for r, s in matched if r.sent]
        clock_bad = sum(1 for r, s in matched if s[0] < r.start or s[2] > r.end)  # impossible on one clock
        return {
            "conc": conc,
            "n": n,
            "ok": len(ok),
            "wall": wall,
            "sustained": _peak([(s[0], s[2]) for _, s in matched]),
            "cpu": cpu / n,
            "sim_cpu": sim_cpu / n,
            "ovh50": pct(own, 50),
            "ovh95": pct(own, 95),
            "send50": pct(send, 50),
            "recv50": pct(recv, 50),
            "span50": pct(beyond_span, 50),
            "lag50": pct([(s[2] - s[0]) - IDEAL for _, s in matched], 50),
            "sched50": pct([r.e2e - IDEAL for r in ok], 50),
            "sched95": pct([r.e2e - IDEAL for r in ok], 95),
            "matched": len(matched),
            "clock_bad": clock_bad,
            "load": os.getloadavg()[0],
        }


HEADER = (
    f"{'client':>7} {'conc':>5} {'reqs':>5} {'ok':>5} {'peak':>5} {'cpu/req':>8} {'ovh p50':>8} {'ovh p95':>8} "
    f"{'send p50':>8} {'recv p50':>8} {'e2e-span':>8} {'sim lag':>8} {'e2e-sch':>8} {'e2e-sch95':>9} "
    f"{'sim cpu':>8} {'load':>5}"
)


def _row(kind: str, c: dict[str, Any]) -> str:
    return (
        f"{kind:>7} {c['conc']:>5} {c['n']:>5} {c['ok']:>5} {c['sustained']:>5} {_ms(c['cpu'])} "
        f"{_ms(c['ovh50'])} {_ms(c['ovh95'])} {_ms(c['send50'])} {_ms(c['recv50'])} {_ms(c['span50'])} "
        f"{_ms(c['lag50'])} {_ms(c['sched50'])} "
        f" {_ms(c['sched95'])} {_ms(c['sim_cpu'])} {c['load']:5.2f}"
    )


async def main(args: argparse.Namespace) -> int:
    levels = [int(x) for x in args.levels.split(",")]
    port = _free_port()
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    procs = [ctx.Process(target=_sim_worker, args=(port, ready), daemon=True) for _ in range(args.sim_workers)]
    for p in procs:
        p.start()
    try:
        controls = [f"http://127.0.0.1:{ready.get(timeout=30)}" for _ in procs]
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(timeout=60) as probe:
            for url in controls:
                for _ in range(100):
                    try:
                        if (await probe.get(url + "/health")).status_code == 200:
                            break
                    except httpx.HTTPError:
                        await asyncio.sleep(0.1)
            bench = Bench(base, controls, [p.pid for p in procs if p.pid])
            print(
                f"stand-in: {args.sim_workers} process(es); schedule per request: TTFT {TTFT * 1000:.0f} ms + "
                f"{OUT - 1} x {DELAY * 1000:.0f} ms = {IDEAL * 1000:.0f} ms; generator loop: {args.loop}; "
                f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
            )
            print(
                "times in ms per request. ovh = the generator's own latency: send (request started -> its bytes "
                "handed to the socket)\n+ recv (server hands over its last bytes -> they reach the generator). "
                "e2e-span = e2e minus the server-side span\n(ovh plus the stand-in's delay in picking the request "
                "up). sim lag = server span - schedule; e2e-sch = e2e - schedule."
            )
            print(HEADER)
            await bench.cell(probe, 8, sdk=False)  # warm-up (imports, first connections), not reported
            results: dict[int, list[dict[str, Any]]] = {}
            top_level = max(levels)
            for conc in levels:
                if conc <= args.baseline_max:
                    base_cell = await bench.cell(probe, conc, sdk=True)
                    print(_row("sdk", base_cell), flush=True)
                for _ in range(args.repeats if conc == top_level else 1):
                    c = await bench.cell(probe, conc, sdk=False)
                    results.setdefault(conc, []).append(c)
                    print(_row("loadgen", c), flush=True)
                    if c["clock_bad"]:
                        print(f"  warning: {c['clock_bad']} server spans fall outside the client's interval")
                if conc <= args.baseline_max and c["cpu"]:
                    print(
                        f"{'':>7} loadgen vs sdk: client CPU/request {base_cell['cpu'] / c['cpu']:.1f}x lower, "
                        f"e2e beyond the server's span p50 {_ms(base_cell['span50']).strip()} -> "
                        f"{_ms(c['span50']).strip()} ms"
                    )
            burst = await bench.cell(probe, top_level, sdk=False, ramp=False)
            print(_row("burst", burst))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.join(5)

    runs = sorted(results[top_level], key=lambda r: r["ovh50"] if r["ovh50"] is not None else float("inf"))
    top = runs[len(runs) // 2]  # the median run: one run disturbed by other work neither makes nor breaks it
    print(
        "\nRows ramp the workers' starts over one request's duration, so the closed loop holds its streams with "
        "requests\nspread in time. 'burst' starts all of them at once: with identical schedules they then move in "
        f"lockstep waves,\nso each wave puts {top_level} request starts, then {top_level} tokens at a time, on "
        "every process. There the generator's own\noverhead is p50 "
        f"{_ms(burst['ovh50']).strip()} ms (CPU {_ms(burst['cpu']).strip()} ms a request) while e2e beyond the "
        f"server's span is p50 {_ms(burst['span50']).strip()} ms:\nmost of that wait is the stand-in clearing its "
        "wave of new requests. Real servers also batch tokens in steps, but requests rarely start in lockstep."
    )
    print(
        f"Judged on the median of {len(runs)} runs at {top_level} (other processes share the 2 cores; the load "
        "column is the 1-minute load average after each run):"
    )
    checks = [
        (f"{top['conc']} streams, all succeeded", top["ok"] == top["n"]),
        (f"peak streams open at the server >= {TARGET_STREAMS}", top["sustained"] >= TARGET_STREAMS),
        (
            f"client overhead p50 < 2 ms ({_ms(top['ovh50']).strip()} ms)",
            top["ovh50"] is not None and top["ovh50"] < TARGET_OVERHEAD_S,
        ),
        (f"client CPU per request < 2 ms ({_ms(top['cpu']).strip()} ms)", top["cpu"] < TARGET_OVERHEAD_S),
    ]
    for label, ok in checks:
        print(f"  [{'x' if ok else ' '}] {label}")
    met = all(ok for _, ok in checks)
    print(f"target (1,000 concurrent streams, client overhead p50 under 2 ms): {'MET' if met else 'NOT MET'}")
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default="1,100,1000")
    ap.add_argument("--sim-workers", type=int, default=2)
    ap.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    ap.add_argument("--repeats", type=int, default=3, help="runs at the top level (the median is judged)")
    ap.add_argument("--baseline-max", type=int, default=100, help="run the SDK baseline up to this concurrency")
    a = ap.parse_args()
    if a.loop == "uvloop":
        import uvloop

        raise SystemExit(uvloop.run(main(a)))
    raise SystemExit(asyncio.run(main(a)))

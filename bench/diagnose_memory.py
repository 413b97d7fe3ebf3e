"""Peak memory and time of `gemma-sre diagnose` on large log exports (1M and 10M lines by default).

    python bench/diagnose_memory.py [LINES ...] [--json]

Each run feeds a synthetic export to `gemma-sre diagnose --logs -` (a real process, on stdin, so nothing is
written to disk) and prints the child's peak RSS (getrusage ru_maxrss, Linux: KiB) and wall time. The lines
mix what a vLLM service on Cloud Run logs for hours -- engine metrics every few seconds, access lines, a
recurring warning, a Python traceback now and then -- with the failure at the end (a CUDA OOM), so the run
must still find it. `--json` writes Cloud Logging entries as JSON lines instead of plain text.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/site-packages/vllm/entrypoints/openai/api_server.py", line 412, in create',
    "    generator = await handler.create_chat_completion(request, raw_request)",
    '  File "/usr/local/lib/python3.12/site-packages/vllm/entrypoints/openai/serving_chat.py", line 201, in x',
    "    raise ValueError(msg)",
    "ValueError: This model's maximum context length is 16384 tokens. However, you requested 17021 tokens.",
]
OOM = (
    "ERROR 04-28 09:12:01 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
    "GPU 0 has a total capacity of 22.05 GiB of which 1.12 GiB is free."
)


def lines(n: int) -> Iterator[str]:
    tb = 0
    for i in range(n):
        s, m, h = i % 60, i // 60 % 60, i // 3600 % 24
        k = i % 100
        if k < 60:
            yield (
                f"(APIServer pid=1) INFO 04-28 {h:02d}:{m:02d}:{s:02d} [loggers.py:123] Engine 000: Avg prompt "
                f"throughput: {i % 977}.{k} tokens/s, Avg generation throughput: {i % 311}.0 tokens/s, "
                f"Running: {i % 7} reqs, Waiting: 0 reqs, GPU KV cache usage: {k}.1%, Prefix cache hit rate: 0.0%"
            )
        elif k < 95:
            peer = f"169.254.1.{k}:{40000 + i % 20000}"
            yield f'(APIServer pid=1) INFO:     {peer} - "POST /v1/chat/completions HTTP/1.1" 200 OK'
        elif k < 99:
            yield (
                f"(APIServer pid=1) WARNING 04-28 {h:02d}:{m:02d}:{s:02d} [protocol.py:58] The following fields "
                "were present in the request but ignored: {'store'}"
            )
        else:
            yield TRACEBACK[tb % len(TRACEBACK)]
            tb += 1
    yield OOM


def run(n: int, as_json: bool) -> tuple[float, float, int]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "bot.cli", "diagnose", "--logs", "-", "--format", "json"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=REPO)
    assert proc.stdin is not None and proc.stdout is not None
    t0 = time.perf_counter()
    batch: list[str] = []
    for line in lines(n):
        batch.append(json.dumps({"textPayload": line, "severity": "DEFAULT"}) if as_json else line)
        if len(batch) >= 10_000:
            proc.stdin.write(("\n".join(batch) + "\n").encode())
            batch = []
    proc.stdin.write(("\n".join(batch) + "\n").encode())
    proc.stdin.close()
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"diagnose exited {proc.returncode}")
    found = len(json.loads(out)["findings"])
    return usage.ru_maxrss / 1024, wall, found


def main(argv: list[str]) -> None:
    as_json = "--json" in argv
    sizes = [int(a) for a in argv if not a.startswith("--")] or [1_000_000, 10_000_000]
    print(f"gemma-sre diagnose on synthetic {'JSON-lines' if as_json else 'plain-text'} exports (stdin)")
    print(f"{'lines':>12} {'peak RSS MiB':>13} {'wall s':>8} {'s per 1M lines':>15} {'findings':>9}")
    for n in sizes:
        rss, wall, found = run(n, as_json)
        print(f"{n:>12,} {rss:>13.0f} {wall:>8.1f} {wall / (n / 1e6):>15.1f} {found:>9}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

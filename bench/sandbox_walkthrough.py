"""How long the sandbox walkthrough takes a new user at a given clock speed (default: the shipped 30x).

Runs `gemma-sre console` with no credentials (so: the sandbox) as a subprocess, feeds it the README's
walkthrough one command at a time as soon as the previous one has printed its last line, and prints the
wall time of each step and of the whole, plus the console's start-up (until the banner and the prompt).

    .venv/bin/python bench/sandbox_walkthrough.py [--speed 30]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

STEPS = [
    ("/gemma status", "fresh data"),
    ("/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384", "[2] Cancel"),
    ("click Confirm", "is ready and serving"),
    ("/gemma sandbox kv-cache-too-small", "deterministic findings for the alert window"),
    ("click Plan redeploy: max_model_len", "Cancel"),
    ("click Confirm", "is ready and serving"),
    ("/gemma logs --severity ERROR", "templates, ~"),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speed", type=float, default=30.0)
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "SLACK_", "REDIS_", "VLLM_"))}
    env |= {
        "CLOUDSDK_CONFIG": "/nonexistent",
        "NO_GCE_CHECK": "true",
        "PYTHONUNBUFFERED": "1",
        "SANDBOX_SPEED": str(args.speed),
        "PYTHONPATH": str(ROOT),
    }
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "console"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def until(marker: str) -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            if marker in line:
                return
        raise SystemExit(f"the console ended before printing {marker!r}")

    until("`quit` to leave")
    print(f"{'start-up (banner, simulators, seeded service)':58s} {time.perf_counter() - t0:6.1f} s")
    total = time.perf_counter()
    for command, marker in STEPS:
        t = time.perf_counter()
        proc.stdin.write(command + "\n")
        proc.stdin.flush()
        until(marker)
        print(f"{command:58s} {time.perf_counter() - t:6.1f} s")
    print(f"{'walkthrough (all steps) at ' + f'{args.speed:g}x':58s} {time.perf_counter() - total:6.1f} s")
    proc.stdin.write("quit\n")
    proc.stdin.flush()
    proc.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())

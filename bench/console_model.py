"""The model-based test of whole console runs at scale: Hypothesis drives the console against the sandbox for
N examples of up to M steps (tests/console_model.py: rules and invariants) and prints what it found.

    .venv/bin/python bench/console_model.py [--examples 300] [--steps 30] [--seed 0]

Violations are collected, not raised, so one run counts them all (each distinct message once, with how often).
"""

from __future__ import annotations

import argparse
import collections
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.console_model import INCIDENT_FINDINGS, ConsoleModel, Shared


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=300)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--speed", type=float, default=3000.0, help="sandbox clock speed")
    args = ap.parse_args()

    log_path = Path(tempfile.gettempdir()) / "console-model.log"
    logging.basicConfig(filename=log_path, level=logging.WARNING)  # the bot's own warnings: not the figures
    shared = Shared(speed=args.speed).start()
    found: list[str] = []
    ConsoleModel.shared, ConsoleModel.collect, ConsoleModel.steps_run = shared, found, 0
    examples = 0
    original = ConsoleModel.__init__

    first: list[int] = []  # the example in which the first violation showed

    def counting(self: ConsoleModel) -> None:
        nonlocal examples
        if found and not first:
            first.append(examples)
        if examples and examples % 10 == 0:  # a long run shows where it is (and what it found so far)
            print(
                f"... {examples} examples, {ConsoleModel.steps_run} steps, {time.monotonic() - t0:.0f} s, "
                f"{len(found)} violations" + (f" (first in example {first[0]})" if first else ""),
                flush=True,
            )
        examples += 1
        original(self)

    t0 = time.monotonic()
    ConsoleModel.__init__ = counting  # type: ignore[method-assign]
    try:
        from hypothesis import seed

        seeded = seed(args.seed)(run_state_machine_as_test)
        seeded(
            ConsoleModel,
            settings=settings(
                max_examples=args.examples,
                stateful_step_count=args.steps,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        shared.close()
    took = time.monotonic() - t0
    counts = collections.Counter(_kind(f) for f in found)
    print(
        f"console model: {examples} examples, {ConsoleModel.steps_run} steps (up to {args.steps} per example), "
        f"seed {args.seed}, {took:.0f} s; incident-findings invariant {'on' if INCIDENT_FINDINGS else 'off'}"
    )
    print("lines typed: " + ", ".join(f"{k} {n}" for k, n in ConsoleModel.rules_run.most_common()))
    if not found:
        print("violations: 0")
        return 0
    print(f"violations: {len(found)} in {len(counts)} kinds; first seen in example {first[0] if first else examples}")
    for kind, n in counts.most_common():
        example = next(f for f in found if _kind(f) == kind)
        print(f"  {n:5d}  {kind}: e.g. {example[:900]}")
    return 1


def _kind(message: str) -> str:
    """A violation's kind: its message with names and numbers taken out."""
    import re

    return re.sub(r"`[^`]*`|[0-9a-f]{12}|\d+(\.\d+)?|\{[^}]*\}|\([^)]*\)", "…", message.splitlines()[0])[:90]


if __name__ == "__main__":
    raise SystemExit(main())

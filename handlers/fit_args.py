"""One parser for `gemma-sre fit ...` and `/gemma fit ...`: same flags, same errors, on both surfaces.

Bad input raises InvalidInput (the router renders it; the CLI prints it and exits 2) instead of argparse's
sys.exit, which would kill the bot process.
"""

from __future__ import annotations

import argparse
import re
from typing import NoReturn

from pydantic import ValidationError

from skills.errors import InvalidInput
from skills.fit import FitRequest

USAGE = (
    "fit MODEL [--gpu GPU] [--gpu-count N] [--max-model-len N] [--gpu-memory-utilization F] "
    "[--kv-cache-dtype auto|fp8|bf16|fp16] [--cpu-offload-gb N] [--enforce-eager] [--memory 32Gi] "
    "[--max-num-seqs N] [--max-num-batched-tokens N] [--dtype auto|bfloat16|half]"
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise InvalidInput(f"Bad arguments: {message}.", f"Usage: `{USAGE}`")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise InvalidInput(message or "Bad arguments.", f"Usage: `{USAGE}`")


def _memory(text: str) -> float:
    """'32Gi', '32G', '32', '32768Mi' -> GiB."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(gi|g|gib|gb|mi|mib|m)?\s*", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"expected a size like 32Gi, got {text!r}")
    value, unit = float(m.group(1)), m.group(2) or "gi"
    return value / 1024 if unit.startswith("m") else value


def add_fit_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="catalog model name, alias or Hub id (e.g. gemma-4-26b-a4b-qat, 26b-qat)")
    p.add_argument("--gpu", default="nvidia-l4", help="GPU (nvidia-l4, nvidia-rtx-pro-6000, a100-80gb, ...)")
    p.add_argument("--gpu-count", type=int, default=1)
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--gpu-memory-utilization", "--util", type=float, default=0.90)
    p.add_argument("--kv-cache-dtype", choices=["auto", "fp8", "bf16", "fp16"], default="auto")
    p.add_argument("--cpu-offload-gb", type=float, default=0.0)
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument("--memory", dest="host_memory_gib", type=_memory, default=None, help="Cloud Run memory")
    p.add_argument("--max-num-seqs", type=int, default=None)
    p.add_argument("--max-num-batched-tokens", type=int, default=None, help="sizes sliding-window KV reservations")
    p.add_argument("--dtype", choices=["auto", "bfloat16", "half"], default="auto")


def namespace_to_request(ns: argparse.Namespace) -> FitRequest:
    fields = {k: getattr(ns, k) for k in FitRequest.model_fields if hasattr(ns, k)}
    try:
        return FitRequest(**fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"--{'.'.join(str(p) for p in e['loc']).replace('_', '-')}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidInput(f"Bad arguments: {problems}.", f"Usage: `{USAGE}`") from None


def parse_fit_args(argv: list[str]) -> FitRequest:
    """Chat-side parse (no --format)."""
    p = _Parser(prog="/gemma fit", add_help=False)
    add_fit_arguments(p)
    if not argv:
        raise InvalidInput("Which model?", f"Usage: `{USAGE}` — `/gemma models` lists the catalog.")
    return namespace_to_request(p.parse_args(argv))

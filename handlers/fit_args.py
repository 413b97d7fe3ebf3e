"""One parser for `gemma-sre fit ...` and `/gemma fit ...`: same flags, same errors, on both surfaces.

The chat side is a handlers.args.CommandParser (bad input raises InvalidInput with the usage; the router
renders it, the CLI prints it and exits 2).
"""

from __future__ import annotations

import argparse
import json
import re

from pydantic import ValidationError

from handlers.args import CommandParser
from handlers.tpu_fit_render import add_tpu_arguments
from skills.capacity.fit import FitRequest
from skills.deploy.profiles import load_profiles
from skills.errors import InvalidInput, explain_validation

MODELS_HINT = "`/gemma models` lists the catalog."


def _memory(text: str) -> float:
    """'32Gi', '32G', '32', '32768Mi' -> GiB."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(gi|g|gib|gb|mi|mib|m)?\s*", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"expected a size like 32Gi, got {text!r}")
    value, unit = float(m.group(1)), m.group(2) or "gi"
    return value / 1024 if unit.startswith("m") else value


def _mm_limits(text: str) -> dict[str, int]:
    """vLLM's --limit-mm-per-prompt JSON: '{"image":0,"video":0}' -> {"image": 0, "video": 0}."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0 for k, v in value.items()
    ):
        raise argparse.ArgumentTypeError(f'expected JSON like {{"image":0,"video":0}}, got {text!r}')
    return value


def add_fit_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "model",
        metavar="MODEL",
        help="catalog model name, alias or Hub id (e.g. gemma-4-26b-a4b-qat, 26b-qat), or a deploy profile "
        "(gemma4-12b-qat-l4: its model, GPU and settings; flags given here override them)",
    )
    # Defaults are None so that a profile's settings apply unless a flag is given (FitRequest has the defaults).
    p.add_argument("--gpu", default=None, help="GPU (default nvidia-l4; nvidia-rtx-pro-6000, a100-80gb, ...)")
    p.add_argument("--gpu-count", metavar="N", type=int, default=None)
    p.add_argument("--max-model-len", metavar="N", type=int, default=None)
    p.add_argument("--gpu-memory-utilization", "--util", metavar="F", type=float, default=None, help="default 0.90")
    p.add_argument(
        "--kv-cache-dtype", metavar="auto|fp8|bf16|fp16", choices=["auto", "fp8", "bf16", "fp16"], default=None
    )
    p.add_argument("--cpu-offload-gb", metavar="N", type=float, default=None)
    p.add_argument("--enforce-eager", action="store_true", default=None)
    p.add_argument(
        "--memory", dest="host_memory_gib", metavar="SIZE", type=_memory, default=None, help="Cloud Run memory (32Gi)"
    )
    p.add_argument("--max-num-seqs", metavar="N", type=int, default=None)
    p.add_argument(
        "--max-num-batched-tokens", metavar="N", type=int, default=None, help="sizes sliding-window KV reservations"
    )
    p.add_argument("--dtype", metavar="auto|bfloat16|half", choices=["auto", "bfloat16", "half"], default=None)
    p.add_argument(
        "--limit-mm-per-prompt",
        metavar="JSON",
        type=_mm_limits,
        default=None,
        help='vLLM\'s flag: {"image":0,"video":0} skips the vision tower\'s weights',
    )
    p.add_argument(
        "--region", default=None, help="Cloud Run region: prices and GPU availability (us-east4, ...); TPU price region"
    )
    p.add_argument("--vllm-image", metavar="IMAGE", default=None, help="the image to deploy: its release's KV rules")
    add_tpu_arguments(p)


def chat_parser() -> CommandParser:
    """The parser `/gemma fit` declares (the CLI adds --format to the same arguments)."""
    p = CommandParser("fit", hint=MODELS_HINT)
    add_fit_arguments(p)
    return p


def namespace_to_request(ns: argparse.Namespace, hint: str = "") -> FitRequest:
    """Checked request; `hint` goes with an error (default: the surface-neutral `fit MODEL [...]` usage)."""
    fields = {k: getattr(ns, k) for k in FitRequest.model_fields if getattr(ns, k, None) is not None}
    profile = load_profiles().get(str(fields.get("model", "")))
    if profile is not None:  # a deploy profile: its model, GPU and settings, under the flags given
        base = profile.model_dump(include=set(FitRequest.model_fields), exclude_none=True)
        if profile.image:  # the profile's pinned image decides the release's KV rules, as its deploy would
            base["vllm_image"] = profile.image
        fields = {**base, **fields, "model": profile.model}
    try:
        return FitRequest(**fields)
    except ValidationError as exc:
        problems = explain_validation(exc)
        raise InvalidInput(f"Bad arguments: {problems}", hint or f"Usage: `{chat_parser().usage_line()}`") from None


def parse_fit_args(argv: list[str]) -> FitRequest:
    """Chat-side parse (no --format)."""
    p = chat_parser()
    return namespace_to_request(p.parse(argv), p.usage_hint())

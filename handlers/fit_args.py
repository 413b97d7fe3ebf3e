"""One parser for `gemma-sre fit ...` and `/gemma fit ...`: same flags, same errors, on both surfaces.

The chat side is a handlers.args.CommandParser (bad input raises InvalidInput with the usage; the router
renders it, the CLI prints it and exits 2).
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from handlers.args import CommandParser
from handlers.declared_args import Arg, arguments
from skills.actions.params import SETTING_HELP, RedeployFixes
from skills.capacity.fit import FitRequest
from skills.capacity.tpu_catalog import PROVISIONING
from skills.errors import InvalidInput, explain_validation
from skills.serving.profiles import load_profiles
from skills.serving.sizes import gib

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


_KV = ("auto", "fp8", "bf16", "fp16")
_DTYPES = ("auto", "bfloat16", "half")
_PROVISIONING = PROVISIONING


def _same(name: str) -> Any:
    """A setting fit shares with a deploy: the deploy's description (skills/actions/params.py), one wording."""
    return Field(None, description=SETTING_HELP[name])


class FitArgs(BaseModel):
    """`fit`'s arguments, declared once: `/gemma fit`, `gemma-sre fit` and the MCP fit tool derive from this.
    Every setting defaults to None so that a deploy profile's settings apply unless given (FitRequest, which
    checks the values, has the defaults)."""

    model_config = ConfigDict(extra="forbid")

    model: Annotated[str, Arg(metavar="MODEL")] = Field(
        description="catalog model name, alias or Hub id (e.g. gemma-4-26b-a4b-qat, 26b-qat), or a deploy profile "
        "(gemma4-12b-qat-l4: its model, GPU and settings; flags given here override them)"
    )
    gpu: Annotated[str | None, Arg(flags=("--gpu",))] = Field(
        None, description="GPU (default nvidia-l4; nvidia-rtx-pro-6000, a100-80gb, ...)"
    )
    gpu_count: Annotated[int | None, Arg(flags=("--gpu-count",), metavar="N", parse=int)] = _same("gpu_count")
    max_model_len: Annotated[int | None, Arg(flags=("--max-model-len",), metavar="N", parse=int)] = _same(
        "max_model_len"
    )
    gpu_memory_utilization: Annotated[
        float | None, Arg(flags=("--gpu-memory-utilization", "--util"), metavar="F", parse=float)
    ] = Field(None, description="default 0.90")
    kv_cache_dtype: Annotated[
        Literal["auto", "fp8", "bf16", "fp16"] | None,
        Arg(flags=("--kv-cache-dtype",), metavar="auto|fp8|bf16|fp16", choices=_KV),
    ] = _same("kv_cache_dtype")
    cpu_offload_gb: Annotated[float | None, Arg(flags=("--cpu-offload-gb",), metavar="N", parse=float)] = _same(
        "cpu_offload_gb"
    )
    enforce_eager: Annotated[bool | None, Arg(flags=("--enforce-eager",), switch=True)] = _same("enforce_eager")
    host_memory_gib: Annotated[float | None, Arg(flags=("--memory",), metavar="SIZE", parse=_memory)] = Field(
        None, description="Cloud Run memory (32Gi)"
    )
    max_num_seqs: Annotated[int | None, Arg(flags=("--max-num-seqs",), metavar="N", parse=int)] = _same("max_num_seqs")
    max_num_batched_tokens: Annotated[int | None, Arg(flags=("--max-num-batched-tokens",), metavar="N", parse=int)] = (
        Field(None, description="sizes sliding-window KV reservations")
    )
    dtype: Annotated[
        Literal["auto", "bfloat16", "half"] | None,
        Arg(flags=("--dtype",), metavar="auto|bfloat16|half", choices=_DTYPES),
    ] = Field(None, description=RedeployFixes.model_fields["dtype"].description)
    limit_mm_per_prompt: Annotated[
        dict[str, int] | None, Arg(flags=("--limit-mm-per-prompt",), metavar="JSON", parse=_mm_limits)
    ] = Field(None, description='vLLM\'s flag: {"image":0,"video":0} skips the vision tower\'s weights')
    region: Annotated[str | None, Arg(flags=("--region",))] = Field(
        None, description="Cloud Run region: prices and GPU availability (us-east4, ...); with --tpu, the price region"
    )
    vllm_image: Annotated[str | None, Arg(flags=("--vllm-image",), metavar="IMAGE")] = Field(
        None, description="the image to deploy: its release's KV rules"
    )
    # Cloud TPU (handlers/tpu_fit_render.py): a v6e slice instead of a GPU; GPU-only settings are refused with it.
    tpu: Annotated[str | None, Arg(flags=("--tpu",), metavar="TYPE")] = Field(
        None, description="plan a Cloud TPU slice instead of a GPU: v6e-1, v6e-4 or v6e-8 (vLLM's TPU backend)"
    )
    provisioning: Annotated[
        Literal["on-demand", "spot", "flex-start", "reserved"] | None,
        Arg(flags=("--provisioning",), choices=_PROVISIONING),
    ] = Field(None, description="with --tpu: on-demand (default), spot, flex-start or reserved (price and quota)")


add_fit_arguments = arguments(FitArgs)


def chat_parser() -> CommandParser:
    """The parser `/gemma fit` declares (the CLI adds --format to the same arguments)."""
    p = CommandParser("fit", hint=MODELS_HINT)
    add_fit_arguments(p)
    return p


def namespace_to_request(
    ns: argparse.Namespace, hint: str = "", *, flag_style: bool = True, weights_from_hub: bool = False
) -> FitRequest:
    """Checked request; `hint` goes with an error (default: the surface-neutral `fit MODEL [...]` usage).
    `flag_style`: errors name `--gpu-count` (typed surfaces) or `gpu_count` (MCP's fields). `weights_from_hub`:
    no MODEL_BUCKET is set, so a deploy pulls the weights from the Hub (they take memory while loading)."""
    fields = {k: getattr(ns, k) for k in FitRequest.model_fields if getattr(ns, k, None) is not None}
    fields["weights_from_hub"] = weights_from_hub
    profile = load_profiles().get(str(fields.get("model", "")))
    if profile is not None:  # a deploy profile: its model, GPU and settings, under the flags given
        base = profile.model_dump(include=set(FitRequest.model_fields), exclude_none=True)
        if profile.image:  # the profile's pinned image decides the release's KV rules, as its deploy would
            base["vllm_image"] = profile.image
        if profile.memory:  # the instance the profile deploys: what fit sizes and prices
            base["host_memory_gib"] = gib(profile.memory)
        fields = {**base, **fields, "model": profile.model}
    try:
        return FitRequest(**fields)
    except ValidationError as exc:
        problems = explain_validation(exc, flag_style=flag_style)
        raise InvalidInput(f"Bad arguments: {problems}", hint or f"Usage: `{chat_parser().usage_line()}`") from None


def parse_fit_args(argv: list[str]) -> FitRequest:
    """Chat-side parse (no --format)."""
    p = chat_parser()
    return namespace_to_request(p.parse(argv), p.usage_hint())

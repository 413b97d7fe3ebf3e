"""The vLLM flags a resolved deployment runs with, whatever the target: the serving configuration's settings, the
catalog's checkpoint flags, and tool calling as vLLM's Gemma 4 recipe configures it."""

from __future__ import annotations

from skills.capacity.image_compat import load_image_data
from skills.serving.config import ServingConfig
from skills.serving.vllm_flags import VllmFlags, kv_flag


def serving_flags(cfg: ServingConfig, port: int) -> VllmFlags:
    """The vLLM flags a resolved deployment runs with (listening on `port`), the catalog's checkpoint flags
    merged in."""
    flags = VllmFlags(
        model=cfg.model_path,
        host="0.0.0.0",
        port=port,
        max_model_len=cfg.max_model_len,
        gpu_memory_utilization=cfg.gpu_memory_utilization,
        kv_cache_dtype=kv_flag(cfg.kv_cache_dtype),
        max_num_seqs=cfg.max_num_seqs,
        enable_chunked_prefill=True,
        max_num_batched_tokens=cfg.max_num_batched_tokens,
        dtype="half" if cfg.dtype == "half" else "auto",
        tensor_parallel_size=cfg.gpu_count,
        enforce_eager=cfg.enforce_eager,
        cpu_offload_gb=cfg.cpu_offload_gb,
    )
    return with_tool_calling(flags, True).merged(VllmFlags.parse(cfg.model_args))


def with_tool_calling(flags: VllmFlags, on: bool) -> VllmFlags:
    """Tool calling and reasoning as vLLM's Gemma 4 recipe configures them (skills/data/vllm_images.yaml):
    the gemma4 parsers and the recipe's chat template, which the official image ships under /vllm-workspace.
    Off removes all of them."""
    serving = load_image_data().serving
    return flags.with_(
        enable_auto_tool_choice=True if on else None,
        tool_call_parser=serving.tool_call_parser if on else None,
        reasoning_parser=serving.reasoning_parser if on else None,
        chat_template=serving.chat_template if on else None,
    )

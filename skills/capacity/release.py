"""Which vLLM release the planner accounts for: the image being deployed, else the GPU's pinned default.

The KV-cache rules differ by release (skills/data/vllm_images.yaml `accounting`): from v0.26.0 a sliding-window
layer reserves window - 1 + max_concurrent_batches x --max-num-batched-tokens per request, twice as many in-flight
tokens as before with async scheduling on (its default). Every fit report says which release it assumed.
"""

from __future__ import annotations

from pydantic import BaseModel

from skills.capacity.image_compat import Accounting, default_image, load_image_data, parse_image, version, vstr

# Comparison GPUs (not on Cloud Run) have no pinned image: the L4's pin stands in for "the release we deploy".
_REFERENCE_GPU = "nvidia-l4"


class AssumedRelease(BaseModel):
    image: str
    release: str  # "0.24.0"
    origin: str  # why this image: "requested" or "the default for nvidia-l4"
    accounting: Accounting

    def describe(self) -> str:
        rule = (
            "window - 1 + --max-num-batched-tokens"
            if self.accounting.sliding_window_in_flight == "batched_tokens"
            else f"window - 1 + {self.accounting.concurrent_batches()} x --max-num-batched-tokens (async scheduling)"
        )
        if not self.accounting.hybrid_kv_manager:
            return (
                f"KV accounting as vLLM {self.release} ({self.image}, {self.origin}): hybrid KV cache manager off "
                "for Gemma 4, every layer sized at full length (vllm#43308: ~55k tokens on v0.20.0, ~525k on "
                "v0.21.0 in the same memory)."
            )
        return (
            f"KV accounting as vLLM {self.release} ({self.image}, {self.origin}): each sliding-window layer "
            f"reserves {rule} tokens per request."
        )


def assumed_release(gpu: str, image: str | None) -> AssumedRelease:
    """The release of `image`, or of the GPU's default image when none is given or its tag names no release."""
    data = load_image_data()
    origin = "requested"
    ref = parse_image(image, data) if image else None
    oldest = version(data.accounting[0].from_)
    if ref is None or ref.vllm is None or ref.vllm < oldest:
        target = gpu if gpu in data.cloud_run_gpus else _REFERENCE_GPU
        if ref is None:
            origin = f"the default for {target}"
        elif ref.vllm is None:
            origin = f"the tag of {image} names no release; the default for {target}"
        else:  # the image check refuses it anyway: it cannot serve Gemma 4
            origin = f"{image} predates Gemma 4 support; the default for {target}"
        ref = parse_image(default_image(target, data), data)
    assert ref.vllm is not None
    return AssumedRelease(
        image=ref.image, release=vstr(ref.vllm), origin=origin, accounting=data.accounting_for(ref.vllm)
    )

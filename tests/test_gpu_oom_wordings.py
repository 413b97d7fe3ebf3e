# ruff: noqa: E501  (log lines are quoted as they appear)
"""GPU out-of-memory errors whose message is not "CUDA out of memory": only the exception's class name,
`OutOfMemoryError`, says what happened, and each is diagnosed gpu_oom_at_load (issue 44: every fixture that held
`OutOfMemoryError` also held "CUDA out of memory", so dropping the `\\bOutOfMemoryError\\b` alternative from
skills/diagnosis/analyzers/memory.py's _GPU_OOM went unnoticed). The other wordings no fixture held are in
tests/test_gpu_oom_field_wordings.py.

Sources, the lines kept as pasted (only the order around them is ours):
- PyTorch on ROCm names its allocator failure "HIP out of memory": a vLLM 0.17.1 start-up failing while it
  profiles a vision encoder (gpustack/gpustack issue 4963, "Failed to deploy qwen3.5-0.8b using vllm0.17.1: HIP
  out of memory. Tried to allocate 192.00 GiB").
- PyTorch's CUDA caching allocator when a process's memory fraction caps it: "Allocation on device 0 would exceed
  allowed memory. (out of memory)" with its table of figures (AIFSH/ComfyUI-ChatTTS issue 9; the same wording in
  Comfy-Org/ComfyUI issue 2021's title).
"""

from __future__ import annotations

from skills.diagnosis.diagnose import diagnose
from tests.test_diagnose_kinds import entries

# gpustack/gpustack issue 4963 (vLLM 0.17.1 on an AMD GPU with 16 GiB).
HIP = [
    '(EngineCore_DP0 pid=43)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/attention/ops/vit_attn_wrappers.py", line 202, in apply_sdpa',
    "(EngineCore_DP0 pid=43)     output = F.scaled_dot_product_attention(",
    "(EngineCore_DP0 pid=43)              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    "(EngineCore_DP0 pid=43) torch.OutOfMemoryError: HIP out of memory. Tried to allocate 192.00 GiB. GPU 0 has a total capacity of 15.98 GiB of which 11.56 GiB is free. Of the allocated memory 3.97 GiB is allocated by PyTorch, and 26.98 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
    "[rank0]:[W320 17:39:15.515118872 ProcessGroupNCCL.cpp:1553] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources. For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())",
    "(APIServer pid=7) Traceback (most recent call last):",
]
# AIFSH/ComfyUI-ChatTTS issue 9 (two RTX 3090s).
FRACTION_CAP = [
    "torch.cuda.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of memory)",
    "Currently allocated     : 6.89 GiB",
    "Requested               : 320.00 MiB",
    "Device limit            : 23.69 GiB",
    "Free (according to CUDA): 2.94 MiB",
    "PyTorch limit (set by user-supplied memory fraction)",
    "                        : 17179869184.00 GiB",
]


def test_an_out_of_memory_error_named_only_by_its_class_is_a_gpu_out_of_memory() -> None:
    d = diagnose(entries(*HIP))
    assert d.root_kinds() == ["gpu_oom_at_load"], [f.kind for f in d.findings]
    # the figures come from the same line: what it tried to allocate and what was free
    assert "tried to allocate 192.00 GiB, 11.56 GiB free" in d.findings[0].title


def test_the_caching_allocators_cap_is_a_gpu_out_of_memory() -> None:
    d = diagnose(entries(*FRACTION_CAP))
    assert d.root_kinds() == ["gpu_oom_at_load"], [f.kind for f in d.findings]

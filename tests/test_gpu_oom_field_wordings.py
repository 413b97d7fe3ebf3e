# ruff: noqa: E501  (log lines are quoted as they appear)
"""The GPU out-of-memory wordings no other fixture holds, each as users pasted it, each on its own diagnosed as
gpu_oom_at_load (issue 44: dropping any of these alternatives from skills/diagnosis/analyzers/memory.py's
_GPU_OOM went unnoticed).

Sources, kept close to the original (only the worker prefix and paths of a vLLM start-up are added around them):
- cuBLAS failing to create its handle for lack of memory: QwenLM/Qwen3 issue 873 (torch F.linear under a model's
  forward; the reporter fixed it by giving the process a GPU with room), the same text in JDAI-CV/fast-reid 625.
- CuPy's name for the CUDA runtime's allocation error: mitmul/deeppose issue 16 ("CUDARuntimeError:
  cudaErrorMemoryAllocation: out of memory").
- TensorFlow's allocator: dBeker/Faster-RCNN-TensorFlow-Python3 issue 110 ("ResourceExhaustedError: OOM when
  allocating tensor with shape[25088,4096] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by
  allocator GPU_0_bfc"), as a container running a TensorFlow process next to the server would log it.
"""

from __future__ import annotations

import pytest

from skills.diagnosis.diagnose import diagnose
from tests.test_diagnose_kinds import entries

CUBLAS = [
    "(EngineCore_DP0 pid=312) ERROR 01-05 10:03:12 [core.py:708] EngineCore failed to start.",
    '(EngineCore_DP0 pid=312) ERROR 01-05 10:03:12 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/torch/nn/modules/linear.py", line 116, in forward',
    "(EngineCore_DP0 pid=312) ERROR 01-05 10:03:12 [core.py:708]     return F.linear(input, self.weight, self.bias)",
    "(EngineCore_DP0 pid=312) ERROR 01-05 10:03:12 [core.py:708] RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
]
CUPY = [
    "Traceback (most recent call last):",
    "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorMemoryAllocation: out of memory",
]
TENSORFLOW = [
    "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[25088,4096] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
]


@pytest.mark.parametrize("lines", [CUBLAS, CUPY, TENSORFLOW], ids=["cublas-alloc", "cuda-runtime-alloc", "tf-oom"])
def test_each_wording_is_a_gpu_out_of_memory(lines: list[str]) -> None:
    d = diagnose(entries(*lines))
    assert d.root_kinds() == ["gpu_oom_at_load"], [f.kind for f in d.findings]

# ruff: noqa: E501  (remediation prose and log wordings read better unbroken)
"""The image's CUDA build does not fit the GPU: its CUDA needs a newer driver, or it has no kernels for the GPU.

Wordings, by where they are produced:
- the CUDA runtime's error strings (cudaGetErrorString; CUDA Runtime API, enum cudaError):
  cudaErrorInsufficientDriver (35) "CUDA driver version is insufficient for CUDA runtime version",
  cudaErrorCompatNotSupportedOnDevice (804) "forward compatibility was attempted on non supported HW",
  cudaErrorNoKernelImageForDevice (209) "no kernel image is available for execution on the device",
  cudaErrorInvalidKernelImage (200) "device kernel image is invalid" (Triton repeats it as
  "Triton Error [CUDA]: device kernel image is invalid");
- PyTorch: c10/cuda/CUDAFunctions.cpp "The NVIDIA driver on your system is too old (found version N)" and
  "Unexpected error from cudaGetDeviceCount() ... Error 804: ...", raised from torch/cuda/__init__.py
  _lazy_init (or warned there as "CUDA initialization: ..."); torch/cuda/__init__.py's capability check
  "... with CUDA capability sm_N is not compatible with the current PyTorch installation".
Seen in the field: tests/data/field_logs_tuning (gpustack #1254/#1540, vLLM #4375 #1936, bladebit #431).

The fix is an image whose CUDA build the GPU's driver runs and whose kernels cover the GPU: the one the
compatibility data names (skills/data/vllm_images.yaml through skills/capacity/image_compat.py), proposed as a
redeploy that the planner checks again.
"""

from __future__ import annotations

import re

from skills.capacity.catalog import load_catalog
from skills.capacity.image_compat import check_image, default_image, load_image_data, newest_compatible
from skills.diagnosis.analyzers.base import LogView, analyzer, evidence_of, first_seen, rx
from skills.diagnosis.findings import Finding, ProposedAction, Remediation
from skills.errors import UserFacingError

_DRIVER = rx(
    r"CUDA driver version is insufficient for CUDA runtime version",
    r"cudaErrorInsufficientDriver",
    r"The NVIDIA driver on your system is too old",
    r"forward compatibility was attempted on non supported HW",
    r"\bError 804\b",
)
_KERNELS = rx(
    r"no kernel image is available for execution on the device",
    r"device kernel image is invalid",
    r"cudaErrorNoKernelImageForDevice",
    r"with CUDA capability sm_\d+ is not compatible with the current PyTorch installation",
)
_FOUND = re.compile(r"found version (\d{4,5})")
_GPU_IN_LOG = {"nvidia-l4": re.compile(r"NVIDIA L4\b"), "nvidia-rtx-pro-6000": re.compile(r"RTX PRO 6000", re.I)}


def _gpu(view: LogView) -> tuple[str, bool]:
    """(Cloud Run GPU, known): the service's, else one the log names, else the L4 (Cloud Run's default GPU)."""
    gpus = load_image_data().cloud_run_gpus
    if view.service and view.service.gpu_type in gpus:
        return view.service.gpu_type, True
    for name, pattern in _GPU_IN_LOG.items():
        if any(pattern.search(line.text) for line in view.lines):
            return name, True
    return "nvidia-l4", False


def _family(view: LogView) -> str | None:
    """The model family the service serves: its args, else the model in vLLM's config lines."""
    candidates = list(view.service.args) if view.service else []
    model = view.config_at(len(view.lines)).get("model")
    if model:
        candidates.append(str(model))
    catalog = load_catalog()
    for cand in candidates:
        for part in (cand, cand.rstrip("/").rsplit("/", 1)[-1]):
            try:
                return catalog.model(part).family
            except UserFacingError:
                continue
    return None


def compatible_image(view: LogView) -> tuple[str | None, str]:
    """The image to redeploy with, per the compatibility data, and a sentence on what it rests on."""
    gpu, known = _gpu(view)
    family = _family(view)
    image = newest_compatible(family, gpu) if family else default_image(gpu)
    where = f"on {gpu}" + ("" if known else " (assumed: Cloud Run's default GPU; the log does not name it)")
    running = view.service.image if view.service else ""
    if image and running and running.split("@", 1)[0] == image:
        return None, f"`{running}` is already the image the compatibility data names {where}."
    if running and family and check_image(running, family, gpu).ok and image:
        return (
            image,
            f"`{running}` passes the compatibility data {where}, yet failed here: `{image}` is the newest image it names.",
        )
    return image, f"`{image}` is the newest image the compatibility data names {where}" + (
        f" for {family}" if family else ""
    ) + "."


@analyzer("cuda_incompatible")
def cuda_incompatible(view: LogView) -> Finding | None:
    driver = view.grep(*_DRIVER)
    kernels = view.grep(*_KERNELS)
    if not driver and not kernels:
        return None
    hits = sorted(driver + kernels, key=lambda h: h[0].idx)
    image, why = compatible_image(view)
    found = next((m.group(1) for h, _ in driver if (m := _FOUND.search(h.text))), None)
    if driver:
        title = "The image's CUDA build needs a newer NVIDIA driver than this GPU has"
        if found:
            title += f" (the driver supports CUDA {int(found) // 1000}.{int(found) % 1000 // 10})"
        summary = "The container's CUDA runtime is newer than the GPU driver can run (CUDA minor-version compatibility covers only the same major version), so CUDA never initialises."
    else:
        title = "The image has no CUDA kernels for this GPU's architecture"
        summary = "The image's CUDA kernels were built for other GPU architectures, so the first kernel launch fails."
    steps = [
        f"Redeploy with an image built for this GPU and driver: {why}",
        "The driver belongs to Cloud Run (it cannot be upgraded): the image is what must change. The planner checks the new image against the GPU's driver and the model's minimum vLLM before anything is written.",
    ]
    actions = (
        [ProposedAction(action="redeploy", params={"image": image}, reason="an image the GPU's driver runs")]
        if image
        else []
    )
    return Finding(
        kind="cuda_incompatible",
        title=title,
        severity="critical",
        evidence=evidence_of(hits),
        remediation=Remediation(summary=summary, steps=steps, actions=actions),
        first_seen=first_seen(hits),
        count=len(hits),
    )

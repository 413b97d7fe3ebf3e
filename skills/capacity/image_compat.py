"""Can this vLLM image serve this model on this Cloud Run GPU? (skills/data/vllm_images.yaml, every fact sourced)

Two independent questions: is the image's vLLM new enough for the model's architecture (an older one exits at
start-up: unknown architecture, or argparse rejects `--reasoning-parser gemma4`), and can the GPU's driver load
the image's CUDA build (a CUDA 13 build needs driver >= 580; the L4's 535 runs only CUDA 12.x builds, through
minor-version compatibility). A plan whose image fails either is refused with the reason and the newest image
from the data file that passes both.
"""

from __future__ import annotations

import datetime as dt
import re
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from skills.errors import InvalidInput

Version = tuple[int, int, int]
_TAG = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:\.post\d+|rc\d+)?(?:-(cu\d{3}))?(?:-(?:ubuntu\d+|x86_64|aarch64))*$")


def version(text: str) -> Version:
    a, b, c = (int(x) for x in str(text).split(".")[:3])
    return a, b, c


def vstr(v: Version) -> str:
    return ".".join(str(x) for x in v)


class Family(BaseModel):
    min_vllm: str
    architecture: str
    source: str


class TagConvention(BaseModel):
    from_: str = Field(alias="from")
    until: str | None
    unsuffixed_cuda: str
    suffixes: dict[str, str]
    source: str


class CloudRunGpuDriver(BaseModel):
    driver: str
    driver_major: int
    driver_cuda: str
    compute_capability: float
    source: str


class KnownImage(BaseModel):
    vllm: str
    cuda: str
    default_for: list[str] = Field(default_factory=list)
    source: str


class Serving(BaseModel):
    tool_call_parser: str
    reasoning_parser: str
    chat_template: str
    request_fields: dict[str, Any]
    reasoning_field: str
    sources: list[str]


class Accounting(BaseModel):
    """How one range of vLLM releases sizes the KV cache (the `accounting` rows of vllm_images.yaml)."""

    model_config = ConfigDict(extra="forbid")

    from_: str = Field(alias="from")
    until: str | None
    sliding_window_in_flight: Literal["batched_tokens", "concurrent_batches"]
    async_scheduling_default: bool
    max_concurrent_batches_async: int = Field(ge=1)
    gpu_memory_utilization_default: float = Field(gt=0, le=1)
    kv_report: Literal["capacity", "legacy"]
    # False: every layer of a hybrid model (Gemma 4's sliding-window + full layers) is sized at full length, as one
    # uniform type (vLLM's hybrid KV cache manager off for it); the 0.20.x row, vllm_images.yaml.
    hybrid_kv_manager: bool = True
    sources: list[str] = Field(min_length=1)
    estimates: str = ""  # which of the row's figures are estimates, and what they rest on
    checked: dt.date

    def concurrent_batches(self, async_scheduling: bool | None = None) -> int:
        """Batches whose tokens a sliding-window layer reserves for (None: the release's async default)."""
        on = self.async_scheduling_default if async_scheduling is None else async_scheduling
        if self.sliding_window_in_flight == "batched_tokens" or not on:
            return 1
        return self.max_concurrent_batches_async


class TpuImage(BaseModel):
    """vLLM's TPU image (vllm/vllm-tpu): the pinned release and the oldest one that serves Gemma 4."""

    repository: str
    default: str
    source: str
    min_release: str
    min_release_source: str
    families_apply: bool  # the families' min_vllm applies to the image's release (estimate, see the data file)


class ImageData(BaseModel):
    sources: dict[str, str]
    tpu: TpuImage
    accounting: list[Accounting] = Field(default_factory=list)
    families: dict[str, Family]
    tag_conventions: list[TagConvention]
    built_archs: list[float]
    cuda_min_driver: dict[str, int]
    cloud_run_gpus: dict[str, CloudRunGpuDriver]
    images: dict[str, KnownImage]
    serving: Serving

    def url(self, key: str) -> str:
        return self.sources.get(key, key)

    def accounting_for(self, release: Version) -> Accounting:
        """The accounting row covering `release`; InvalidInput for a release older than the table."""
        for row in self.accounting:
            if version(row.from_) <= release and (row.until is None or release < version(row.until)):
                return row
        raise InvalidInput(
            f"No KV accounting on record for vLLM {vstr(release)} (skills/data/vllm_images.yaml covers "
            f"{self.accounting[0].from_} and later)."
        )


@lru_cache(maxsize=1)
def load_image_data() -> ImageData:
    text = resources.files("skills").joinpath("data/vllm_images.yaml").read_text(encoding="utf-8")
    data = ImageData.model_validate(yaml.safe_load(text))
    for name, img in data.images.items():  # the table must agree with the tag rules it documents
        ref = parse_image(name, data)
        if ref.vllm != version(img.vllm) or ref.cuda != img.cuda:
            raise ValueError(f"vllm_images.yaml: {name} says vLLM {img.vllm} / CUDA {img.cuda}, its tag says otherwise")
    return data


class ImageRef(BaseModel):
    image: str
    tag: str = ""
    vllm: Version | None = None  # None: a floating or custom tag we cannot place
    cuda: str | None = None  # "12.9", "13.0", or "12" when only the major is known

    @property
    def cuda_major(self) -> str | None:
        return self.cuda.split(".", 1)[0] if self.cuda else None


def parse_image(image: str, data: ImageData | None = None) -> ImageRef:
    """vllm/vllm-openai[:tag][@sha256:...] (any registry) -> vLLM version and CUDA build, when the tag says."""
    name = image.strip().split("@", 1)[0]
    repo, _, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (name, "", "")
    ref = ImageRef(image=image, tag=tag)
    m = _TAG.match(tag)
    if not m or not repo.endswith("vllm-openai"):
        return ref
    v: Version = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
    for conv in (data or load_image_data()).tag_conventions:
        if version(conv.from_) <= v and (conv.until is None or v < version(conv.until)):
            suffix = m.group(4)
            cuda = conv.suffixes.get(suffix) if suffix else conv.unsuffixed_cuda
            return ImageRef(image=image, tag=tag, vllm=v, cuda=cuda)
    return ImageRef(image=image, tag=tag, vllm=v)


class Compat(BaseModel):
    image: ImageRef
    ok: bool
    problems: list[str] = Field(default_factory=list)  # why it cannot serve / cannot run (each with its source)
    notes: list[str] = Field(default_factory=list)  # caveats that do not block
    suggestion: str | None = None  # newest image in the data file that passes


def _check(ref: ImageRef, family: str, gpu: str, data: ImageData) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    notes: list[str] = []
    fam = data.families.get(family)
    drv = data.cloud_run_gpus.get(gpu)
    if drv is None:
        problems.append(f"`{gpu}` is not a Cloud Run GPU (Cloud Run offers {', '.join(data.cloud_run_gpus)}).")
    if ref.vllm is None:
        problems.append(
            f"Cannot tell which vLLM release `{ref.image}` is: pin a vllm/vllm-openai release tag "
            "(e.g. v0.24.0-cu129, optionally @sha256:digest), not a floating or custom tag."
        )
        return problems, notes
    if fam is None:
        notes.append(f"No minimum vLLM version is recorded for model family `{family}`; not checked.")
    elif ref.vllm < version(fam.min_vllm):
        problems.append(
            f"vLLM {vstr(ref.vllm)} cannot serve {family} ({fam.architecture}): it needs vLLM >= {fam.min_vllm} "
            f"({data.url(fam.source)}); an older image exits at start-up."
        )
    if drv is not None and ref.cuda_major is not None:
        need = data.cuda_min_driver.get(ref.cuda_major)
        if need is None or drv.driver_major < need:
            problems.append(
                f"`{ref.image}` is a CUDA {ref.cuda} build; {gpu} runs NVIDIA driver {drv.driver} "
                f"(CUDA {drv.driver_cuda}, {data.url(drv.source)}), and CUDA {ref.cuda_major}.x needs driver >= "
                f"{need} ({data.url('cuda_mvc')}): the container cannot start on this GPU."
            )
        elif ref.cuda and ref.cuda != ref.cuda_major and version(ref.cuda + ".0") > version(drv.driver_cuda + ".0"):
            notes.append(
                f"CUDA {ref.cuda} build on a CUDA {drv.driver_cuda} driver: runs through CUDA minor-version "
                f"compatibility ({data.url('cuda_mvc')})."
            )
    if drv is not None and drv.compute_capability not in data.built_archs:
        problems.append(f"The image has no kernels for compute capability {drv.compute_capability} ({gpu}).")
    return problems, notes


def newest_compatible(family: str, gpu: str, data: ImageData | None = None) -> str | None:
    """The newest image in the data file that serves `family` on `gpu` (the GPU's default wins a tie)."""
    data = data or load_image_data()
    ok = [
        (version(img.vllm), gpu in img.default_for, name)
        for name, img in data.images.items()
        if not _check(parse_image(name, data), family, gpu, data)[0]
    ]
    return max(ok)[2] if ok else None


def default_image(gpu: str, data: ImageData | None = None) -> str:
    data = data or load_image_data()
    for name, img in data.images.items():
        if gpu in img.default_for:
            return name
    raise InvalidInput(f"No default vLLM image is recorded for `{gpu}`.", "Set VLLM_IMAGE to a pinned release tag.")


def catalog_image(image: str) -> str:
    """`image` as the compatibility data spells it; InvalidInput for any image the data does not list (a redeploy
    may change the image only to one the bot knows the vLLM release and CUDA build of)."""
    data = load_image_data()
    name = image.strip()
    if name in data.images:
        return name
    raise InvalidInput(
        f"Unknown image `{image}`: a redeploy can switch only to an image in the bot's compatibility data.",
        f"Known images: {', '.join(data.images)} (skills/data/vllm_images.yaml).",
    )


def check_image(image: str, family: str, gpu: str) -> Compat:
    data = load_image_data()
    ref = parse_image(image, data)
    problems, notes = _check(ref, family, gpu, data)
    return Compat(
        image=ref,
        ok=not problems,
        problems=problems,
        notes=notes,
        suggestion=None if not problems else newest_compatible(family, gpu, data),
    )


_TPU_TAG = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:\.post\d+)?$")


def check_tpu_image(image: str, family: str | None) -> Compat:
    """Can this vllm/vllm-tpu image serve `family` on a Cloud TPU? A release tag at or above the first release that
    serves Gemma 4 and the family's own minimum passes; a floating or one-off tag (latest, nightly-*, gemma4) or
    another repository cannot be placed and is refused, as a GPU image's is."""
    data = load_image_data()
    tpu = data.tpu
    name = image.strip().split("@", 1)[0]
    repo, _, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (name, "", "")
    m = _TPU_TAG.match(tag)
    ref = ImageRef(image=image, tag=tag)
    problems: list[str] = []
    if not repo.endswith(tpu.repository) or not m:
        problems.append(
            f"Cannot tell which vLLM TPU release `{image}` is: pin a {tpu.repository} release tag (e.g. "
            f"`{tpu.default}`), not a floating or custom tag ({data.url(tpu.source)})."
        )
    else:
        release: Version = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        ref = ImageRef(image=image, tag=tag, vllm=release)
        need, why = version(tpu.min_release), data.url(tpu.min_release_source)
        fam = data.families.get(family or "")
        if fam is not None and tpu.families_apply and version(fam.min_vllm) > need:
            need, why = version(fam.min_vllm), f"{fam.architecture}: {data.url(fam.source)}"
        if release < need:
            problems.append(
                f"{tpu.repository} {vstr(release)} cannot serve {family or 'Gemma 4'}: it needs release "
                f"{vstr(need)} or later ({why})."
            )
    return Compat(image=ref, ok=not problems, problems=problems, suggestion=tpu.default if problems else None)


def require_compatible(image: str, family: str, gpu: str, origin: str) -> Compat:
    """Raise InvalidInput (nothing is planned) when `image` cannot serve `family` on `gpu`.

    `origin` says where the image came from (VLLM_IMAGE, the profile, the GPU's default) so the user knows
    what to change."""
    c = check_image(image, family, gpu)
    if c.ok:
        return c
    fix = f"Use `{c.suggestion}` (the newest compatible image in the bot's data)" if c.suggestion else "No image fits"
    raise InvalidInput(
        f"Refused: the image `{image}` ({origin}) cannot run {family} on {gpu}. " + " ".join(c.problems),
        fix + (f"; change {origin}." if origin.isupper() else "."),
    )

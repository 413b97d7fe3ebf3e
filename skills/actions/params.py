"""One params model per write action: the agent's tool schemas, the proposal sanitizer (skills/diagnosis/remediation.py)
and the plan builder (skills/deploy/plan_builder.py) all validate with these, so a proposal the sanitizer keeps is one
the plan builder accepts. The proposable subset (what model output may propose) is derived here.

`kv_cache_dtype` uses the planner's vocabulary (skills/serving/profiles.py KvDtype): the bot renders only
`--kv-cache-dtype auto` or `fp8`, both in vLLM's own choices (vllm/config/cache.py `CacheDType`, e.g. v0.24:
"auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"); the other FP8 variants are
refused here rather than silently rendered as something else.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from skills.serving.profiles import KvDtype

# What each setting is, in the words of its owner: vLLM's engine arguments (vllm/engine/arg_utils.py and
# vllm/config/: cache.py, model.py, scheduler.py) and Cloud Run's service settings (`gcloud run deploy` flags).
SETTING_HELP = {
    "gpu": "Cloud Run GPU type (nvidia-l4, nvidia-rtx-pro-6000); /gemma models lists the catalog's",
    "gpu_count": "GPUs per instance; vLLM's --tensor-parallel-size follows it",
    "max_model_len": "vLLM --max-model-len: model context length, prompt and output together, in tokens",
    "gpu_memory_utilization": "vLLM --gpu-memory-utilization: the fraction of GPU memory vLLM may use "
    "(weights, activations and KV cache), 0-1",
    "kv_cache_dtype": "KV cache data type: auto (the model's dtype; bf16 and fp16 mean the same) or fp8, "
    "vLLM --kv-cache-dtype",
    "enforce_eager": "vLLM --enforce-eager: always eager-mode PyTorch, no CUDA graphs",
    "cpu_offload_gb": "vLLM --cpu-offload-gb: GiB of weights offloaded to CPU memory, per GPU",
    "max_num_seqs": "vLLM --max-num-seqs: the most sequences processed in one iteration (Cloud Run's "
    "concurrency is set to match)",
    "concurrency": "Cloud Run --concurrency: the most requests an instance takes at once; must equal max_num_seqs",
    "memory": "Cloud Run --memory per instance (32Gi, 16G)",
    "cpu": "Cloud Run --cpu: vCPUs per instance (8)",
    "min_instances": "Cloud Run --min-instances: instances kept warm (0 scales to zero, with cold starts)",
    "max_instances": "Cloud Run --max-instances: the most instances the service scales to",
    "startup_failure_threshold": "startup probe failureThreshold: failed checks before the instance is "
    "restarted (times the period: how long vLLM has to start)",
    "startup_period_s": "startup probe periodSeconds: seconds between checks",
    "accelerator_type": "Cloud TPU only: the slice type (v6e-1, v6e-4, v6e-8)",
    "zone": "Cloud TPU only: the zone the slice runs in (us-east5-b)",
    "provisioning": "Cloud TPU only: on-demand, spot or reserved",
    "reservation": "Cloud TPU only, with --provisioning reserved: the reservation's name (in the slice's zone)",
    "service": "the service to act on (default: the configured one)",
}


def _only_true(v: bool) -> bool:
    if v is not True:
        raise ValueError("only true is meaningful here (leave it out to keep the running setting)")
    return v


OnlyTrue = Annotated[bool, AfterValidator(_only_true)]
DType = Literal["auto", "half", "bfloat16"]  # vLLM --dtype; "half" on GPUs without bf16 (T4)
ModelSource = Literal["hub", "bucket"]
# A catalog model name or alias (checked against the catalog): never a free-form path or repo id.
_MODEL_NAME = r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$"


class RedeployFixes(BaseModel):
    """Fixes a redeploy may apply besides the numeric settings. Each one maps to fixed flags, env vars or
    mount options chosen by the bot (the secret and bucket names come from settings, the model from the
    catalog, the image from the compatibility data), so no value here can put arbitrary text into the
    container's image, args, env or volumes."""

    dtype: DType | None = Field(default=None, description="vLLM --dtype: half where bf16 is unsupported (T4)")
    enable_tool_calling: bool | None = Field(
        default=None,
        description="--enable-auto-tool-choice --tool-call-parser gemma4 --reasoning-parser gemma4 (false removes)",
    )
    fix_fuse_mount_options: OnlyTrue | None = Field(
        default=None, description="mount the GCS FUSE volume as uid=1001;gid=1001 (the vLLM image's user)"
    )
    hf_token_from_secret: OnlyTrue | None = Field(
        default=None, description="inject HF_TOKEN from the configured Secret Manager secret"
    )
    model_source: ModelSource | None = Field(
        default=None,
        description="hub: pull from Hugging Face (token from Secret Manager, HF_HUB_OFFLINE unset); "
        "bucket: weights on the GCS FUSE mount with HF_HUB_OFFLINE=1",
    )
    model: str | None = Field(
        default=None, pattern=_MODEL_NAME, description="a catalog model name; sets --model to its path or Hub id"
    )

    image: str | None = Field(
        default=None,
        max_length=200,
        description="a vLLM image from the bot's compatibility data (skills/data/vllm_images.yaml), e.g. "
        "vllm/vllm-openai:v0.25.1-cu129; the planner checks it against the GPU's driver and the model",
    )

    @field_validator("image")
    @classmethod
    def _catalog_image(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from skills.capacity.image_compat import catalog_image
        from skills.errors import UserFacingError

        try:
            return catalog_image(v)
        except UserFacingError as exc:
            raise ValueError(f"{exc.message} {exc.hint}".strip()) from None

    @field_validator("model")
    @classmethod
    def _catalog_model(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from skills.capacity.catalog import load_catalog
        from skills.errors import UserFacingError

        try:
            return load_catalog().model(v).name
        except UserFacingError as exc:
            raise ValueError(f"{exc.message} {exc.hint}".strip()) from None


class Overrides(BaseModel):
    """What a user (or a remediation) may change on top of a profile or the running service."""

    model_config = ConfigDict(extra="forbid")

    # Each description is the field's help everywhere it is typed or called: `/gemma deploy --help`, the MCP tool
    # schemas, the agent's tools (vLLM's wording from its engine arguments, Cloud Run's from `gcloud run deploy`).
    gpu: str | None = Field(default=None, description=SETTING_HELP["gpu"])
    gpu_count: int | None = Field(default=None, ge=1, le=8, description=SETTING_HELP["gpu_count"])
    max_model_len: int | None = Field(default=None, ge=256, le=1_048_576, description=SETTING_HELP["max_model_len"])
    gpu_memory_utilization: float | None = Field(
        default=None, gt=0.1, le=0.99, description=SETTING_HELP["gpu_memory_utilization"]
    )
    kv_cache_dtype: KvDtype | None = Field(default=None, description=SETTING_HELP["kv_cache_dtype"])
    enforce_eager: bool | None = Field(default=None, description=SETTING_HELP["enforce_eager"])
    cpu_offload_gb: float | None = Field(default=None, ge=0, le=512, description=SETTING_HELP["cpu_offload_gb"])
    max_num_seqs: int | None = Field(default=None, ge=1, le=1000, description=SETTING_HELP["max_num_seqs"])
    concurrency: int | None = Field(default=None, ge=1, le=1000, description=SETTING_HELP["concurrency"])
    memory: str | None = Field(default=None, pattern=r"^\d+(\.\d+)?(Gi|Mi|G|M)$", description=SETTING_HELP["memory"])
    cpu: str | None = Field(default=None, pattern=r"^\d+(\.\d+)?$", description=SETTING_HELP["cpu"])
    min_instances: int | None = Field(default=None, ge=0, le=100, description=SETTING_HELP["min_instances"])
    max_instances: int | None = Field(default=None, ge=1, le=100, description=SETTING_HELP["max_instances"])
    startup_failure_threshold: int | None = Field(
        default=None, ge=1, le=1800, description=SETTING_HELP["startup_failure_threshold"]
    )
    startup_period_s: int | None = Field(default=None, ge=1, le=240, description=SETTING_HELP["startup_period_s"])
    # Cloud TPU only (skills/targets/tpu): the slice, its zone and provisioning model; another target refuses them.
    accelerator_type: str | None = Field(
        default=None, pattern=r"^v6e-\d+$", description=SETTING_HELP["accelerator_type"]
    )
    zone: str | None = Field(  # standard zones (us-east5-b) and AI zones (us-central1-ai1, us-south1-ai1b)
        default=None, pattern=r"^[a-z]+-[a-z]+\d+-(?:[a-z]|ai\d+[a-z]?)$", description=SETTING_HELP["zone"]
    )
    provisioning: Literal["on-demand", "spot", "reserved"] | None = Field(
        default=None, description=SETTING_HELP["provisioning"]
    )
    reservation: str | None = Field(
        default=None, pattern=r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$", description=SETTING_HELP["reservation"]
    )

    @model_validator(mode="after")
    def _agree(self) -> Overrides:
        if self.concurrency and self.max_num_seqs and self.concurrency != self.max_num_seqs:
            raise ValueError("concurrency and max_num_seqs must be equal (Cloud Run would queue what vLLM can run)")
        if self.concurrency and not self.max_num_seqs:
            self.max_num_seqs = self.concurrency
        self.concurrency = None
        if (
            self.min_instances is not None
            and self.max_instances is not None
            and self.min_instances > self.max_instances
        ):
            raise ValueError("min_instances must not exceed max_instances")
        return self

    def set_fields(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class DeployParams(Overrides):
    profile: str = Field(description="a deploy profile (skills/data/profiles.yaml; /gemma models lists them)")
    service: str | None = Field(default=None, description=SETTING_HELP["service"])


class RedeployParams(Overrides, RedeployFixes):
    """Overrides plus the fixes only a redeploy applies (dtype, tool calling, FUSE mount, HF token, model)."""

    model_config = ConfigDict(extra="forbid")

    service: str | None = Field(default=None, description=SETTING_HELP["service"])
    # Offered by the plan when the template is another revision's (skills/targets/cloud_run/plan_common.py).
    on_serving: bool | None = Field(
        default=None,
        description="build on the serving revision's configuration instead of the service's template (after a "
        "failed deploy or a rollback the template is not what serves)",
    )


class ScaleParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    min_instances: int = Field(ge=0, le=100)
    max_instances: int = Field(ge=1, le=100)
    service: str | None = None

    @model_validator(mode="after")
    def _order(self) -> ScaleParams:
        if self.min_instances > self.max_instances:
            raise ValueError("min_instances must not exceed max_instances")
        return self


class RollbackParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    revision: str | None = None
    service: str | None = None


class DestroyParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    service: str | None = None


ACTION_PARAMS: dict[str, type[BaseModel]] = {
    "deploy": DeployParams,
    "redeploy": RedeployParams,
    "scale": ScaleParams,
    "rollback": RollbackParams,
    "destroy": DestroyParams,
}
# Never proposed from model output: destroying the service is a human's explicit command.
PROPOSABLE: dict[str, type[BaseModel]] = {k: v for k, v in ACTION_PARAMS.items() if k != "destroy"}

"""One params model per write action: the agent's tool schemas, the proposal sanitizer (skills/diagnosis/remediation.py)
and the plan builder (skills/deploy/plan_builder.py) all validate with these, so a proposal the sanitizer keeps is one
the plan builder accepts. The proposable subset (what model output may propose) is derived here.

`kv_cache_dtype` uses the planner's vocabulary (skills/deploy/profiles.py KvDtype): the bot renders only
`--kv-cache-dtype auto` or `fp8`, both in vLLM's own choices (vllm/config/cache.py `CacheDType`, e.g. v0.24:
"auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"); the other FP8 variants are
refused here rather than silently rendered as something else.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from skills.deploy.profiles import KvDtype


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

    gpu: str | None = None
    gpu_count: int | None = Field(default=None, ge=1, le=8)
    max_model_len: int | None = Field(default=None, ge=256, le=1_048_576)
    gpu_memory_utilization: float | None = Field(default=None, gt=0.1, le=0.99)
    kv_cache_dtype: KvDtype | None = None
    enforce_eager: bool | None = None
    cpu_offload_gb: float | None = Field(default=None, ge=0, le=512)
    max_num_seqs: int | None = Field(default=None, ge=1, le=1000)
    concurrency: int | None = Field(default=None, ge=1, le=1000)  # Cloud Run's; must equal max_num_seqs
    memory: str | None = Field(default=None, pattern=r"^\d+(\.\d+)?(Gi|Mi|G|M)$")
    cpu: str | None = Field(default=None, pattern=r"^\d+(\.\d+)?$")
    min_instances: int | None = Field(default=None, ge=0, le=100)
    max_instances: int | None = Field(default=None, ge=1, le=100)
    startup_failure_threshold: int | None = Field(default=None, ge=1, le=1800)
    startup_period_s: int | None = Field(default=None, ge=1, le=240)

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
    profile: str
    service: str | None = None


class RedeployParams(Overrides, RedeployFixes):
    """Overrides plus the fixes only a redeploy applies (dtype, tool calling, FUSE mount, HF token, model)."""

    model_config = ConfigDict(extra="forbid")

    service: str | None = None
    # Build on the serving revision's configuration instead of the service's template, when the template is
    # another revision's (a failed deploy, a rollback): the plan offers it then
    # (skills/targets/cloud_run/plan_common.py).
    on_serving: bool | None = None


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

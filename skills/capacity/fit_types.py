"""What the capacity planner is asked and what it answers: the fit request, the report, the as-deployed check."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from skills.capacity.catalog import GpuProfile, ModelProfile

Verdict = Literal["fits", "fits_with_changes", "does_not_fit"]

KvDtype = Literal["auto", "fp8", "bf16", "fp16"]

GIB = 1024**3
# Why a configuration deployed as given would fail at start-up (the as-deployed check).
StartFailure = Literal["gpu_oom_at_load", "graph_warmup_oom", "kv_cache_insufficient", "host_memory"]


class FitRequest(BaseModel):
    """What the operator asked for. In a FitReport, `request` is the effective form with defaults resolved."""

    model_config = ConfigDict(extra="forbid")

    model: str
    gpu: str = "nvidia-l4"
    gpu_count: int = Field(default=1, ge=1, le=8)
    max_model_len: int | None = Field(default=None, ge=256)
    gpu_memory_utilization: float = Field(default=0.90, gt=0.1, le=0.99)
    kv_cache_dtype: KvDtype = "auto"
    cpu_offload_gb: float = Field(default=0, ge=0)  # vLLM's --cpu-offload-gb (GiB per GPU)
    enforce_eager: bool = False
    host_memory_gib: float | None = Field(default=None, gt=0)  # Cloud Run --memory; None = planner picks
    cpu: float | None = Field(default=None, gt=0)  # Cloud Run --cpu; None = the planner's floor for the memory
    # Where the weights come from: the Hub (no MODEL_BUCKET) puts the files on Cloud Run's in-memory filesystem,
    # which counts against --memory on top of the loading peak; a bucket (GCS FUSE) does not. The surfaces set it
    # from MODEL_BUCKET, as the deploy they stand for would load them.
    weights_from_hub: bool = False
    max_num_seqs: int | None = Field(default=None, ge=1)
    dtype: Literal["auto", "bfloat16", "half"] = "auto"  # vLLM --dtype; "half" where bf16 is unsupported
    max_num_batched_tokens: int | None = Field(default=None, ge=16)  # None = the planner's (what we render)
    vllm_image: str | None = None  # the image to deploy: its release's KV accounting; None = the GPU's default
    # vLLM's --limit-mm-per-prompt: a tower whose every modality is 0 is not built (no weights, no encoder cache)
    limit_mm_per_prompt: dict[str, int] | None = None
    # Cloud Run region, or an Azure location for an ACA GPU (prices, GPU availability); None = the table's default
    region: str | None = None


class FitReport(BaseModel):
    verdict: Verdict
    weights_gib: float  # whole model, as loaded (before offload)
    overhead_gib: float  # per GPU, inside the vLLM budget
    kv_bytes_per_token: int  # KV bytes one max-model-len request needs, per token of it
    kv_cache_tokens: int  # vLLM's "GPU KV cache size: N tokens"
    kv_cache_gib: float  # all GPUs
    max_concurrency: float  # vLLM's "Maximum concurrency for L tokens per request: X"
    kv_blocks: int = 0  # blocks in the shared pool (vLLM's num_gpu_blocks)
    kv_groups: int = 0  # KV-cache groups sharing the pool
    startup_lines: list[str] = Field(default_factory=list)  # the two lines vLLM will print, predicted
    host_memory_gib: float  # peak host RAM needed to load
    cold_start_s: float
    cost_per_hour_usd: float | None  # one instance / replica; None: no sourced price ("price unknown")
    usd_per_m_tokens: float | None = None  # $ per million output tokens at est_tokens_per_s, one stream
    aca_profile: str = ""  # the Azure Container Apps workload profile type an ACA GPU's figures are for
    est_tokens_per_s: float | None  # single stream decode
    changes: list[str]  # flags/settings to apply (fits_with_changes); the numbers already include them
    alternatives: list[str]  # nearest configurations that do fit (does_not_fit, or a slow fit)
    alternative_requests: list[FitRequest] = Field(default_factory=list)  # same, machine-readable
    warnings: list[str] = Field(default_factory=list)  # works, but the operator should think twice
    notes: list[str] = Field(default_factory=list)  # why: one line per finding
    request: FitRequest  # effective config the numbers describe (defaults resolved, changes applied)
    requested: FitRequest  # what was asked, as given
    vllm_release: str = ""  # the vLLM release whose KV accounting the numbers follow (see notes)
    model: ModelProfile
    gpu: GpuProfile
    budget_gib: float  # per GPU: memory x utilisation
    vram_after_weights_gib: float  # per GPU: memory - weights (what operators call "left for KV")
    recommended_memory_gib: int  # Cloud Run --memory
    recommended_cpu: float  # Cloud Run --cpu
    recommended_max_num_seqs: int  # also the Cloud Run --concurrency to pair with it
    startup_budget_s: int  # cold start with margin: what the startup probe must allow
    vllm_args: list[str]  # the vLLM flags the effective config implies (besides model/host/port)

    @property
    def ok(self) -> bool:
        return self.verdict != "does_not_fit"


class DeployedCheck(BaseModel):
    """What happens when vLLM starts with exactly these settings (no planner fixes applied): the simulated
    revision in bot/sandbox uses it to fail the way vLLM fails. `failure` is None when it starts."""

    failure: StartFailure | None
    weights_gib: float
    gpu_memory_gib: float  # per GPU, as CUDA reports it
    budget_gib: float
    kv_free_gib: float
    kv_needed_gib: float  # one full sequence at max-model-len
    kv_tokens: int
    kv_blocks: int = 0  # the KV-cache blocks vLLM allocates (its cache_config_info's num_gpu_blocks)
    max_len_that_fits: int
    graph_warmup_gib: float
    host_need_gib: float
    cold_start_s: float
    load_s: float  # weights over GCS FUSE (part of the cold start)


class ServingSummary(BaseModel):
    """What a deployed spec runs, as the planner reads it back (a target reads its own spec into this)."""

    image: str
    fit: FitRequest  # the model, accelerator and vLLM settings, for a re-plan
    startup_budget_s: int = 0  # how long the target lets the server start before giving up on it

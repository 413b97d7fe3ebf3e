"""The model and GPU catalog (skills/data/catalog.yaml) as typed profiles, plus name lookup (close matches).

The YAML is the single place a model or GPU is described; variants (`base: ...`) inherit their base model's
architecture and override only what differs (quantization, repo id, vLLM args).
"""

from __future__ import annotations

import datetime as dt
import difflib
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from skills.errors import InvalidInput

Quantization = Literal["bf16", "fp8", "w4a16"]
# A catalog GPU on this platform is planned on its Azure Container Apps workload profile (skills/data/aca.yaml).
ACA_PLATFORM = "Azure Container Apps"


class QuantProfile(BaseModel):
    checked: dt.date  # when its figures were last read against their sources
    bytes_per_param: float
    weights_dtype: str
    min_compute_capability: float | None = None
    source: str = ""
    # The checkpoint also stores the LM head (a copy of the tied embeddings), which vLLM skips when the config ties
    # them: it costs disk and download, not GPU memory.
    checkpoint_stores_lm_head: bool = False
    checkpoint_source: str = ""


# The modalities whose --limit-mm-per-prompt of 0 lets vLLM skip building a tower (gemma4_mm.py builds the vision
# tower under _mark_tower_model(vllm_config, {"image", "video"}) and the audio tower under "audio"; vLLM's
# SupportsMultiModal._mark_tower_model: "Tower model components are automatically skipped when
# `--limit-mm-per-prompt` is set to zero for all of their modalities").
TOWER_MODALITIES: dict[str, frozenset[str]] = {
    "vision": frozenset({"image", "video"}),
    "audio": frozenset({"audio"}),
}


class VisionTower(BaseModel):
    """A Gemma 4 vision tower as config.json's `vision_config` describes it (Gemma4VisionConfig)."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    patch_size: int
    position_embedding_size: int
    standardize: bool = False

    def params(self, text_hidden_size: int) -> int:
        """Parameters of what vLLM's gemma4_mm.py builds for images and video: the vision tower
        (AutoModel.from_config(config.vision_config)) and embed_vision (Gemma4MultimodalEmbedder), counted from
        transformers' Gemma4Vision* modules: the patch embedder (input_proj 3 x patch^2 -> hidden, no bias; a
        2 x position_embedding_size x hidden position table), per encoder layer q/k/v/o projections with q/k norms,
        a gated MLP (gate, up, down) and four RMSNorms, the standardize bias and scale, and embed_vision's
        projection to the text hidden size (no bias)."""
        h, i, hd = self.hidden_size, self.intermediate_size, self.head_dim
        q, kv = self.num_attention_heads * hd, self.num_key_value_heads * hd
        embedder = 3 * self.patch_size**2 * h + 2 * self.position_embedding_size * h
        layer = h * q + 2 * h * kv + q * h + 2 * hd + 3 * h * i + 4 * h
        standardize = 2 * h if self.standardize else 0
        return embedder + self.num_hidden_layers * layer + standardize + h * text_hidden_size


class AudioTower(BaseModel):
    """A Gemma 4 audio tower as config.json's `audio_config` describes it (Gemma4AudioConfig): a 12-layer conformer
    on E2B and E4B. Sources (read 2026-11-27): the E2B and E4B entries of transformers'
    src/transformers/models/gemma4/convert_gemma4_weights.py @ 0f3f0632a38798af2adf264adc752130ecc5fa66 both set
    `audio_config=_DEFAULT_AUDIO_CONFIG = Gemma4AudioConfig()`, whose defaults are in configuration_gemma4.py
    @ 008e574391258935f3ecc3035c882e73bbcac419 (hidden_size 1024, 12 layers, 8 heads, subsampling_conv_channels
    [128, 32], conv_kernel_size 5, output_proj_dims 1536, use_clipped_linears true); the released checkpoints'
    audio_config is quoted with the same values in public code (index file ids 58179131101, 58071598685). Modules:
    transformers' src/transformers/models/gemma4/modeling_gemma4.py @ 0246b4f3335464614ef1de66531f9131a44ec801
    (Gemma4AudioModel and the Gemma4Audio* classes it builds). What vLLM builds: vllm-project/vllm
    vllm/model_executor/models/gemma4_mm.py @ 01bae2190e1c298115941f50bd6ed508216f24e7 (audio_tower =
    AutoModel.from_config(config.audio_config) and embed_audio = Gemma4MultimodalEmbedder, both under
    _mark_tower_model(vllm_config, "audio"), only when audio_config is set)."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    subsampling_conv_channels: tuple[int, int]
    conv_kernel_size: int
    output_proj_dims: int

    def params(self, text_hidden_size: int) -> int:
        """Parameters of the audio tower and embed_audio, module by module (h = hidden_size, d = h / heads,
        c0, c1 = subsampling_conv_channels, k = conv_kernel_size, o = output_proj_dims, t = the text hidden size):

        - subsample_conv_projection: layer0 Conv2d 1 -> c0, 3x3, no bias (9 c0) + LayerNorm(c0) without bias (c0);
          layer1 Conv2d c0 -> c1, 3x3, no bias (9 c0 c1) + LayerNorm(c1) (c1); input_proj_linear
          (c0 // 4) * c1 -> h, no bias.
        - rel_pos_enc: sinusoidal, a non-persistent buffer: no parameters.
        - each of num_hidden_layers Gemma4AudioLayer:
          feed_forward1 and feed_forward2: ffw_layer_1 h -> 4h and ffw_layer_2 4h -> h (no bias), pre/post RMSNorm
          (2h) each; self_attn: q, k, v and post projections h -> h (no bias), relative_k_proj h -> h (no bias),
          per_dim_scale (d); lconv1d: linear_start h -> 2h, linear_end h -> h (no bias), a depthwise causal Conv1d
          (h channels x k, no bias), pre_layer_norm and conv_norm (2h); norm_pre_attn, norm_post_attn, norm_out (3h).
          Per layer: 24 h^2 + (4 + k + 2 + 3) h + d.
        - output_proj: h -> o with bias (h o + o).
        - embed_audio (Gemma4MultimodalEmbedder): embedding_projection o -> t, no bias; its pre-projection RMSNorm
          has no weight.

        Not counted: the 4 scalar clip bounds (input/output min/max buffers) of each clipped linear, 40 a layer
        (480 in all), as VisionTower leaves out its own."""
        h, o = self.hidden_size, self.output_proj_dims
        d = h // self.num_attention_heads
        c0, c1 = self.subsampling_conv_channels
        subsample = 9 * c0 + c0 + 9 * c0 * c1 + c1 + (c0 // 4) * c1 * h
        feed_forward = 2 * 4 * h * h + 2 * h
        attention = 4 * h * h + h * h + d
        light_conv = 2 * h * h + h * h + self.conv_kernel_size * h + 2 * h
        layer = 2 * feed_forward + attention + light_conv + 3 * h
        return subsample + self.num_hidden_layers * layer + (h * o + o) + o * text_hidden_size


class ModelProfile(BaseModel):
    """A model as its published config.json describes it (see `sources` for where each number comes from)."""

    name: str  # canonical catalog name, e.g. "gemma-4-26b-a4b-qat"
    hf_repo: str  # Hub id (also the folder name expected under the GCS FUSE mount)
    # The Hub gates the checkpoint (a licence its account must accept), so the service needs HF_TOKEN. Gemma 4 is
    # Apache-2.0 and not gated (catalog.yaml, `models:` header): False for every catalog entry today.
    hub_gated: bool = False
    # The build stores lm_head.weight although its config ties it to embed_tokens, and vLLM loads that copy onto the
    # GPU too (Google's E2B/E4B QAT builds: catalog.yaml sources.loads_stored_lm_head).
    loads_stored_lm_head: bool = False
    config: str = ""  # the config.json the architecture numbers come from
    aliases: list[str] = Field(default_factory=list)
    base: str | None = None  # the bf16 model this variant is built from
    architecture: str = "gemma4"  # config.json model_type
    params_b: float  # total parameters, billions (per-layer embeddings included)
    active_params_b: float  # per-token active parameters (MoE, or "effective" for E2B/E4B)
    towers: dict[str, float] = Field(default_factory=dict)  # tower -> params (billions) vLLM builds besides the LM
    vision_tower: VisionTower | None = None  # config.json vision_config: its params fill towers["vision"]
    audio_tower: AudioTower | None = None  # config.json audio_config: its params fill towers["audio"]
    quantization: Quantization
    layers: int
    full_attention_every: int = Field(ge=1)  # layer_types: layer i is full attention when (i + 1) % N == 0
    kv_shared_layers: int = Field(default=0, ge=0)  # the last N layers reuse earlier layers' KV cache
    sliding_kv_heads: int
    sliding_head_dim: int
    full_kv_heads: int
    full_head_dim: int
    k_eq_v: bool = False  # full layers load K into V too: V still occupies cache (vLLM gemma4.py)
    sliding_window: int
    max_context: int
    hidden_size: int
    vocab_size: int
    per_layer_input_size: int = 0
    vocab_size_per_layer_input: int = 0  # per-layer embedding rows (E2B/E4B)
    tie_word_embeddings: bool = True
    default_max_model_len: int
    activation_gib: float  # peak activations of vLLM's profiling run (estimate)
    graph_warmup_gib: float  # transient allocation during CUDA-graph warm-up, outside the vLLM budget (estimate)
    vllm_args: list[str] = Field(default_factory=list)  # extra args the checkpoint needs
    measured_tok_s: dict[str, float] = Field(default_factory=dict)  # single-stream decode by GPU, reported
    approx_disk_gb: float = 0.0  # filled from the weights arithmetic
    notes: list[str] = Field(default_factory=list)
    sources: dict[str, str] = Field(default_factory=dict)  # field -> config field, model card, or "estimate: ..."
    checked: dt.date  # when its figures were last read against their sources
    checked_fields: dict[str, dt.date] = Field(default_factory=dict)  # fields read on another day

    @model_validator(mode="after")
    def _towers_from_config(self) -> ModelProfile:
        if self.vision_tower is not None:
            self.towers = {**self.towers, "vision": self.vision_tower.params(self.hidden_size) / 1e9}
        if self.audio_tower is not None:
            self.towers = {**self.towers, "audio": self.audio_tower.params(self.hidden_size) / 1e9}
        return self

    @property
    def family(self) -> str:
        return self.base or self.name

    @property
    def embedding_params_b(self) -> float:
        """Token embeddings (vocab_size x hidden_size, tied to the LM head) plus per-layer embeddings
        (num_hidden_layers x hidden_size_per_layer_input x vocab_size_per_layer_input), from config.json."""
        per_layer = self.layers * self.per_layer_input_size * self.vocab_size_per_layer_input
        return (self.vocab_size * self.hidden_size + per_layer) / 1e9

    def loaded_towers(self, limit_mm_per_prompt: dict[str, int] | None = None) -> dict[str, float]:
        """The towers vLLM builds: all of them, unless --limit-mm-per-prompt zeroes every modality of one."""
        limits = limit_mm_per_prompt or {}
        return {
            name: params
            for name, params in self.towers.items()
            if not all(limits.get(mod, 1) == 0 for mod in TOWER_MODALITIES.get(name, frozenset({name})))
        }

    @property
    def unquantized_params_b(self) -> float:
        """Parameters every build keeps in bf16: embeddings and towers. For the 26B/31B, gemma4_mm.py itself leaves
        the towers unquantised: a method that needs dimensions divisible by 64 (Marlin, FP8) gets no tower quant
        config, and the vision tower's intermediate_size 4304 is not. For E2B/E4B (vision 768 / 3072, divisible)
        gemma4_mm.py hands the checkpoint's quant config to the vision and audio towers and embed_vision /
        embed_audio, so what stays bf16 is what the checkpoint's compressed-tensors `ignore` list names: the towers
        and the multimodal embedders, as Gemma 4 W4A16 builds report for Google's QAT checkpoints (catalog.yaml
        gemma-4-e4b `sources.audio_tower`)."""
        return self.embedding_params_b + sum(self.towers.values())

    def layer_types(self) -> list[str]:
        """ "full" or "sliding" per layer, as config.json's layer_types lists them."""
        n = self.full_attention_every
        return ["full" if (i + 1) % n == 0 else "sliding" for i in range(self.layers)]

    def kv_owning_layer_types(self) -> list[str]:
        """Layer types of the layers that own a KV cache (KV-shared layers at the end own none)."""
        return self.layer_types()[: self.layers - self.kv_shared_layers]


class CloudRunLimits(BaseModel):
    min_cpu: int
    min_memory_gib: int
    max_memory_gib: int
    memory_steps_gib: list[int]


class GpuProfile(BaseModel):
    checked: dt.date
    sources: dict[str, str] = Field(default_factory=dict)
    name: str  # as Cloud Run spells it (nvidia-l4) or a comparison name (a100-80gb)
    display: str
    aliases: list[str] = Field(default_factory=list)
    memory_gb: float  # marketing size
    memory_gib: float  # what CUDA reports as total: vLLM's budget is this x utilisation
    bandwidth_gb_s: float
    compute_capability: float
    bf16: bool
    fp8: bool
    price_per_hour_usd: float = 0.0  # Cloud Run GPUs: filled from skills/data/prices.yaml (GPU only)
    price_includes_host: bool  # comparison clouds quote an all-in price
    price_source: str = ""
    available_on_cloud_run: bool
    platform: str = "Cloud Run"  # where this GPU is offered; only Cloud Run GPUs can be deployed to
    launch_stage: Literal["GA", "BETA"] = "GA"  # a Preview Cloud Run GPU needs the service's BETA launch stage
    cloud_run: CloudRunLimits | None = None

    @model_validator(mode="after")
    def _platform(self) -> GpuProfile:
        if self.available_on_cloud_run != (self.platform == "Cloud Run"):
            raise ValueError(f"GPU {self.name}: available_on_cloud_run must match platform {self.platform!r}")
        if self.available_on_cloud_run and self.cloud_run is None:
            raise ValueError(f"GPU {self.name}: a Cloud Run GPU needs its cloud_run limits")
        return self

    @property
    def label(self) -> str:
        """The name as offered to users: another platform's GPU always says which platform."""
        return self.name if self.available_on_cloud_run else f"{self.name} ({self.platform}, not Cloud Run)"


class CloudRunPrices(BaseModel):
    cpu_for_memory: dict[int, int]  # prices themselves: skills/data/prices.yaml


class FuseCalibration(BaseModel):
    model: str  # a catalog model whose load over GCS FUSE was reported
    load_s: float = Field(gt=0)


class PlannerConstants(BaseModel):
    runtime_overhead_gib: float
    cuda_graph_gib: float
    host_runtime_gib: float
    host_memory_margin: float
    gcs_fuse_calibration: FuseCalibration
    container_start_s: float
    compile_s: float
    eager_compile_s: float
    offload_gb_s: float
    decode_efficiency: float
    kv_block_tokens: int
    max_num_batched_tokens: int
    min_useful_max_model_len: int
    cloud_run: CloudRunPrices
    sources: dict[str, str] = Field(default_factory=dict)
    checked: dt.date
    checked_fields: dict[str, dt.date] = Field(default_factory=dict)


class Catalog(BaseModel):
    planner: PlannerConstants
    quantizations: dict[str, QuantProfile]
    kv_dtypes: dict[str, int]
    models: dict[str, ModelProfile]
    gpus: dict[str, GpuProfile]

    def model(self, name: str) -> ModelProfile:
        return self.models[_lookup(name, self.models, "model", "gemma-sre fit --help or /gemma models")]

    def gpu(self, name: str) -> GpuProfile:
        return self.gpus[_lookup(name, self.gpus, "GPU", "/gemma models")]

    def weights_gb(self, m: ModelProfile, limit_mm_per_prompt: dict[str, int] | None = None) -> float:
        """Weights vLLM loads onto the GPU (GB): the decoder's quantised params x bytes/param, plus embeddings and
        the towers it builds in bf16 (a tower skipped by --limit-mm-per-prompt costs nothing)."""
        q = self.quantizations[m.quantization]
        quantised = max(m.params_b - m.unquantized_params_b, 0.0)
        towers = sum(m.loaded_towers(limit_mm_per_prompt).values())
        head = m.vocab_size * m.hidden_size / 1e9 if m.loads_stored_lm_head else 0.0  # bf16, loaded as stored
        return quantised * q.bytes_per_param + (m.embedding_params_b + towers + head) * 2.0

    @property
    def gcs_fuse_mb_s(self) -> float:
        """MB/s over GCS FUSE on the basis the planner applies it to: its weight figure for the calibration model."""
        cal = self.planner.gcs_fuse_calibration
        return self.weights_gb(self.model(cal.model)) * 1000 / cal.load_s

    def load_s(self, m: ModelProfile) -> float:
        """Seconds to read `m`'s weights over GCS FUSE, on the same basis the rate was derived on."""
        return self.weights_gb(m) * 1000 / self.gcs_fuse_mb_s

    def checkpoint_gb(self, m: ModelProfile) -> float:
        """The checkpoint's size (GB): every tower, plus an LM-head copy where the build stores one."""
        q = self.quantizations[m.quantization]
        stored = q.checkpoint_stores_lm_head and not m.loads_stored_lm_head  # else weights_gb counts it already
        head = m.vocab_size * m.hidden_size / 1e9 * 2.0 if stored else 0.0
        return self.weights_gb(m) + head


def _norm(s: str) -> str:
    s = s.strip().lower().replace("_", "-")
    return s.removeprefix("google/")


def _lookup(name: str, table: dict[str, Any], kind: str, where: str) -> str:
    key = _norm(name)
    index: dict[str, str] = {}
    for canonical, prof in table.items():
        index[_norm(canonical)] = canonical
        for alias in prof.aliases:
            index[_norm(alias)] = canonical
        repo = getattr(prof, "hf_repo", None)
        if repo:
            index[_norm(repo)] = canonical
        if canonical.startswith("nvidia-"):
            index[canonical.removeprefix("nvidia-")] = canonical
    if key in index:
        return index[key]
    # Names that contain (or are contained in) what was typed first, then difflib's close matches.
    contained = sorted((k for k in index if len(k) >= 3 and (k in key or key in k)), key=len, reverse=True)
    close = difflib.get_close_matches(key, list(index), n=5, cutoff=0.5)
    suggestions = list(dict.fromkeys(index[c] for c in [*contained, *close]))
    known = ", ".join(table)
    hint = f"Did you mean {' or '.join(f'`{s}`' for s in suggestions[:3])}? " if suggestions else ""
    raise InvalidInput(f"Unknown {kind} `{name}`.", f"{hint}Known {kind}s: {known} (see {where}).")


def _expand_variants(raw_models: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, spec in raw_models.items():
        spec = dict(spec)
        base = spec.get("base")
        if base:
            if base not in raw_models or raw_models[base].get("base"):
                raise ValueError(f"model {name}: base {base!r} must be a catalog model without its own base")
            merged = {k: v for k, v in raw_models[base].items() if k not in {"aliases", "hf_repo", "notes"}}
            merged.update(spec)
            merged["notes"] = [*raw_models[base].get("notes", []), *spec.get("notes", [])]
            merged["sources"] = {**raw_models[base].get("sources", {}), **spec.get("sources", {})}
            spec = merged
        spec["name"] = name
        out[name] = spec
    return out


def parse_catalog(data: dict[str, Any]) -> Catalog:
    """Validate a catalog document (the YAML's content); raises ValueError with the offending entry."""
    try:
        models = _expand_variants(data.get("models") or {})
        gpus = {n: {**g, "name": n} for n, g in (data.get("gpus") or {}).items()}
        cat = Catalog.model_validate({**data, "models": models, "gpus": gpus})
    except ValidationError as exc:
        raise ValueError(f"invalid catalog: {exc}") from exc
    _price_cloud_run_gpus(cat)
    for m in cat.models.values():
        if m.quantization not in cat.quantizations:
            raise ValueError(f"model {m.name}: unknown quantization {m.quantization}")
        m.approx_disk_gb = round(cat.checkpoint_gb(m), 1)
    return cat


def _price_cloud_run_gpus(cat: Catalog) -> None:
    """A Cloud Run GPU's $/h is the price table's (default region, no zonal redundancy, as the bot deploys); an
    Azure Container Apps GPU's is its serverless profile's replica price (skills/capacity/aca_prices.py), so the
    catalog keeps no second price for either."""
    from skills.capacity.aca_catalog import load_aca_catalog
    from skills.capacity.aca_prices import aca_price
    from skills.capacity.prices import load_prices

    table = load_prices()
    aca = load_aca_catalog()
    for g in cat.gpus.values():
        if g.platform == ACA_PLATFORM:
            prof = aca.default_profile_for(g.name)
            if prof is None:
                raise ValueError(f"GPU {g.name}: no Azure Container Apps profile in skills/data/aca.yaml")
            price = aca_price(prof.type, catalog=aca)
            if price.per_replica_usd_per_hour is None:
                raise ValueError(f"GPU {g.name}: {prof.type} has no price in skills/data/aca.yaml")
            g.price_per_hour_usd = price.per_replica_usd_per_hour
            g.price_source = f"Azure Container Apps {prof.type}, {price.describe()}"
            continue
        if not g.available_on_cloud_run:
            continue
        if g.name not in table.gpus:
            raise ValueError(f"GPU {g.name}: no Cloud Run price in skills/data/prices.yaml")
        rate = table.gpus[g.name]["1"].no_zonal_redundancy
        g.price_per_hour_usd = rate.value * 3600
        g.price_source = f"Cloud Run Tier 1, no zonal redundancy, {rate.source}, checked {rate.checked.isoformat()}"


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The packaged catalog, parsed once per process."""
    text = resources.files("skills").joinpath("data/catalog.yaml").read_text(encoding="utf-8")
    return parse_catalog(yaml.safe_load(text))

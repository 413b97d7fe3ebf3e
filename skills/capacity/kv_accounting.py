"""vLLM's KV-cache accounting, re-done in plain Python so the planner predicts what vLLM prints at start-up.

Followed (read, not copied; no vLLM import at run time), from vllm-project/vllm main-branch snapshots as the
public-code index stores them (it records commits, not release tags, so no vX.Y is claimed here):
  - vllm/v1/kv_cache_interface.py (commit 001cabc1): AttentionSpec page size = 2 (K and V) x block_size x
    kv_heads x head_size x dtype bytes; FullAttentionSpec.max_memory_usage_bytes = cdiv(max_model_len, block)
    pages; SlidingWindowSpec reserves cdiv(min(window - 1 + in-flight tokens, max_model_len), block) + 1 pages
    per request (the in-flight tokens are --max-num-batched-tokens, times 2 where async scheduling overlaps
    batches: tests/v1/core/test_kv_cache_utils.py pins async_scheduling=False for the 1x case).
  - vllm/v1/core/kv_cache_utils.py (commit 001cabc1): get_kv_cache_groups (uniform spec -> one group; one
    attention type with different sizes -> one "uniform type" group; otherwise unify_kv_cache_spec_page_size
    then _get_kv_cache_groups_uniform_page_size: groups of `min layers per type` layers, max if < 1.5 x min),
    get_kv_cache_config_from_groups / get_num_blocks (available // page_size // group_size),
    get_max_concurrency_for_kv_cache_config, _max_memory_usage_bytes_from_groups (the "can it serve one
    max-model-len request" check) and _estimate_max_model_len_from_groups (binary search).
  - The start-up line "GPU KV cache size: N tokens": older servers print num_blocks // groups x min block size
    (kv_cache_utils._report_kv_cache_config at 001cabc1, "legacy"); newer ones print int(max_concurrency x
    max_model_len) (get_kv_cache_capacity, tests/v1/core/test_kv_cache_utils.py at commit 002f10e0; vLLM PR
    #38364 "Fix incorrect KV cache log output"), the figure they also expose as cache_config_info's
    kv_cache_size_tokens ("capacity"). "Maximum concurrency for L tokens per request: X.XXx" is the same in both.
  - How Gemma 4 layers map to specs: vllm/model_executor/models/gemma4.py (commit 001cabc1): sliding layers use
    head_dim / num_key_value_heads; full layers use global_head_dim and, with attention_k_eq_v, the
    num_global_key_value_heads (K is loaded into both K and V slots, so V still takes cache space); the last
    num_kv_shared_layers layers reuse an earlier layer's cache and own none.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Literal

ReportFormula = Literal["capacity", "legacy"]


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Limits:
    """The scheduler settings the accounting depends on."""

    max_model_len: int
    max_num_batched_tokens: int
    concurrent_batches: int = 1  # 2 with async scheduling on versions that count overlapping batches

    @property
    def in_flight_tokens(self) -> int:
        return self.max_num_batched_tokens * self.concurrent_batches


@dataclass(frozen=True)
class AttentionSpec:
    """One layer's KV cache (vLLM's FullAttentionSpec / SlidingWindowSpec)."""

    block_size: int
    num_kv_heads: int
    head_size: int
    dtype_bytes: int
    sliding_window: int | None = None  # None: full attention

    @property
    def kind(self) -> str:
        return "full" if self.sliding_window is None else f"sliding{self.sliding_window}"

    @property
    def page_size_bytes(self) -> int:
        return 2 * self.block_size * self.num_kv_heads * self.head_size * self.dtype_bytes

    def max_memory_usage_bytes(self, limits: Limits) -> int:
        if self.sliding_window is None:
            return cdiv(limits.max_model_len, self.block_size) * self.page_size_bytes
        tokens = min(self.sliding_window - 1 + limits.in_flight_tokens, limits.max_model_len)
        # +1: the window need not start at a block boundary.
        return (cdiv(tokens, self.block_size) + 1) * self.page_size_bytes

    def with_block_size(self, block_size: int) -> AttentionSpec:
        return replace(self, block_size=block_size)


@dataclass(frozen=True)
class UniformTypeSpec:
    """All layers share one attention type but not one size (vLLM's UniformTypeKVCacheSpecs): one group."""

    specs: dict[str, AttentionSpec]

    @property
    def block_size(self) -> int:
        return next(iter(self.specs.values())).block_size

    @property
    def page_size_bytes(self) -> int:
        return sum(s.page_size_bytes for s in self.specs.values())

    def max_memory_usage_bytes(self, limits: Limits) -> int:
        return sum(s.max_memory_usage_bytes(limits) for s in self.specs.values())


Spec = AttentionSpec | UniformTypeSpec


@dataclass(frozen=True)
class KVCacheGroup:
    layer_names: list[str]
    spec: Spec


@dataclass(frozen=True)
class KVCacheConfig:
    num_blocks: int
    groups: list[KVCacheGroup]
    tensors: list[tuple[int, list[str]]]  # (bytes, layers sharing the tensor)


def is_uniform(specs: dict[str, AttentionSpec]) -> bool:
    return len(set(specs.values())) <= 1


def _uniform_type(specs: dict[str, AttentionSpec]) -> UniformTypeSpec | None:
    """One attention type and one block size (all full, or all sliding with one window): one group."""
    values = list(specs.values())
    if len({s.sliding_window for s in values}) == 1 and len({s.block_size for s in values}) == 1:
        return UniformTypeSpec(dict(specs))
    return None


def unify_page_size(specs: dict[str, AttentionSpec]) -> dict[str, AttentionSpec]:
    """Raise smaller pages to the largest by growing their block size (vLLM's unify_kv_cache_spec_page_size)."""
    sizes = {s.page_size_bytes for s in specs.values()}
    if len(sizes) <= 1:
        return dict(specs)
    biggest = max(sizes)
    out: dict[str, AttentionSpec] = {}
    for name, spec in specs.items():
        if biggest % spec.page_size_bytes:
            raise ValueError("page sizes cannot be unified: the largest is not a multiple of every other")
        out[name] = spec.with_block_size(spec.block_size * (biggest // spec.page_size_bytes))
    return out


def _groups_uniform_page_size(specs: dict[str, AttentionSpec]) -> list[KVCacheGroup]:
    same: dict[AttentionSpec, list[str]] = defaultdict(list)
    for name, spec in specs.items():
        same[spec].append(name)
    smallest = min(len(v) for v in same.values())
    largest = max(len(v) for v in same.values())
    group_size = largest if largest < smallest * 1.5 else smallest
    groups: list[KVCacheGroup] = []
    for spec, layers in same.items():
        n = cdiv(len(layers), group_size)
        # layers[i::n] (not consecutive slices) so pipeline stages pad evenly, as vLLM does.
        groups += [KVCacheGroup(layers[i::n], spec) for i in range(n)]
    return groups


def get_kv_cache_groups(specs: dict[str, AttentionSpec], hybrid_manager: bool = True) -> list[KVCacheGroup]:
    """Split layers into KV-cache groups. Without the hybrid manager, sliding layers count as full ones."""
    if not specs:
        return []
    if not hybrid_manager and not is_uniform(specs) and _uniform_type(specs) is None:
        specs = {n: replace(s, sliding_window=None) for n, s in specs.items()}
    if is_uniform(specs):
        return [KVCacheGroup(list(specs), next(iter(specs.values())))]
    uniform = _uniform_type(specs)
    if uniform is not None:
        return [KVCacheGroup(list(specs), uniform)]
    return _groups_uniform_page_size(unify_page_size(specs))


def _page_size(groups: list[KVCacheGroup]) -> int:
    sizes = {g.spec.page_size_bytes for g in groups}
    if len(sizes) != 1:
        raise ValueError("KV-cache groups must share one page size")
    return sizes.pop()


def bytes_per_block(groups: list[KVCacheGroup]) -> int:
    """What one block of the shared pool costs across the layers that share it."""
    if len(groups) == 1 and isinstance(groups[0].spec, UniformTypeSpec):
        return groups[0].spec.page_size_bytes
    return _page_size(groups) * max(len(g.layer_names) for g in groups)


def kv_cache_config(groups: list[KVCacheGroup], available_bytes: int) -> KVCacheConfig:
    """Blocks and tensors for `available_bytes` (vLLM's get_kv_cache_config_from_groups)."""
    if not groups:
        return KVCacheConfig(1, [], [])
    num_blocks = max(int(available_bytes // bytes_per_block(groups)), 0)
    if len(groups) == 1 and isinstance(groups[0].spec, UniformTypeSpec):
        per_layer = groups[0].spec.specs
        tensors = [(per_layer[n].page_size_bytes * num_blocks, [n]) for n in groups[0].layer_names]
    else:
        page = _page_size(groups)
        size = max(len(g.layer_names) for g in groups)
        tensors = [
            (page * num_blocks, [g.layer_names[i] for g in groups if i < len(g.layer_names)]) for i in range(size)
        ]
    return KVCacheConfig(num_blocks, groups, tensors)


def blocks_per_request(groups: list[KVCacheGroup], limits: Limits) -> int:
    """Pool blocks one max-model-len request takes: each group's pages cost whole pool blocks (a uniform-type
    group's layers all take their page from the same block index, so its aggregate memory / aggregate page)."""
    return sum(cdiv(g.spec.max_memory_usage_bytes(limits), g.spec.page_size_bytes) for g in groups)


def max_concurrency(config: KVCacheConfig, limits: Limits) -> float:
    """vLLM's "Maximum concurrency for L tokens per request" figure."""
    if not config.groups:
        return 0.0
    return config.num_blocks / blocks_per_request(config.groups, limits)


def reported_tokens(config: KVCacheConfig, limits: Limits, formula: ReportFormula = "capacity") -> int:
    """The N in "GPU KV cache size: N tokens" (see the module docstring for the two formulas)."""
    if not config.groups:
        return 0
    if formula == "legacy":
        return config.num_blocks // len(config.groups) * min(g.spec.block_size for g in config.groups)
    return int(max_concurrency(config, limits) * limits.max_model_len)


def needed_bytes(groups: list[KVCacheGroup], limits: Limits) -> int:
    """KV bytes one max-model-len request needs; vLLM refuses to start when the cache is smaller."""
    if not groups:
        return 0
    if len(groups) == 1 and isinstance(groups[0].spec, UniformTypeSpec):
        return groups[0].spec.max_memory_usage_bytes(limits)  # per-layer sums, as vLLM checks this case
    return blocks_per_request(groups, limits) * bytes_per_block(groups)


def estimate_max_model_len(groups: list[KVCacheGroup], limits: Limits, available_bytes: int) -> int:
    """Largest max-model-len whose single request fits (binary search, as vLLM does); 0 if none."""

    def fits(length: int) -> bool:
        return needed_bytes(groups, replace(limits, max_model_len=length)) <= available_bytes

    if not fits(1):
        return 0
    lo, hi, best = 1, limits.max_model_len, 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(mid):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def startup_lines(config: KVCacheConfig, limits: Limits, formula: ReportFormula = "capacity") -> list[str]:
    """The two lines vLLM logs once the cache is sized, formatted as vLLM formats them."""
    return [
        f"GPU KV cache size: {reported_tokens(config, limits, formula):,} tokens",
        f"Maximum concurrency for {limits.max_model_len:,} tokens per request: {max_concurrency(config, limits):.2f}x",
    ]

"""vLLM's own KV-cache utility test cases, ported to skills/capacity/kv_accounting.py.

Source: vllm-project/vllm tests/v1/core/test_kv_cache_utils.py (commit 002f10e0): test_get_kv_cache_config_one_worker,
test_is_kv_cache_spec_uniform, test_estimate_max_model_len, test_get_max_concurrency_for_kv_cache_config and the
hybrid-capacity assertions (get_kv_cache_capacity). Their helpers' defaults are kept: new_kv_cache_spec() is
block 16, 2 KV heads, head size 64, float32; new_sliding_window_spec() the same with window 1.
"""

from __future__ import annotations

import pytest

from skills.capacity import kv_accounting as kva

GIB = 1024**3


def full(block: int = 16, heads: int = 2, head: int = 64, dtype: int = 4) -> kva.AttentionSpec:
    return kva.AttentionSpec(block, heads, head, dtype)


def sliding(window: int = 1, block: int = 16, heads: int = 2, head: int = 64, dtype: int = 4) -> kva.AttentionSpec:
    return kva.AttentionSpec(block, heads, head, dtype, sliding_window=window)


LIMITS_16 = kva.Limits(max_model_len=16, max_num_batched_tokens=2048)
PER_LAYER = 16 * 2 * 64 * 4 * 2  # vLLM's mem_per_block_per_layer


def layouts(specs: dict[str, kva.AttentionSpec], memory: int) -> kva.KVCacheConfig:
    return kva.kv_cache_config(kva.get_kv_cache_groups(specs), memory)


def test_one_worker_all_full_is_one_group() -> None:
    cfg = layouts({"layer_1": full(), "layer_2": full()}, PER_LAYER * 2 * 32)
    assert cfg.num_blocks == 32
    assert [g.layer_names for g in cfg.groups] == [["layer_1", "layer_2"]]


def test_one_worker_all_sliding_is_one_group() -> None:
    cfg = layouts({"layer_1": sliding(), "layer_2": sliding()}, PER_LAYER * 2 * 32)
    assert cfg.num_blocks == 32 and len(cfg.groups) == 1


def test_one_worker_full_and_sliding_without_the_hybrid_manager() -> None:
    groups = kva.get_kv_cache_groups({"layer_1": full(), "layer_2": sliding()}, hybrid_manager=False)
    assert len(groups) == 1 and groups[0].spec == full()
    assert kva.kv_cache_config(groups, PER_LAYER * 2 * 32).num_blocks == 32


def test_one_worker_full_and_sliding_with_the_hybrid_manager() -> None:
    cfg = layouts({"layer_1": full(), "layer_2": sliding()}, PER_LAYER * 2 * 32)
    assert cfg.num_blocks == 64
    assert [g.layer_names for g in cfg.groups] == [["layer_1"], ["layer_2"]]
    assert cfg.tensors == [(PER_LAYER * 64, ["layer_1", "layer_2"])]


def test_two_full_four_sliding_two_layers_per_group() -> None:
    specs = {"layer_1": full(), "layer_2": full()} | {f"layer_{i}": sliding() for i in range(3, 7)}
    cfg = layouts(specs, PER_LAYER * 2 * 32)
    assert cfg.num_blocks == 32
    assert [g.layer_names for g in cfg.groups] == [
        ["layer_1", "layer_2"],
        ["layer_3", "layer_5"],
        ["layer_4", "layer_6"],
    ]


def test_three_full_seven_sliding_pads_to_nine() -> None:
    specs = {f"layer_{i}": full() for i in range(1, 4)} | {f"layer_{i}": sliding() for i in range(4, 11)}
    cfg = layouts(specs, PER_LAYER * 3 * 32)
    assert cfg.num_blocks == 32
    assert [g.layer_names for g in cfg.groups] == [
        ["layer_1", "layer_2", "layer_3"],
        ["layer_4", "layer_7", "layer_10"],
        ["layer_5", "layer_8"],
        ["layer_6", "layer_9"],
    ]


def test_six_full_five_sliding_pads_to_six_each() -> None:
    specs = {f"layer_{i}": full() for i in range(1, 7)} | {f"layer_{i}": sliding() for i in range(7, 12)}
    cfg = layouts(specs, PER_LAYER * 6 * 32)
    assert cfg.num_blocks == 32
    assert [len(g.layer_names) for g in cfg.groups] == [6, 5]


def test_is_uniform() -> None:
    assert kva.is_uniform({"a": full(heads=32), "b": full(heads=32)})
    assert not kva.is_uniform({"a": full(heads=32), "b": sliding(heads=32)})
    assert kva.is_uniform({"a": sliding(1, heads=32), "b": sliding(1, heads=32)})
    assert not kva.is_uniform({"a": sliding(1, heads=32), "b": sliding(2, heads=32)})


@pytest.mark.parametrize(("max_model_len", "want"), [(16385, 16384), (16383, 16383)])
def test_estimate_max_model_len(max_model_len: int, want: int) -> None:
    # 32 full layers, 32 KV heads x 128, fp16: 16384 tokens need 8 GiB.
    specs = {f"layer_{i}": full(heads=32, head=128, dtype=2) for i in range(32)}
    groups = kva.get_kv_cache_groups(specs)
    limits = kva.Limits(max_model_len=max_model_len, max_num_batched_tokens=32768)
    assert kva.estimate_max_model_len(groups, limits, 8 * GIB) == want


LIMITS_QWEN = kva.Limits(max_model_len=16384, max_num_batched_tokens=1024)  # sync scheduling, as vLLM pins
FULL_QWEN = full(heads=32, head=128, dtype=2)
SLIDING_QWEN = sliding(1024, heads=32, head=128, dtype=2)


def test_max_concurrency_full_attention() -> None:
    cfg = kva.KVCacheConfig(int(1024 * 1.5), [kva.KVCacheGroup([f"l{i}" for i in range(32)], FULL_QWEN)], [])
    assert kva.max_concurrency(cfg, LIMITS_QWEN) == 1.5


def test_max_concurrency_sliding_window() -> None:
    # window 1024 + 1024 batched tokens: cdiv(2047, 16) + 1 = 129 blocks per request.
    cfg = kva.KVCacheConfig(129 * 3, [kva.KVCacheGroup([f"l{i}" for i in range(32)], SLIDING_QWEN)], [])
    assert kva.max_concurrency(cfg, LIMITS_QWEN) == 3


def test_max_concurrency_and_capacity_of_a_hybrid_model() -> None:
    groups = [
        kva.KVCacheGroup([f"l{i}" for i in range(32)], FULL_QWEN),
        kva.KVCacheGroup([f"l{i}" for i in range(32, 64)], SLIDING_QWEN),
    ]
    cfg = kva.KVCacheConfig((1024 + 129) * 3, groups, [])
    assert kva.max_concurrency(cfg, LIMITS_QWEN) == 3
    assert kva.reported_tokens(cfg, LIMITS_QWEN) == 3 * 16384  # get_kv_cache_capacity
    # The older log line divides the pool evenly between groups instead.
    assert kva.reported_tokens(cfg, LIMITS_QWEN, "legacy") == (1153 * 3) // 2 * 16


def test_max_concurrency_with_unequal_groups() -> None:
    groups = [
        kva.KVCacheGroup([f"l{i}" for i in range(32)], FULL_QWEN),
        kva.KVCacheGroup(["l32", "l33"], SLIDING_QWEN),
    ]
    assert kva.max_concurrency(kva.KVCacheConfig(1153 * 3, groups, []), LIMITS_QWEN) == 3


def test_max_concurrency_of_a_uniform_type_group() -> None:
    uniform = kva.UniformTypeSpec({f"l{i}": FULL_QWEN for i in range(4)})
    groups = [kva.KVCacheGroup([f"l{i}" for i in range(4)], uniform), kva.KVCacheGroup(["l4", "l5"], SLIDING_QWEN)]
    assert kva.max_concurrency(kva.KVCacheConfig(1153 * 3, groups, []), LIMITS_QWEN) == 3


def test_unify_page_size_grows_the_smaller_block() -> None:
    specs = {"a": full(heads=2, head=512, dtype=2), "b": sliding(8, heads=8, head=256, dtype=2)}
    unified = kva.unify_page_size(specs)
    assert unified["a"].block_size == 32 and unified["b"].block_size == 16
    assert unified["a"].page_size_bytes == unified["b"].page_size_bytes
    with pytest.raises(ValueError):
        kva.unify_page_size({"a": full(heads=3), "b": full(heads=2)})


def test_async_scheduling_doubles_the_sliding_reservation() -> None:
    sync = kva.Limits(max_model_len=65536, max_num_batched_tokens=4096)
    overlapped = kva.Limits(max_model_len=65536, max_num_batched_tokens=4096, concurrent_batches=2)
    spec = sliding(1024, block=16)
    assert spec.max_memory_usage_bytes(sync) == (kva.cdiv(1023 + 4096, 16) + 1) * spec.page_size_bytes
    assert spec.max_memory_usage_bytes(overlapped) == (kva.cdiv(1023 + 8192, 16) + 1) * spec.page_size_bytes


def test_startup_lines_are_formatted_as_vllm_prints_them() -> None:
    cfg = kva.KVCacheConfig(1153 * 3, [kva.KVCacheGroup(["a"], FULL_QWEN), kva.KVCacheGroup(["b"], SLIDING_QWEN)], [])
    assert kva.startup_lines(cfg, LIMITS_QWEN) == [
        "GPU KV cache size: 49,152 tokens",
        "Maximum concurrency for 16,384 tokens per request: 3.00x",
    ]

"""KV accounting per vLLM release (skills/data/vllm_images.yaml `accounting`), with vLLM's own cases ported.

Sources (checked 2026-11-27):
  - vllm/v1/kv_cache_interface.py at 001cabc1 / bc8282e6: SlidingWindowSpec.max_memory_usage_bytes =
    (cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), block) + 1) pages; its comment's example:
    block 4, window 4 -> "two blocks [XXCD] [EF]".
  - vllm-project/vllm issue #49878 (v0.25.1 -> v0.26, Gemma 4 31B, bf16 KV, 50 sliding + 10 full layers, page 256 KiB,
    max_num_batched_tokens 32768): one request needed (8192 + 5 x 2113) pages = 45.79 GiB before, and
    (8192 + 5 x 4161) = 70.79 GiB after PR #47728 counted both async batches.
"""

from __future__ import annotations

import pytest

from skills.capacity import kv_accounting as kva
from skills.capacity.catalog import load_catalog
from skills.capacity.fit import FitRequest, check_fit, layer_specs
from skills.capacity.image_compat import load_image_data, version
from skills.capacity.release import assumed_release
from skills.errors import InvalidInput

GIB = 1024**3


def test_each_release_row_names_its_sources_and_date() -> None:
    data = load_image_data()
    for row in data.accounting:
        assert all(s in data.sources for s in row.sources), row
        assert row.checked.isoformat() in ("2026-11-27", "2026-12-05")  # 0.20.x split on 2026-12-05 (issue 50)
        assert row.async_scheduling_default  # on by default since v0.14.0
    defaults = {r.from_: r.gpu_memory_utilization_default for r in data.accounting}
    assert defaults == {"0.19.0": 0.9, "0.20.0": 0.92, "0.21.0": 0.92, "0.26.0": 0.92}  # PR #38284: 0.9 -> 0.92


@pytest.mark.parametrize(
    ("release", "batches"),
    [("0.19.1", 1), ("0.23.0", 1), ("0.24.0", 1), ("0.25.1", 1), ("0.26.0", 2), ("0.28.1", 2)],
)
def test_in_flight_batches_a_sliding_window_layer_reserves_for(release: str, batches: int) -> None:
    row = load_image_data().accounting_for(version(release))
    assert row.concurrent_batches() == batches
    assert row.concurrent_batches(async_scheduling=False) == 1  # --no-async-scheduling: one batch in flight


def test_a_release_older_than_the_table_is_refused() -> None:
    with pytest.raises(InvalidInput, match="No KV accounting"):
        load_image_data().accounting_for(version("0.18.0"))


def test_sliding_window_spec_example_from_vllms_comment() -> None:
    # block 4, window 4, nothing batched beyond the window: min(4 - 1 + 1, len) = 4 tokens -> cdiv(4, 4) + 1 = 2
    spec = kva.AttentionSpec(4, 1, 1, 1, sliding_window=4)
    assert spec.max_memory_usage_bytes(kva.Limits(100, 1)) == 2 * spec.page_size_bytes
    # capped by max_model_len
    assert spec.max_memory_usage_bytes(kva.Limits(2, 4096)) == (1 + 1) * spec.page_size_bytes
    # async scheduling on v0.26+: twice the batched tokens
    assert spec.max_memory_usage_bytes(kva.Limits(10_000, 8, 2)) == (kva.cdiv(4 - 1 + 16, 4) + 1) * spec.page_size_bytes


@pytest.mark.parametrize(("batches", "gib", "pages"), [(1, 45.79, 18757), (2, 70.79, 28997)])
def test_gemma4_31b_one_request_as_vllm_issue_49878_counts_it(batches: int, gib: float, pages: int) -> None:
    cat = load_catalog()
    groups = kva.get_kv_cache_groups(layer_specs(cat, cat.model("gemma-4-31b"), "bf16"))
    assert [len(g.layer_names) for g in groups] == [10] * 6 and groups[0].spec.page_size_bytes == 256 * 1024
    limits = kva.Limits(max_model_len=262144, max_num_batched_tokens=32768, concurrent_batches=batches)
    assert kva.blocks_per_request(groups, limits) == pages
    assert round(kva.needed_bytes(groups, limits) / GIB, 2) == gib


def test_planner_follows_the_release_of_the_image_and_says_which() -> None:
    base = {"model": "gemma-4-26b-a4b-qat", "gpu": "nvidia-l4", "kv_cache_dtype": "fp8", "max_model_len": 16384}
    old = check_fit(FitRequest(**base, vllm_image="vllm/vllm-openai:v0.24.0-cu129"))
    new = check_fit(FitRequest(**base, vllm_image="vllm/vllm-openai:v0.26.0-cu129"))
    assert (old.vllm_release, new.vllm_release) == ("0.24.0", "0.26.0")
    assert new.max_concurrency < old.max_concurrency * 0.9  # sliding layers reserve 2 x 4096 in-flight tokens
    assert any("vLLM 0.26.0" in n and "2 x --max-num-batched-tokens" in n for n in new.notes)
    assert any("vLLM 0.24.0" in n and "requested" in n for n in old.notes)


def test_no_image_or_a_floating_tag_assumes_the_gpus_default_and_says_so() -> None:
    default = assumed_release("nvidia-l4", None)
    assert default.origin == "the default for nvidia-l4"
    assert load_image_data().images[default.image].default_for == ["nvidia-l4"]
    floating = assumed_release("nvidia-l4", "vllm/vllm-openai:latest")
    assert "names no release" in floating.origin and floating.release == default.release
    comparison = assumed_release("a100-80gb", None)
    assert comparison.origin == "the default for nvidia-l4"


@pytest.mark.parametrize(
    ("image", "util"), [("vllm/vllm-openai:v0.19.1", 0.9), ("vllm/vllm-openai:v0.25.1-cu129", 0.92)]
)
def test_a_service_without_the_utilization_flag_is_planned_at_its_releases_default(image: str, util: float) -> None:
    from skills.targets.cloud_run.plan_common import fit_for

    report = fit_for("gemma-4-12b-qat", {"gpu": "nvidia-l4", "vllm_image": image}, None)
    assert report.request.gpu_memory_utilization == util
    explicit = fit_for(
        "gemma-4-12b-qat", {"gpu": "nvidia-l4", "vllm_image": image, "gpu_memory_utilization": 0.85}, None
    )
    assert explicit.request.gpu_memory_utilization == 0.85


def test_v0_20_sizes_gemma4_kv_without_the_hybrid_manager_as_issue_43308_reports() -> None:
    """vllm#43308: Gemma 4 31B (AWQ) on an A100 80GB, same args and ~50 GB of KV memory: ~55k tokens on v0.20.0,
    ~525k on v0.21.0. The 0.20.x row sizes every layer at full length (the hybrid KV manager off for Gemma 4, an
    estimate resting on that report); v0.21.0 on sizes sliding-window layers by their window."""
    assert not load_image_data().accounting_for(version("0.20.2")).hybrid_kv_manager
    assert load_image_data().accounting_for(version("0.21.0")).hybrid_kv_manager
    req = dict(model="gemma-4-31b-qat", gpu="a100-80gb", max_model_len=32768, kv_cache_dtype="bf16")
    old = check_fit(FitRequest(**req, vllm_image="vllm/vllm-openai:v0.20.0-cu129"))
    new = check_fit(FitRequest(**req, vllm_image="vllm/vllm-openai:v0.21.0-cu129"))
    assert new.kv_cache_tokens > 3 * old.kv_cache_tokens, (old.kv_cache_tokens, new.kv_cache_tokens)
    assert any("vLLM 0.20.0" in n and "hybrid KV cache manager off" in n for n in old.notes), old.notes

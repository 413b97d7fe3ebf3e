"""Every number in the catalog's models and planner sections names its source (or says it is an estimate)."""

from __future__ import annotations

from importlib import resources
from typing import Any

import pytest
import yaml

from skills.capacity.catalog import load_catalog

RAW: dict[str, Any] = yaml.safe_load(resources.files("skills").joinpath("data/catalog.yaml").read_text())
NOT_NUMBERS = {"hf_repo", "config", "aliases", "base", "quantization", "vllm_args", "notes", "sources"}


def _numbers(entry: dict[str, Any]) -> list[str]:
    return [k for k, v in entry.items() if k not in NOT_NUMBERS and isinstance(v, (int, float, bool, dict))]


@pytest.mark.parametrize("name", sorted(RAW["models"]))
def test_every_model_number_has_a_source(name: str) -> None:
    entry = RAW["models"][name]
    sources = entry.get("sources", {})
    missing = [k for k in _numbers(entry) if not str(sources.get(k, "")).strip()]
    assert not missing, f"{name}: no source for {missing}"
    for field, src in sources.items():
        assert field in entry, f"{name}: source for a field it does not set: {field}"
        if src.startswith("estimate"):
            assert len(src.removeprefix("estimate:").strip()) > 10, f"{name}.{field}: say what the estimate rests on"


def test_base_models_name_their_config() -> None:
    for name, entry in RAW["models"].items():
        if "base" not in entry:
            assert entry["config"] == f"{entry['hf_repo']}/config.json", name
            config_fields = [k for k, v in entry["sources"].items() if v.startswith(("text_config.", "model_type"))]
            assert "layers" in config_fields and "full_kv_heads" in config_fields


def test_every_planner_number_has_a_source() -> None:
    planner = RAW["planner"]
    missing = [k for k in _numbers(planner) if k not in planner.get("sources", {})]
    assert not missing


def test_every_quantization_names_its_source() -> None:
    assert all(q.source for q in load_catalog().quantizations.values())


def test_a_number_without_a_source_fails(tmp_path: Any) -> None:
    entry = dict(RAW["models"]["gemma-4-12b"])
    entry["sources"] = {k: v for k, v in entry["sources"].items() if k != "full_head_dim"}
    assert "full_head_dim" in [k for k in _numbers(entry) if k not in entry["sources"]]


@pytest.mark.parametrize(
    ("model", "sliding", "full", "owning_sliding", "owning_full"),
    [
        ("gemma-4-e2b", 28, 7, 12, 3),  # last 20 layers share KV
        ("gemma-4-e4b", 35, 7, 20, 4),  # last 18 layers share KV
        ("gemma-4-12b", 40, 8, 40, 8),
        ("gemma-4-26b-a4b", 25, 5, 25, 5),
        ("gemma-4-31b", 50, 10, 50, 10),
    ],
)
def test_layer_pattern_from_the_configs(
    model: str, sliding: int, full: int, owning_sliding: int, owning_full: int
) -> None:
    m = load_catalog().model(model)
    kinds, owning = m.layer_types(), m.kv_owning_layer_types()
    assert (kinds.count("sliding"), kinds.count("full")) == (sliding, full)
    assert (owning.count("sliding"), owning.count("full")) == (owning_sliding, owning_full)

"""Every figure in the capacity data names its source (or says it is an estimate, and on what) and the date it was
checked: skills/data/catalog.yaml, field_measurements.yaml, prices.yaml (tests/test_prices.py) and
vllm_images.yaml's accounting rows (tests/test_release_accounting.py)."""

from __future__ import annotations

import datetime as dt
import re
from importlib import resources
from typing import Any

import pytest
import yaml

from skills.capacity.catalog import load_catalog

RAW: dict[str, Any] = yaml.safe_load(resources.files("skills").joinpath("data/catalog.yaml").read_text())
NOT_NUMBERS = {
    "hf_repo", "config", "aliases", "base", "quantization", "vllm_args", "notes", "sources", "checked", "checked_fields"
}  # fmt: skip
TODAY = dt.date(2026, 12, 5)  # the latest day a source was read (issue 50)
FITTED = re.compile(r"\b(fitted|set so|calibrat|tuned|chosen to match|reproduces? .* exactly)", re.IGNORECASE)


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


def undated(entry: dict[str, Any], inherited: dt.date | None = None) -> list[str]:
    """Figures of `entry` with no check date (its own `checked`, a `checked_fields` one, or its base's)."""
    checked = entry.get("checked", inherited)
    per_field = entry.get("checked_fields", {})
    problems = [f"checked_fields.{k} names a field the entry does not set" for k in per_field if k not in entry]
    for k in _numbers(entry):
        when = per_field.get(k, checked)
        if not isinstance(when, dt.date) or when > TODAY:
            problems.append(k)
    return problems


@pytest.mark.parametrize("name", sorted(RAW["models"]))
def test_every_model_figure_is_dated(name: str) -> None:
    entry = RAW["models"][name]
    base = RAW["models"].get(entry.get("base", ""), {})
    assert not undated(entry, base.get("checked")), name


def test_every_gpu_planner_and_quantization_figure_is_sourced_and_dated() -> None:
    for name, gpu in RAW["gpus"].items():
        assert not undated(gpu), name
        assert gpu["sources"].get("general") and gpu["sources"].get("memory_gib"), name
    assert not undated(RAW["planner"])
    for name, q in RAW["quantizations"].items():
        assert not undated(q) and q.get("source"), name


def test_an_undated_or_unsourced_figure_fails() -> None:
    entry = {k: v for k, v in RAW["models"]["gemma-4-31b"].items() if k != "checked"}
    assert "layers" in undated(entry) and "vision_tower" not in undated(entry)  # keeps its own date
    future = {**RAW["planner"], "checked": TODAY + dt.timedelta(days=1)}
    assert "compile_s" in undated(future)
    stray = {**RAW["planner"], "checked_fields": {"no_such_field": TODAY}}
    assert undated(stray)
    bad = dict(RAW["models"]["gemma-4-12b"])
    bad["sources"] = {k: v for k, v in bad["sources"].items() if k != "towers"}
    assert "towers" in [k for k in _numbers(bad) if k not in bad["sources"]]


def test_every_field_measurement_is_dated() -> None:
    raw = yaml.safe_load(resources.files("skills").joinpath("data/field_measurements.yaml").read_text())
    assert all(isinstance(m.get("checked"), dt.date) and m["checked"] <= TODAY for m in raw["measurements"])


def _all_sources() -> list[tuple[str, str]]:
    out = [(f"planner.{k}", v) for k, v in RAW["planner"]["sources"].items()]
    for name, m in RAW["models"].items():
        out += [(f"{name}.{k}", v) for k, v in m.get("sources", {}).items()]
    for name, q in RAW["quantizations"].items():
        out += [(f"quantizations.{name}.{k}", str(q[k])) for k in ("source", "checkpoint_source") if k in q]
    return out


def test_no_fitted_constant_is_left_unmarked() -> None:
    # A figure set to match a report is an estimate and must say so, with the report it rests on.
    unmarked = [k for k, v in _all_sources() if FITTED.search(v) and not v.strip().startswith("estimate")]
    assert not unmarked
    assert not any("kept in bf16 by the QAT checkpoint, set so" in v for _, v in _all_sources())


def test_vision_towers_are_counted_from_their_vision_config() -> None:
    """What vLLM's gemma4_mm.py builds for images and video (vision tower + embed_vision), counted from the
    configs' vision_config: ~0.57 B for the 26B/31B (the issue-29 primary-source figure), ~0.17 B for E2B/E4B.
    No catalog entry states a vision tower's size by hand."""
    cat = load_catalog()
    big = {n: cat.model(n).towers["vision"] for n in ("gemma-4-26b-a4b", "gemma-4-31b", "gemma-4-31b-qat")}
    assert all(0.565 < v < 0.58 for v in big.values()), big
    small = {n: cat.model(n).towers["vision"] for n in ("gemma-4-e2b", "gemma-4-e4b-qat")}
    assert all(0.16 < v < 0.175 for v in small.values()), small
    assert not any("vision" in (m.get("towers") or {}) for m in RAW["models"].values())
    # 26B: 24.65 B language model + the tower = the model card's 25.2 B, as the upstream model details split it.
    assert abs(25.2 - big["gemma-4-26b-a4b"] - 24.65) < 0.03


# Ids that public listings report as absent from the Hub (2026-11-27): Google publishes no FP8 Gemma 4 build and no
# compressed-tensors QAT build of the 26B-A4B. A catalog entry must never propose one again.
NOT_ON_THE_HUB = {
    "google/gemma-4-12B-it-fp8",
    "google/gemma-4-26B-A4B-it-fp8",
    "google/gemma-4-31B-it-fp8",
    "google/gemma-4-26B-A4B-it-qat-q4_0-w4a16-ct",
}
URL = re.compile(r"https://\S+")
DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")


def hf_repo_problems(entry: dict[str, Any]) -> list[str]:
    """Why an entry's checkpoint id is not sourced: its own `sources.hf_repo` (a variant does not inherit its base's)
    must name a URL, the date it was read (not in the future) and the id itself, exactly as the Hub spells it."""
    repo, src = entry.get("hf_repo", ""), str(entry.get("sources", {}).get("hf_repo", ""))
    problems = []
    if not repo:
        problems.append("no hf_repo")
    if repo in NOT_ON_THE_HUB or repo.lower() in {r.lower() for r in NOT_ON_THE_HUB}:
        problems.append(f"{repo} is not on the Hub")
    if not URL.search(src):
        problems.append("sources.hf_repo names no URL")
    dates = [dt.date.fromisoformat(d) for d in DATE.findall(src)]
    if not dates or any(d > TODAY for d in dates):
        problems.append("sources.hf_repo names no read date (or one in the future)")
    if repo and repo not in src:
        problems.append(f"sources.hf_repo does not name {repo}")
    return problems


@pytest.mark.parametrize("name", sorted(RAW["models"]))
def test_every_checkpoint_id_is_sourced(name: str) -> None:
    assert not hf_repo_problems(RAW["models"][name]), (name, hf_repo_problems(RAW["models"][name]))


def test_an_unsourced_or_absent_checkpoint_id_fails() -> None:
    good = RAW["models"]["gemma-4-26b-a4b-qat"]
    assert not hf_repo_problems(good)
    inherited = {k: v for k, v in good.items() if k != "sources"}  # a variant may not lean on its base's source
    assert "sources.hf_repo names no URL" in hf_repo_problems(inherited)
    undated_src = {**good, "sources": {"hf_repo": "https://huggingface.co/xbill9/gemma-4-26B-A4B-it-qat-q4_0-w4a16-ct"}}
    assert any("date" in p for p in hf_repo_problems(undated_src))
    stale = {**good, "hf_repo": "google/gemma-4-26B-A4B-it-fp8"}  # an id changed without its source
    assert {"google/gemma-4-26B-A4B-it-fp8 is not on the Hub"} <= set(hf_repo_problems(stale))
    assert any("does not name" in p for p in hf_repo_problems(stale))
    future = {**good, "sources": {"hf_repo": good["sources"]["hf_repo"].replace("2026-11-27", "2027-01-01")}}
    assert any("date" in p for p in hf_repo_problems(future))


def test_checkpoints_not_published_by_google_say_whose_they_are() -> None:
    """fit and deploy show a model's notes: a community build must say it is not Google's."""
    for name, m in load_catalog().models.items():
        owner = m.hf_repo.split("/", 1)[0]
        if owner != "google":
            assert any(owner in n and "not Google" in n for n in m.notes), name

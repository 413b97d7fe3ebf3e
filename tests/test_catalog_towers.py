"""The E2B/E4B audio tower, counted from config.json's audio_config (issue 29's known gap): its size, the bf16 it
loads in, and `--limit-mm-per-prompt '{"audio":0}'` taking it out of what `gemma-sre fit` reports.

Shapes (see skills/capacity/catalog.py AudioTower for the sources): Gemma4AudioConfig defaults hidden_size 1024,
12 layers, 8 heads (head_dim 128), subsampling_conv_channels [128, 32], conv_kernel_size 5, output_proj_dims 1536;
module shapes from transformers' modeling_gemma4.py Gemma4Audio* classes; embed_audio from vLLM's gemma4_mm.py.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from bot import cli_fit
from skills.capacity.catalog import load_catalog

GIB = 2**30

# The audio tower written out module by module (not AudioTower.params): h = 1024.
SUBSAMPLE = (
    1 * 128 * 3 * 3  # layer0.conv: Conv2d(1, 128, 3x3), no bias
    + 128  # layer0.norm: LayerNorm(128), no bias
    + 128 * 32 * 3 * 3  # layer1.conv: Conv2d(128, 32, 3x3), no bias
    + 32  # layer1.norm
    + (128 // 4) * 32 * 1024  # input_proj_linear: 1024 -> 1024, no bias
)
FEED_FORWARD = 1024 * 4096 + 4096 * 1024 + 2 * 1024  # ffw_layer_1, ffw_layer_2, pre/post RMSNorm
ATTENTION = 4 * 1024 * 1024 + 1024 * 1024 + 128  # q, k, v, post; relative_k_proj; per_dim_scale (head_dim)
LIGHT_CONV = 1024 * 2048 + 1024 * 1024 + 1024 * 5 + 2 * 1024  # linear_start, linear_end, depthwise conv, 2 norms
LAYER = 2 * FEED_FORWARD + ATTENTION + LIGHT_CONV + 3 * 1024  # + norm_pre_attn, norm_post_attn, norm_out
OUTPUT_PROJ = 1024 * 1536 + 1536  # output_proj: 1024 -> 1536 with bias
AUDIO_TOWER = SUBSAMPLE + 12 * LAYER + OUTPUT_PROJ


def embed_audio(text_hidden: int) -> int:
    return 1536 * text_hidden  # Gemma4MultimodalEmbedder.embedding_projection, no bias; its norm has no weight


def test_audio_tower_is_the_sum_of_its_sourced_modules() -> None:
    cat = load_catalog()
    expected = {
        "gemma-4-e2b": AUDIO_TOWER + embed_audio(1536),
        "gemma-4-e4b": AUDIO_TOWER + embed_audio(2560),
        "gemma-4-e4b-qat": AUDIO_TOWER + embed_audio(2560),  # inherits its base's audio_config
    }
    assert expected == {"gemma-4-e2b": 307_183_904, "gemma-4-e4b": 308_756_768, "gemma-4-e4b-qat": 308_756_768}
    for name, params in expected.items():
        assert cat.model(name).towers["audio"] * 1e9 == pytest.approx(params, abs=1), name


def test_only_checkpoints_with_an_audio_config_have_an_audio_tower() -> None:
    cat = load_catalog()
    with_audio = {n for n, m in cat.models.items() if "audio" in m.towers}
    assert with_audio == {"gemma-4-e2b", "gemma-4-e4b", "gemma-4-e4b-qat"}
    assert all(m.audio_tower is not None for n, m in cat.models.items() if n in with_audio)


def test_limit_mm_per_prompt_audio_zero_drops_only_the_audio_tower() -> None:
    m = load_catalog().model("gemma-4-e4b")
    assert set(m.loaded_towers()) == {"vision", "audio"}
    assert set(m.loaded_towers({"audio": 0})) == {"vision"}
    assert set(m.loaded_towers({"image": 0, "video": 0})) == {"audio"}
    assert m.loaded_towers({"image": 0, "video": 0, "audio": 0}) == {}
    assert set(m.loaded_towers({"audio": 1})) == {"vision", "audio"}


def test_qat_build_loads_the_audio_tower_in_bf16() -> None:
    # Counted with embeddings and the vision tower at 2 bytes a parameter, not at w4a16's 0.5625.
    cat = load_catalog()
    qat = cat.model("gemma-4-e4b-qat")
    assert qat.unquantized_params_b == pytest.approx(qat.embedding_params_b + 0.169330688 + 0.308756768)
    dropped_gb = cat.weights_gb(qat) - cat.weights_gb(qat, {"audio": 0})
    assert dropped_gb == pytest.approx(308_756_768 * 2 / 1e9)


def _fit_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="gemma-sre")
    cli_fit.register(parser.add_subparsers(dest="command", required=True))
    assert cli_fit.run(parser.parse_args(["fit", *argv, "--format", "json"])) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


@pytest.mark.parametrize("model", ["e4b", "e4b-qat"])
def test_gemma_sre_fit_e4b_on_l4_without_audio_frees_the_towers_bf16_bytes(
    model: str, capsys: pytest.CaptureFixture[str]
) -> None:
    full = _fit_json(capsys, model, "--gpu", "nvidia-l4")
    text = _fit_json(capsys, model, "--gpu", "nvidia-l4", "--limit-mm-per-prompt", '{"audio":0}')
    # 308,756,768 parameters x 2 bytes = 0.575 GiB off the weights; the KV cache gets it back
    assert full["weights_gib"] - text["weights_gib"] == pytest.approx(308_756_768 * 2 / GIB, abs=0.01)
    assert text["kv_cache_tokens"] > full["kv_cache_tokens"]
    assert text["request"]["limit_mm_per_prompt"] == {"audio": 0}
    assert full["verdict"] == text["verdict"] == "fits"


# Total-params cross-check: token + per-layer embeddings + the language model + vision tower + audio tower against
# the model cards' totals (5.1B E2B, 8B E4B, "with embeddings"). Language model from transformers'
# convert_gemma4_weights.py text configs @ 0f3f0632 and modeling_gemma4.py's Gemma4TextAttention / Gemma4TextMLP
# (q/o per layer; k/v only on layers that own their KV; gate/up/down with the double-wide MLP on E2B's KV-shared
# layers; per_layer_input_gate and per_layer_projection per layer; per_layer_model_projection); norms left out.
# Tolerance 0.07B: the cards round to 0.1B, and the checkpoint also stores the KV-shared layers' k/v projections
# (transformers drops them on load: 0.02B E2B, 0.055B E4B), which a card may count.
def language_model(h: int, layers: int, kv_heads: int, inter: int, shared: int, full_every: int, wide: bool) -> int:
    total = h * layers * 256  # per_layer_model_projection
    for i in range(layers):
        hd = 512 if (i + 1) % full_every == 0 else 256  # global_head_dim / head_dim
        owns_kv = i < layers - shared
        total += 2 * h * 8 * hd  # q_proj, o_proj (8 heads)
        total += 2 * h * kv_heads * hd if owns_kv else 0  # k_proj, v_proj
        total += 3 * h * inter * (2 if wide and not owns_kv else 1)  # gate, up, down
        total += 2 * h * 256  # per_layer_input_gate, per_layer_projection
    return total


@pytest.mark.parametrize(
    ("name", "lm", "card"),
    [
        ("gemma-4-e2b", language_model(1536, 35, 1, 6144, 20, 5, wide=True), 5.1),
        ("gemma-4-e4b", language_model(2560, 42, 2, 10240, 18, 6, wide=False), 8.0),
    ],
)
def test_model_card_total_is_embeddings_language_model_and_both_towers(name: str, lm: int, card: float) -> None:
    m = load_catalog().model(name)
    assert m.params_b == card
    counted = m.embedding_params_b + lm / 1e9 + m.towers["vision"] + m.towers["audio"]
    assert counted == pytest.approx(card, abs=0.07)
    # without the audio tower the sum falls short of the card by more than the rounding
    assert card - (counted - m.towers["audio"]) > 0.25

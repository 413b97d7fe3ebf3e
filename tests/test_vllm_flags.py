"""One model of the vLLM flags (skills/serving/vllm_flags.py): parse and render round trips, unknown flags kept,
`=` forms, malformed values refused, and the planner, renderer and diff agreeing on vLLM's defaults."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from skills.capacity.fit import FitRequest, check_fit
from skills.serving.profiles import load_profiles
from skills.serving.vllm_flags import VllmFlags, VllmFlagsError
from skills.targets.cloud_run.diff import diff_specs
from skills.targets.cloud_run.plan_deploy import plan_deploy
from skills.targets.cloud_run.render import DeployConfig, render_service, vllm_args
from tests.deploy_helpers import deploy_config

pytest_plugins = ["tests.deploy_fixtures"]


def _cfg(**kw: Any) -> DeployConfig:
    return deploy_config(**{"kv_cache_dtype": "auto", **kw})


# Azure Container Apps profiles are planned by their own target (skills/targets/aca), not Cloud Run's plan_deploy.
@pytest.mark.parametrize("profile", sorted(n for n, p in load_profiles().items() if p.target != "azure-container-apps"))
async def test_every_profile_round_trips(deps: Any, profile: str) -> None:
    plan = await plan_deploy(deps.runtime, deps.writes.env, {"profile": profile}, offline=True)
    assert plan.spec is not None
    args = plan.spec["template"]["containers"][0]["args"]
    flags = VllmFlags.parse(args)
    assert flags.to_args() == args  # the renderer's output is already in the one canonical form
    assert VllmFlags.parse(flags.to_args()) == flags
    assert flags.max_num_seqs == plan.spec["template"]["maxInstanceRequestConcurrency"]


def test_unknown_flags_survive_in_order() -> None:
    args = [
        "--model", "/mnt/models/x", "--swap-space", "8", "--max-model-len", "4096",
        "--disable-log-requests", "--limit-mm-per-prompt", '{"image": 0}', "--seed=7",
    ]  # fmt: skip
    flags = VllmFlags.parse(args)
    assert flags.max_model_len == 4096 and flags.model == "/mnt/models/x"
    assert flags.extra == [
        "--swap-space",
        "8",
        "--disable-log-requests",
        "--limit-mm-per-prompt",
        '{"image": 0}',
        "--seed=7",
    ]
    out = flags.with_(max_model_len=8192).to_args()
    assert out == ["--model", "/mnt/models/x", "--max-model-len", "8192", *flags.extra]
    assert VllmFlags.parse(out).extra == flags.extra


def test_equals_form_and_boolean_negation() -> None:
    flags = VllmFlags.parse(
        ["--max-model-len=8192", "--kv-cache-dtype=fp8", "--gpu-memory-utilization=0.85", "-tp", "2"]
    )
    assert (flags.max_model_len, flags.kv_cache_dtype, flags.gpu_memory_utilization) == (8192, "fp8", 0.85)
    assert flags.tensor_parallel_size == 2
    assert flags.to_args() == [
        "--max-model-len", "8192", "--gpu-memory-utilization", "0.85", "--kv-cache-dtype", "fp8",
        "--tensor-parallel-size", "2",
    ]  # fmt: skip
    assert VllmFlags.parse(["--enforce-eager", "--no-enforce-eager"]).enforce_eager is False  # last wins
    assert VllmFlags.parse(["--no-enable-chunked-prefill"]).to_args() == ["--no-enable-chunked-prefill"]
    # vLLM's human_readable_int: lower case decimal, upper case binary.
    assert VllmFlags.parse(["--max-model-len", "32k"]).max_model_len == 32000
    assert VllmFlags.parse(["--max-model-len", "32K"]).max_model_len == 32768


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--max-model-len", "lots"], "--max-model-len lots"),
        (["--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization 1.5"),
        (["--kv-cache-dtype", "fp4"], "--kv-cache-dtype fp4"),
        (["--max-num-seqs"], "`--max-num-seqs` needs a value"),
        (["--max-num-seqs", "--enforce-eager"], "`--max-num-seqs` needs a value"),
        (["--enforce-eager=true"], "takes no value"),
    ],
)
def test_malformed_values_are_refused_by_name(args: list[str], says: str) -> None:
    with pytest.raises(VllmFlagsError) as e:
        VllmFlags.parse(args)
    assert says in e.value.message
    assert VllmFlags.parse_or_none(args) is None


def test_defaults_are_written_only_when_they_differ() -> None:
    assert VllmFlags.parse(["--kv-cache-dtype", "auto", "--dtype", "auto", "--cpu-offload-gb", "0"]).to_args() == []
    assert VllmFlags(gpu_memory_utilization=0.9, tensor_parallel_size=1).to_args() == [
        "--gpu-memory-utilization",
        "0.9",
    ]


def test_fit_and_render_agree_on_kv_cache_auto() -> None:
    """Before the one model, fit left `--kv-cache-dtype auto` out and the renderer wrote it."""
    report = check_fit(FitRequest(model="gemma-4-12b-qat", gpu="nvidia-l4", max_model_len=32768, kv_cache_dtype="auto"))
    cfg = _cfg(
        max_model_len=report.request.max_model_len,
        max_num_seqs=report.request.max_num_seqs,
        max_num_batched_tokens=report.request.max_num_batched_tokens,
    )
    rendered = vllm_args(cfg)
    fit_flags, render_flags = VllmFlags.parse(report.vllm_args), VllmFlags.parse(rendered)
    for field in ("max_model_len", "gpu_memory_utilization", "kv_cache_dtype", "max_num_seqs", "quantization"):
        assert getattr(fit_flags, field) == getattr(render_flags, field), field
    assert ("--kv-cache-dtype" in rendered) == ("--kv-cache-dtype" in report.vllm_args)


def test_diff_shows_no_change_for_a_default_written_or_not() -> None:
    """A service running without `--kv-cache-dtype` (fit's args, deployed by hand) and one running with the
    old renderer's explicit `--kv-cache-dtype auto` are the same configuration: no change in a plan."""
    new = render_service(_cfg())
    args = new["template"]["containers"][0]["args"]
    bare = copy.deepcopy(new)
    bare["template"]["containers"][0]["args"] = [a for a in args if a != "--kv-cache-dtype"]  # no auto in it
    explicit = copy.deepcopy(new)
    explicit["template"]["containers"][0]["args"] = [*args, "--kv-cache-dtype", "auto"]
    assert diff_specs(bare, new) == []
    assert diff_specs(explicit, new) == []
    fp8 = render_service(_cfg(kv_cache_dtype="fp8"))
    assert [c.line() for c in diff_specs(explicit, fp8)] == ["+ template.containers[0].args --kv-cache-dtype: fp8"]

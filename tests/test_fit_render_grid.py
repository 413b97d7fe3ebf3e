"""fit, the renderer, the profiles and the deploy plan give one answer for max-model-len, KV dtype and
max-num-seqs (and the batched-token budget the KV accounting assumes), for every profile and a model x GPU grid."""

from __future__ import annotations

from typing import Any

import pytest

from skills.capacity.fit import FitRequest, check_fit, load_catalog
from skills.serving.profiles import load_profiles
from skills.targets.cloud_run.plan_deploy import plan_deploy

pytest_plugins = ["tests.deploy_fixtures"]

FLAGS = ("--max-model-len", "--kv-cache-dtype", "--max-num-seqs", "--max-num-batched-tokens")


def _flags(args: list[str]) -> dict[str, str]:
    # No default filled in: fit and the renderer write the same flags (skills/serving/vllm_flags.py's one rule).
    return {f: args[args.index(f) + 1] for f in FLAGS if f in args}


def _container(spec: dict[str, Any]) -> tuple[list[str], int]:
    tmpl = spec["template"]
    return tmpl["containers"][0]["args"], tmpl["maxInstanceRequestConcurrency"]


def _grid() -> list[dict[str, Any]]:
    cat = load_catalog()
    on_run = [g for g in cat.gpus.values() if g.available_on_cloud_run]
    cases: list[dict[str, Any]] = []
    for name, prof in load_profiles().items():  # each profile names its model: profiles x GPUs x overrides
        if prof.target == "azure-container-apps":  # planned by the ACA target, not Cloud Run's plan_deploy
            continue
        cases.append({"profile": name})
        for gpu in on_run:
            for extra in ({}, {"max_model_len": 8192, "kv_cache_dtype": "fp8", "max_num_seqs": 4}):
                cases.append({"profile": name, "gpu": gpu.name, **extra})
    return cases


@pytest.mark.parametrize("params", _grid(), ids=lambda p: "-".join(str(v) for v in p.values()))
async def test_one_answer_per_model_and_gpu(deps: Any, params: dict[str, Any]) -> None:
    profile = load_profiles()[params["profile"]]
    plan = await plan_deploy(deps.runtime, deps.writes.env, params, offline=True)
    assert plan.spec is not None
    args, concurrency = _container(plan.spec)
    rendered = _flags(args)
    o = profile.model_dump(exclude={"name", "description", "model"}, exclude_none=True) | params
    report = check_fit(
        FitRequest(
            model=profile.model,
            gpu=o["gpu"],
            max_model_len=o.get("max_model_len"),
            gpu_memory_utilization=o["gpu_memory_utilization"],
            kv_cache_dtype=o["kv_cache_dtype"],
            max_num_seqs=o.get("max_num_seqs"),
        )
    )
    assert rendered == _flags(report.vllm_args)
    assert concurrency == int(rendered["--max-num-seqs"]) == report.request.max_num_seqs
    assert int(rendered["--max-model-len"]) == report.request.max_model_len

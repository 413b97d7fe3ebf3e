"""Time per deploy plan: capacity check + render + diff against a running service + gcloud command.

Prints the median over many runs, and the share each step takes (render+diff vs the planner), in-process.
Then the whole deploy plan (skills/deploy/plan_builder.build_plan) without and with preflight, the four checks
answered by the stand-ins on 127.0.0.1 through the real clients: every check asked (cache off), and answered
from the short cache (the in-process store). Network time to the real Hub, Docker Hub and Google APIs is not in
these figures; each check's time limit (PREFLIGHT_TIMEOUT_S, 5 s) bounds it.
Usage: .venv/bin/python bench/plan_latency.py [RUNS]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from skills.capacity.fit import FitRequest, check_fit
from skills.targets.cloud_run.diff import diff_specs
from skills.targets.cloud_run.gcloud import deploy_command
from skills.targets.cloud_run.render import DeployConfig, probe_for, render_service


def _one(running: dict) -> tuple[float, float]:
    t0 = time.perf_counter()
    r = check_fit(FitRequest(model="gemma-4-26b-a4b-qat", gpu="nvidia-l4", max_model_len=16384, kv_cache_dtype="fp8"))
    t1 = time.perf_counter()
    cfg = DeployConfig(
        service="vllm-gemma4",
        profile="gemma4-26b-qat-l4",
        model=r.model.name,
        hf_repo=r.model.hf_repo,
        model_args=list(r.model.vllm_args),
        gpu=r.gpu.name,
        max_model_len=r.request.max_model_len or 16384,
        gpu_memory_utilization=r.request.gpu_memory_utilization,
        kv_cache_dtype=r.request.kv_cache_dtype,
        max_num_seqs=4,
        cpu=str(r.recommended_cpu),
        memory=f"{r.recommended_memory_gib}Gi",
        probe=probe_for(r.cold_start_s, budget_s=r.startup_budget_s),
        image="vllm/vllm-openai:v0.11.0",
        model_bucket="weights",
    )
    spec = render_service(cfg)
    diff_specs(running, spec)
    deploy_command("vllm-gemma4", spec, "us-central1", "proj")
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


class _NoService:
    async def get_service_spec(self, name: str) -> dict[str, Any] | None:
        return None


async def _whole_plans(runs: int) -> None:
    import fakeredis.aioredis

    from bot.adapters.preflight import make_preflight
    from bot.sandbox.preflight_standins import PreflightStandIns
    from bot.settings import load_settings
    from skills.deploy.plan_builder import build_plan
    from skills.targets.cloud_run.target import CloudRunTarget
    from skills.targets.env import DeployEnv

    env = DeployEnv(service="vllm-gemma4", region="europe-west1", project="bench")
    params = {"profile": "gemma4-12b-qat-l4"}
    standins = PreflightStandIns().start()
    try:
        base: dict[str, Any] = dict(
            google_cloud_project="bench", google_anonymous_credentials=True, **standins.settings_update()
        )
        store = fakeredis.aioredis.FakeRedis()
        sources = {
            "without preflight": None,
            "with preflight, every check asked": make_preflight(load_settings(**base, preflight_cache_s=0), store),
            "with preflight, from the short cache": make_preflight(load_settings(**base, preflight_cache_s=600), store),
        }
        for label, src in sources.items():
            times = []
            for i in range(runs + 5):
                t0 = time.perf_counter()
                plan = await build_plan("deploy", params, CloudRunTarget(_NoService()), env, preflight=src)  # type: ignore[arg-type]
                if i >= 5:  # the first few warm imports, clients and the cache
                    times.append(time.perf_counter() - t0)
            assert plan.blocked() == "", plan.blocked()
            print(
                f"whole deploy plan {label}: median {statistics.median(times) * 1e3:.2f} ms "
                f"(p95 {sorted(times)[int(len(times) * 0.95) - 1] * 1e3:.2f} ms) over {runs} plans"
            )
    finally:
        standins.close()


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    base = check_fit(FitRequest(model="gemma-4-12b-qat", gpu="nvidia-l4"))
    running = render_service(
        DeployConfig(
            service="vllm-gemma4",
            model=base.model.name,
            hf_repo=base.model.hf_repo,
            gpu="nvidia-l4",
            max_model_len=32768,
            gpu_memory_utilization=0.9,
            max_num_seqs=8,
            cpu="4",
            memory="16Gi",
            probe=probe_for(400),
            image="vllm/vllm-openai:v0.10.0",
            model_bucket="weights",
        )
    )
    for _ in range(20):  # warm caches (catalog load, imports)
        _one(running)
    fit_t, render_t = zip(*(_one(running) for _ in range(runs)), strict=True)
    total = [a + b for a, b in zip(fit_t, render_t, strict=True)]
    med = statistics.median(total)
    print(
        f"plan (fit + render + diff + gcloud): median {med * 1e3:.3f} ms over {runs} runs "
        f"(p95 {sorted(total)[int(runs * 0.95) - 1] * 1e3:.3f} ms)"
    )
    print(
        f"  capacity check: median {statistics.median(fit_t) * 1e3:.3f} ms "
        f"({statistics.median(fit_t) / med:.0%} of a plan)"
    )
    print(
        f"  render + diff + gcloud: median {statistics.median(render_t) * 1e3:.3f} ms "
        f"({statistics.median(render_t) / med:.0%} of a plan)"
    )
    print(f"  plans per second (one core): {1 / med:,.0f}")
    asyncio.run(_whole_plans(max(20, runs // 10)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

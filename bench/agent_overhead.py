"""The agent loop's own cost: time per step excluding the model's (and the tools') time, and tokens sent.

For every example scenario (the bundled bot/sandbox/data/scenarios, or the folder given), runs `/gemma analyze`'s agent
end to end against local stand-ins speaking the real wire protocols (scripted OpenAI-compatible model with
SSE streaming, Cloud Run Admin API, Cloud Logging API) through the real openai and Google clients. The model
investigates for three tool steps and then answers with a plan. Prints, per scenario:
- loop ms/step: the loop's own time (building requests, parsing calls, guards, redaction, truncation), i.e.
  total minus time inside the model call minus time inside tools; target < 5 ms a step;
- model ms/step: time inside the streamed call to the (instant) stand-in, as the same-run baseline;
- tokens sent per analysis (estimated, all requests) next to the raw log's tokens (what sending the logs
  themselves would cost), and their ratio.

    .venv/bin/python bench/agent_overhead.py [SCENARIO_DIR] [--runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.agent import Agent  # noqa: E402
from bot.agent.budget import estimate_tokens  # noqa: E402
from bot.sandbox.cloud_logging_api import CloudLoggingStandIn  # noqa: E402
from bot.sandbox.cloud_run_api import CloudRunStandIn  # noqa: E402
from bot.sandbox.examples import SCENARIOS  # noqa: E402
from bot.sandbox.openai_script import OpenAIScript, call, say  # noqa: E402
from bot.sandbox.server import serve  # noqa: E402
from bot.settings import load_settings  # noqa: E402
from bot.wiring import build_deps, close_deps  # noqa: E402

DEFAULT_DIR = SCENARIOS

# The scripted model's final answer: a valid remediation plan (what the loop parses and checks).
FINAL_PLAN = json.dumps(
    {
        "summary": "vLLM refuses to start: the KV cache cannot hold max-model-len tokens.",
        "likely_root_cause": "--max-model-len 16384 is larger than the KV cache fits on one L4.",
        "evidence": [{"text": "ValueError: ... KV cache is needed", "source": "finding:kv_cache_insufficient"}],
        "steps": ["Lower --max-model-len to the value vLLM suggests", "Redeploy"],
        "proposed_actions": [
            {"action": "redeploy", "params": {"max_model_len": 8192, "kv_cache_dtype": "fp8"}, "reason": "fits"}
        ],
        "confidence": "high",
    }
)


def script_turns() -> list:  # type: ignore[type-arg]
    return [
        call("service_status", {}, ("list_revisions", {"limit": 3})),
        call("get_logs", {"since_minutes": 60, "min_severity": "ERROR"}),
        call("model_metrics"),
        say(FINAL_PLAN),
    ]


async def run(scenario_dir: Path, runs: int) -> None:
    manifest = json.loads((scenario_dir / "manifest.json").read_text())
    model = OpenAIScript()
    logging_api = CloudLoggingStandIn()
    cloud_run = CloudRunStandIn()
    with serve(model.app) as model_url, serve(logging_api.app()) as log_url, serve(cloud_run.app) as run_url:
        cloud_run.seed_service("vllm-gemma4", uri=model_url)
        settings = load_settings(
            google_cloud_project="test-proj",
            google_anonymous_credentials=True,
            cloud_run_api_endpoint=run_url,
            cloud_logging_api_endpoint=log_url,
            vllm_base_url=model_url,
            vllm_model_id=model.model_id,
        )
        deps = build_deps(settings)
        agent = Agent(deps)
        print(
            f"{'scenario':34} {'loop ms/step':>12} {'model ms/step':>13} {'steps':>5} "
            f"{'tokens sent':>11} {'raw log tok':>11} {'ratio':>6}"
        )
        all_loop: list[float] = []
        for name in manifest:
            logging_api.replay(scenario_dir / f"{name}.jsonl", project="test-proj")
            raw_tokens = estimate_tokens((scenario_dir / f"{name}.jsonl").read_text())
            loop_ms, model_ms, tokens, steps = [], [], [], 0
            for i in range(runs + 1):
                model.push(*script_turns())
                result = await agent.analyze(since_minutes=120)
                lr = result.loop
                assert lr is not None and lr.stop_reason == "answered", (name, lr)
                if i == 0:
                    continue  # warm-up: imports, connection pools, first-use caches
                loop_ms.append(lr.loop_s * 1000 / lr.steps)
                model_ms.append(lr.model_s * 1000 / lr.steps)
                tokens.append(result.tokens_sent)
                steps = lr.steps
            all_loop += loop_ms
            tok = statistics.median(tokens)
            print(
                f"{name:34} {statistics.median(loop_ms):12.2f} {statistics.median(model_ms):13.2f} "
                f"{steps:5d} {tok:11.0f} {raw_tokens:11d} {tok / raw_tokens:6.2f}"
            )
        p95 = sorted(all_loop)[int(0.95 * (len(all_loop) - 1))]
        verdict = "OK" if p95 < 5 else "OVER TARGET"
        print(
            f"\nloop overhead: median {statistics.median(all_loop):.2f} ms/step, p95 {p95:.2f} ms/step "
            f"(target < 5 ms): {verdict}"
        )
        await close_deps(deps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenarios", nargs="?", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    asyncio.run(run(args.scenarios, args.runs))


if __name__ == "__main__":
    main()

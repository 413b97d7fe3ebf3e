"""Score a model as the on-call agent: the analysis loop over the scenario corpus, one row per scenario.

    python bench/agent_eval.py --base-url http://HOST:PORT [--model ID] [--api-key KEY] [SCENARIO ...]
    python bench/agent_eval.py --scripted all [--max-model-len 4096]      (no GPU: scripted models)

Any OpenAI-compatible endpoint (vLLM serving Gemma 4, or anything else) is the model; the logs and the service
it investigates come from the sandbox's recorded scenarios (bot/sandbox/data/scenarios, whose manifest holds
each right cause and fix), so every model faces the same incidents and nothing real is touched. Per scenario:
cause named (and grounded in the logs), right fix and params, tool calls valid, steps, tokens sent and
received, the largest request against the served max_model_len, wall time; then a table and a one-line score.
`--scripted` runs the scripted models (bot/sandbox/scripted_models.py) to show what each behaviour scores.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.agent_eval_run import run_eval  # noqa: E402
from bot.sandbox.openai_script import OpenAIScript  # noqa: E402
from bot.sandbox.scripted_models import POLICIES  # noqa: E402
from bot.sandbox.server import serve  # noqa: E402
from bot.settings import load_settings  # noqa: E402
from bot.wiring import build_deps, close_deps  # noqa: E402
from skills.diagnosis.agent_eval import one_line, table  # noqa: E402


async def _eval(base_url: str, model: str, api_key: str | None, names: list[str]) -> str:
    overrides: dict[str, object] = {"vllm_base_url": base_url, "key_prefix": "gemma-sre-eval:"}
    if model:
        overrides["vllm_model_id"] = model
    if api_key:
        overrides["vllm_api_key"] = api_key
    settings = load_settings(**overrides)
    scores = await run_eval(settings, names=names, build_deps=build_deps, close_deps=close_deps)
    label = model or base_url
    return f"{table(scores)}\n{one_line(label, scores)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenarios", nargs="*", help="scenario names (default: all in the manifest)")
    ap.add_argument("--base-url", help="the model server root, e.g. http://127.0.0.1:8000")
    ap.add_argument("--model", default="", help="model id (default: the first the server lists)")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--scripted", choices=[*POLICIES, "all"], help="a scripted model instead of an endpoint")
    ap.add_argument("--max-model-len", type=int, default=None, help="scripted server's context window")
    args = ap.parse_args()
    if bool(args.base_url) == bool(args.scripted):
        ap.error("give exactly one of --base-url or --scripted")
    if args.base_url:
        print(asyncio.run(_eval(args.base_url, args.model, args.api_key, args.scenarios)))
        return 0
    policies = list(POLICIES) if args.scripted == "all" else [args.scripted]
    lines = []
    for name in policies:
        server = OpenAIScript(model_id=f"scripted:{name}", max_model_len=args.max_model_len)
        server.otherwise = POLICIES[name]
        with serve(server.app) as url:
            out = asyncio.run(_eval(url, server.model_id, None, args.scenarios))
        print(f"== {name}\n{out}\n")
        lines.append(out.splitlines()[-1])
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

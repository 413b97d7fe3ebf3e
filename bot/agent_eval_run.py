"""Run the agent over the scenario corpus against a model endpoint, and score it (skills/diagnosis/agent_eval.py).

The model is whatever OpenAI-compatible endpoint the settings name (VLLM_BASE_URL / VLLM_MODEL_ID /
VLLM_API_KEY). Everything else the agent reads comes from the sandbox: a Cloud Logging stand-in replays each
scenario's logs and a Cloud Run stand-in describes the service, both served on 127.0.0.1, so each scenario is
the same for every model and nothing real is read or changed. Used by bench/agent_eval.py and `/gemma eval`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path

from bot.agent import Agent
from bot.deps import Deps
from bot.sandbox.cloud_logging_api import CloudLoggingStandIn
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.examples import SCENARIOS
from bot.sandbox.server import serve
from bot.settings import Settings
from skills.diagnosis.agent_eval import Expectation, Run, Score, score

PROJECT = "eval-proj"
SINCE_MINUTES = 120

Progress = Callable[[str], Awaitable[None]]


def load_manifest(scenario_dir: Path = SCENARIOS) -> dict[str, Expectation]:
    raw = json.loads((scenario_dir / "manifest.json").read_text())
    return {name: Expectation.model_validate(entry) for name, entry in raw.items()}


def log_text(path: Path) -> str:
    """The scenario's log lines as text (what evidence must quote)."""
    out = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        payload = entry.get("textPayload") or entry.get("jsonPayload") or ""
        out.append(payload if isinstance(payload, str) else json.dumps(payload))
    return "\n".join(out)


async def run_eval(
    settings: Settings,
    *,
    scenario_dir: Path = SCENARIOS,
    names: list[str] | None = None,
    progress: Progress | None = None,
    build_deps: Callable[[Settings], Deps],
    close_deps: Callable[[Deps], Awaitable[None]],
) -> list[Score]:
    """Analyse every scenario (or `names`) with the model `settings` point at; one Score each. The eval's own
    bot is wired by `build_deps` (bot/wiring.py's, handed down: the wiring holds the evals, not the other way)."""
    manifest = load_manifest(scenario_dir)
    chosen = names or sorted(manifest)
    unknown = sorted(set(chosen) - set(manifest))
    if unknown:
        raise ValueError(f"unknown scenarios: {', '.join(unknown)} (known: {', '.join(sorted(manifest))})")
    logging_api = CloudLoggingStandIn()
    cloud_run = CloudRunStandIn()
    stack = ExitStack()
    try:
        log_url = await asyncio.to_thread(stack.enter_context, serve(logging_api.app()))
        run_url = await asyncio.to_thread(stack.enter_context, serve(cloud_run.app))
        model_url = settings.vllm_base_url or ""
        cloud_run.seed_service(settings.vllm_service_name, uri=model_url)
        eval_settings = settings.model_copy(
            update={
                "google_cloud_project": PROJECT,
                "google_anonymous_credentials": True,
                "cloud_run_api_endpoint": run_url,
                "cloud_logging_api_endpoint": log_url,
            }
        )
        deps = build_deps(eval_settings)
        try:
            agent = Agent(deps)
            scores = []
            for name in chosen:
                if progress:
                    await progress(f"scenario {name}")
                path = scenario_dir / f"{name}.jsonl"
                logging_api.replay(path, project=PROJECT)
                scores.append(score(await _one(agent, name, path), manifest[name]))
            return scores
        finally:
            await close_deps(deps)
    finally:
        await asyncio.to_thread(stack.close)


async def _one(agent: Agent, name: str, path: Path) -> Run:
    t0 = time.perf_counter()
    analysis = await agent.analyze(since_minutes=SINCE_MINUTES)
    wall = time.perf_counter() - t0
    loop = analysis.loop
    run = Run(
        scenario=name,
        plan=analysis.plan,
        from_model=not analysis.plan.fallback_note,
        log_text=log_text(path),
        wall_s=wall,
        error=analysis.error,
    )
    if loop is not None:
        run.calls = list(loop.calls)
        run.steps = loop.steps
        run.tokens_sent = loop.tokens_sent
        run.tokens_received = loop.tokens_received
        run.largest_request = loop.largest_request
        run.context_limit = loop.context_limit
    return run

"""The AgentEvals port (handlers/deps.py) over bot/agent_eval_run.py, for `/gemma eval`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from bot.settings import Settings

if TYPE_CHECKING:
    from bot.deps import Deps
    from handlers.deps import Progress
    from skills.diagnosis.agent_eval import Score


class ScenarioEvals:
    def __init__(
        self,
        settings: Settings,
        build_deps: Callable[[Settings], Deps],
        close_deps: Callable[[Deps], Awaitable[None]],
    ) -> None:
        self._settings = settings
        self._build, self._close = build_deps, close_deps  # the wiring's own: an eval wires a bot of its own

    # Imported when asked: the eval runner brings the sandbox's stand-ins (and google.cloud.run_v2), which a
    # bot that is never asked to evaluate should not pay for at start.
    def scenarios(self) -> list[str]:
        from bot.agent_eval_run import load_manifest

        return sorted(load_manifest())

    async def run(self, base_url: str, model: str, names: list[str], progress: Progress) -> list[Score]:
        from bot.agent_eval_run import run_eval

        settings = self._settings.model_copy(update={"vllm_base_url": base_url, "vllm_model_id": model})
        return await run_eval(settings, names=names, progress=progress, build_deps=self._build, close_deps=self._close)

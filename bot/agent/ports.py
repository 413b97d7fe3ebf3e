"""What the agent is built from: the ports it uses, not the whole Deps container (bot/deps.py). Deps satisfies
this structurally, and so does anything that offers these six (a test's or the bench's own set)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from skills.ports import Logs, ModelServer, Store
from skills.targets.port import ServingTarget

if TYPE_CHECKING:
    from bot.adapters.llm import LLMEndpoint
    from bot.settings import Settings


class AgentPorts(Protocol):
    @property
    def settings(self) -> Settings: ...

    @property
    def redis(self) -> Store:
        """Conversation histories of `/gemma ask` threads."""
        ...

    @property
    def runtime(self) -> ServingTarget:
        """The configured service's serving target: status, revisions (when it has them) and config tools; the
        cold-start estimate."""
        ...

    @property
    def model_server(self) -> ModelServer:
        """The model metrics tool."""
        ...

    @property
    def endpoint(self) -> LLMEndpoint:
        """The model it reasons with (the OpenAI client itself: the loop streams)."""
        ...

    @property
    def logs(self) -> Logs | None:
        """Findings and the logs tool (None: not wired)."""
        ...

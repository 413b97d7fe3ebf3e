"""The agent: `analyze` (evidence -> loop -> RemediationProposal) and `ask` (a question in a conversation).

Every prompt starts with the same system text and the same tool list, so vLLM's prefix cache reuses them
across steps and across requests. Everything sent to the model is redacted first.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

import prompts
from bot.agent.budget import estimate_tokens, trim_history, truncate
from bot.agent.client import ModelClient
from bot.agent.coldstart import ColdStart, Progress
from bot.agent.history import ConversationStore
from bot.agent.loop import Guards, Loop, LoopResult
from bot.agent.textcalls import strip_reasoning
from bot.agent.toolset import Toolset, findings_text
from skills.capacity.fit import FitRequest, check_fit
from skills.diagnosis.remediation import ProposedAction, RemediationProposal, merge_actions, plan_from_findings
from skills.errors import UserFacingError, explain_error
from skills.logs.redact import redact
from skills.targets.cloud_run.render import ANNOTATION_MODEL

if TYPE_CHECKING:
    from bot.adapters.llm import LLMEndpoint
    from bot.agent.ports import AgentPorts

log = logging.getLogger(__name__)

_NARROW = "call the matching tool with narrower arguments"
EVIDENCE_SECTIONS = 3  # findings and logs, service status, model metrics
_FENCE = re.compile(r"```(?:json)?\s*\n?(.*?)```", re.DOTALL)


@dataclass
class Analysis:
    plan: RemediationProposal
    loop: LoopResult | None = None
    error: str = ""  # why the model's plan is missing, when it is
    repaired: bool = False
    tokens_sent: int = 0


@dataclass
class Answer:
    text: str
    proposed: list[ProposedAction] = field(default_factory=list)
    loop: LoopResult | None = None


class Agent:
    def __init__(self, deps: AgentPorts, *, initial_backoff_s: float = 2.0, max_backoff_s: float = 30.0) -> None:
        self.deps = deps
        self.settings = deps.settings
        self._backoff = (initial_backoff_s, max_backoff_s)
        self.conversations = ConversationStore(deps.redis, deps.settings)

    @property
    def endpoint(self) -> LLMEndpoint:
        return self.deps.endpoint

    # --- plumbing ----------------------------------------------------------------------------------------

    def _client(self, progress: Progress | None) -> ModelClient:
        cold = ColdStart(
            self.settings.agent_cold_start_budget_s,
            estimate_min=lambda: cold_start_estimate_min(self.deps),
            progress=progress,
            initial_backoff_s=self._backoff[0],
            max_backoff_s=self._backoff[1],
        )
        return ModelClient(self.deps.endpoint, cold)

    def _guards(self) -> Guards:
        s = self.settings
        return Guards(s.agent_max_steps, s.agent_tool_result_tokens, s.agent_time_budget_s)

    # --- analyze -----------------------------------------------------------------------------------------

    async def analyze(
        self,
        since_minutes: int = 60,
        context: str = "",
        progress: Progress | None = None,
        service: str | None = None,
    ) -> Analysis:
        """Gather evidence, run the loop, return a validated plan (or the deterministic findings, and why)."""
        tools = Toolset(self.deps, service)
        client = self._client(progress)
        registry = tools.registry()
        loop = Loop(client, registry, self._guards())
        # On a small served window the evidence is gathered to fit it, rather than cut afterwards.
        probe = [
            {"role": "system", "content": prompts.load("system")},
            {"role": "user", "content": prompts.load("analyze").replace("{evidence}", context)},
        ]
        room = await loop.prepare(probe)
        # Evidence takes at most 60% of the room left; tool results and the answer's history share the rest.
        budget = None if room is None else max(100, room * 6 // 10 // EVIDENCE_SECTIONS)
        evidence, findings, logs_error = await gather_evidence_why(tools, since_minutes, budget)
        if context:
            evidence = "## Context (untrusted, from the alert or the user)\n" + context.strip() + "\n\n" + evidence
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": prompts.load("system")},
            {"role": "user", "content": redact(prompts.load("analyze").replace("{evidence}", evidence))},
        ]
        try:
            result = await loop.run(messages)
        except UserFacingError as exc:
            note = f"The model could not be used: {str(exc).rstrip('.')}."
            if not logs_error:
                note += " These are the deterministic findings."
            return Analysis(plan=plan_from_findings(findings, note, logs_error=logs_error), error=str(exc))
        out = Analysis(
            plan=plan_from_findings(findings, "", logs_error=logs_error), loop=result, tokens_sent=result.tokens_sent
        )
        plan, err = parse_plan(result.answer)
        if plan is None and result.stop_reason in ("answered", "no_answer"):
            out.repaired = True
            messages.append({"role": "user", "content": prompts.load("repair").replace("{error}", err)})
            try:
                # The repair request fits the window like every other (same tool list, counted into the run).
                await loop.fit(messages, result)
                out.tokens_sent = result.tokens_sent
                comp = await client.complete(
                    messages, loop.schemas, "none", self.settings.model_timeout_s, loop.answer_tokens
                )
                result.steps += 1
                result.tokens_received += estimate_tokens(comp.content)
                plan, err = parse_plan(comp.content)
            except UserFacingError as exc:
                err = str(exc)
        if plan is None:
            why = {"time_budget": "the time budget ran out", "step_cap": "the step cap was reached"}.get(
                result.stop_reason, f"its answer was not a valid plan ({err})"
            )
            out.error = why
            out.plan = plan_from_findings(
                findings, f"The model gave no usable plan ({why}); deterministic findings.", logs_error=logs_error
            )
            out.plan.proposed_actions = merge_actions(result.proposed)
            return out
        plan.proposed_actions = merge_actions(result.proposed, plan.proposed_actions)
        out.plan = plan
        return out

    # --- ask ---------------------------------------------------------------------------------------------

    async def ask(self, history: list[dict[str, str]], question: str, progress: Progress | None = None) -> Answer:
        """Answer `question` given earlier turns ({role, content} user/assistant pairs, oldest first)."""
        turns = trim_history([*history, {"role": "user", "content": question}])
        messages: list[dict[str, Any]] = [{"role": "system", "content": prompts.load("system")}]
        for i, t in enumerate(turns):
            content = t["content"]
            if i == 0:  # the instructions ride on the first question so every thread shares one prefix
                content = prompts.load("ask") + "\n\nQuestion: " + content
            messages.append({"role": t["role"], "content": redact(content)})
        tools = Toolset(self.deps)
        loop = Loop(self._client(progress), tools.registry(), self._guards())
        result = await loop.run(messages)
        text = redact(strip_reasoning(result.answer)).strip()
        if not text:
            # Never an empty reply, and never the model's reasoning in place of an answer.
            text = (
                "The model replied with reasoning only and no answer; ask again or rephrase the question."
                if result.stop_reason == "no_answer"
                else "I could not reach an answer in time; try a narrower question."
            )
        return Answer(text=text, proposed=merge_actions(result.proposed), loop=result)


async def gather_evidence(tools: Toolset, since_minutes: int, budget: int | None = None) -> tuple[str, list[Any]]:
    """The evidence an analysis starts from, as one text block, plus the deterministic findings."""
    evidence, findings, _ = await gather_evidence_why(tools, since_minutes, budget)
    return evidence, findings


async def gather_evidence_why(
    tools: Toolset, since_minutes: int, budget: int | None = None
) -> tuple[str, list[Any], str]:
    """Like gather_evidence, plus why the logs could not be read ('' when they were): with no logs there are
    no findings, and "no known failure" would then be a lie. Each of its EVIDENCE_SECTIONS sections is cut to
    `budget` tokens (default: the tool-result budget)."""
    budget = min(budget or tools.settings.agent_tool_result_tokens, tools.settings.agent_tool_result_tokens)
    findings: list[Any] = []
    logs_error: list[str] = []

    async def section(title: str, source: str, coro: Any, errors: list[str] | None = None) -> str:
        try:
            body = await coro
        except UserFacingError as exc:
            body = f"(unavailable: {exc})"
            if errors is not None:
                errors.append(str(exc))
        except Exception as exc:  # noqa: BLE001 - one missing source must not stop the analysis
            log.warning("agent context source failed: %s: %s", type(exc).__name__, redact(str(exc))[:200])
            body = f"(unavailable: {type(exc).__name__})"
            if errors is not None:
                errors.append(f"{type(exc).__name__}: {redact(str(exc))[:200]}")
        return f"## {title} (source: {source})\n{truncate(str(body), budget, _NARROW)}"

    async def diagnosis() -> str:
        if tools.deps.logs is None:
            raise UserFacingError("no log source is configured")
        diag = await tools.diagnosis(since_minutes)
        findings.extend(diag.findings)
        logs = diag.digest_text or "No log lines in the window."
        return f"Findings: {findings_text(diag)}\n\nCondensed logs (source: logs):\n{logs}"

    parts = await asyncio.gather(
        section(f"Diagnosis findings and logs, last {since_minutes} min", "finding", diagnosis(), logs_error),
        section("Service status", "status", tools.status_text()),
        section("Model server metrics", "metrics", tools.metrics_text()),
    )
    return "\n\n".join(parts), findings, "; ".join(logs_error)


def parse_plan(text: str) -> tuple[RemediationProposal | None, str]:
    """A RemediationProposal from the model's final text (bare JSON, a fenced block, or JSON inside prose)."""
    text = strip_reasoning(text or "")
    if not text:
        return None, "the answer was empty"
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start >= 0 and end > start:
        candidates.append(text[start : end + 1])
    if not candidates:
        return None, "no JSON object was found"
    err = ""
    for c in candidates:
        try:
            data = json.loads(c)
        except ValueError as exc:
            err = f"invalid JSON ({exc})"
            continue
        if not isinstance(data, dict):
            err = "the JSON is not an object"
            continue
        try:
            return RemediationProposal.model_validate(data), ""
        except ValidationError as exc:
            err = "; ".join(explain_error(e, flag_style=False) for e in exc.errors()[:5])  # users may see it
    return None, err


async def cold_start_estimate_min(deps: AgentPorts) -> float | None:
    """The capacity planner's cold-start estimate for the model the service runs (from its annotation)."""
    info = await deps.runtime.get_service(deps.settings.vllm_service_name)
    model = (info.spec.get("annotations") or {}).get(ANNOTATION_MODEL)
    if not model:
        return None
    report = check_fit(FitRequest(model=model, gpu=info.gpu_type or "nvidia-l4", gpu_count=max(1, info.gpu_count)))
    return report.cold_start_s / 60

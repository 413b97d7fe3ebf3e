"""The tool-calling loop: ask the model, run the read-only tools it calls, feed results back, until done.

Guards, each because small self-hosted models do this: a step cap; a token budget per tool result (cut with
a marker saying how to narrow); identical repeated calls refused (and a step of nothing but repeats ends the
investigation); unknown tools and invalid arguments returned as errors the model can correct; tool calls
written as text recovered; the last step allows no tool calls so the model must answer; an overall time
budget. Tools that modify are never run: a call to one is recorded as a proposed action.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

import prompts
from bot.agent.budget import estimate_tokens, message_tokens, truncate
from bot.agent.client import ModelClient
from bot.agent.textcalls import TextCall, parse_text_calls, strip_reasoning
from bot.agent.tools import ToolRegistry, compact_schema
from skills.diagnosis.remediation import ProposedAction, sanitize_action
from skills.errors import UserFacingError
from skills.logs.redact import redact

log = logging.getLogger(__name__)

StopReason = Literal["answered", "step_cap", "time_budget", "no_answer"]
MIN_STEP_S = 5.0  # with less time left than this, the next step is the final one
NEAR = 0.6  # an estimate above this share of the room left is checked with the server's /tokenize
LEAN_SHARE = 0.3  # tool schemas above this share of the room: use the lean tool list
MIN_ANSWER = 512  # the least room left for the answer when the window is small


@dataclass
class LoopResult:
    answer: str
    stop_reason: StopReason
    steps: int = 0
    proposed: list[ProposedAction] = field(default_factory=list)
    executed: list[str] = field(default_factory=list)  # read-only tools actually run, in order
    notes: list[str] = field(default_factory=list)  # refusals and dropped proposals, for the log/footer
    tokens_sent: int = 0  # prompt tokens over all requests (counted by the server when near the limit)
    tokens_received: int = 0  # estimated: the replies' text and tool-call arguments
    largest_request: int = 0  # the largest single prompt, tool schemas included
    context_limit: int | None = None  # the served max_model_len, when the server says
    # Every call the model made and what became of it: ran, proposed, repeat, unknown_tool, invalid_args,
    # refused_write (a change the policy refuses, such as destroy). The eval scores these.
    calls: list[tuple[str, str]] = field(default_factory=list)
    model_s: float = 0.0
    loop_s: float = 0.0  # the loop's own time (total minus model and tool time)
    tool_s: float = 0.0


@dataclass
class _Call:
    id: str
    name: str
    arguments: dict[str, Any] | None
    error: str = ""


@dataclass
class Guards:
    max_steps: int
    result_tokens: int
    time_budget_s: float


class Loop:
    def __init__(self, client: ModelClient, registry: ToolRegistry, guards: Guards) -> None:
        self._answer_tokens = client.max_tokens
        self.schemas: list[dict[str, Any]] | None = registry.schemas() or None  # the tool list sent this run
        self._prepared = False
        self._room: int | None = None
        self._result_tokens = guards.result_tokens
        self._ratio = 1.0
        self.client = client
        self.registry = registry
        self.guards = guards

    async def run(self, messages: list[dict[str, Any]]) -> LoopResult:
        """Runs until an answer; `messages` (system first) is extended in place with the exchange."""
        t_start = time.perf_counter()
        res = LoopResult(answer="", stop_reason="step_cap")
        seen: dict[str, int] = {}
        force_final = False
        await self.prepare(messages)
        schemas = self.schemas
        for step in range(self.guards.max_steps):
            res.steps = step + 1
            remaining = self._remaining(t_start, res)
            low_time = remaining < min(MIN_STEP_S, self.guards.time_budget_s / 4)
            last = force_final or step == self.guards.max_steps - 1 or low_time
            if last and schemas:
                messages.append({"role": "user", "content": prompts.load("final_step")})
            await self.fit(messages, res)
            try:
                async with asyncio.timeout(max(remaining, 0.001)):
                    # The last step keeps the tool list but forbids calls: the prompt prefix (system + tools)
                    # stays byte-identical for vLLM's prefix cache, and the model must answer.
                    comp = await self.client.complete(
                        messages, schemas, "none" if last else "auto", remaining, self._answer_tokens
                    )
            except TimeoutError:
                res.stop_reason = "time_budget"
                break
            res.model_s += comp.model_s
            res.tokens_received += estimate_tokens(comp.content) + sum(
                estimate_tokens(c.name + c.arguments) for c in comp.tool_calls
            )
            calls, text = self._calls(comp, step)
            if not calls or last:
                res.answer = text
                res.stop_reason = "answered" if text else "no_answer"
                if calls:
                    res.notes.append("tool calls on the final step were ignored")
                messages.append({"role": "assistant", "content": text})
                break
            messages.append(_assistant_message(text, calls))
            t_tools = time.perf_counter()
            try:
                async with asyncio.timeout(max(self._remaining(t_start, res), 0.001)):
                    outputs = await asyncio.gather(*(self._execute(c, step, seen, res) for c in calls))
            except TimeoutError:
                res.stop_reason = "time_budget"
                break
            finally:
                res.tool_s += time.perf_counter() - t_tools
            for call, (content, _) in zip(calls, outputs, strict=True):
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
            if all(repeat for _, repeat in outputs):
                force_final = True  # the model is looping on the same call(s): make it answer
        res.loop_s = time.perf_counter() - t_start - res.model_s - res.tool_s
        return res

    async def prepare(self, probe: list[dict[str, Any]] | None = None) -> int | None:
        """Read the served window, choose this run's tool list and calibrate the estimate on `probe` (the
        messages so far) with one /tokenize. Returns the room left beyond `probe` for more content, in
        estimate_tokens units, or None when the server states no window."""
        if self._prepared:
            return self._room
        self._prepared = True
        schemas = self.registry.schemas() or None
        schema_tokens = estimate_tokens(json.dumps(schemas)) if schemas else 0
        limit = await self.client.context_limit()
        if schemas and limit and schema_tokens > (limit - self.client.max_tokens) * LEAN_SHARE:
            # A small window: the whole run uses the lean tool list (one list per run keeps the prefix cacheable).
            schemas = self.registry.lean_schemas()
            schema_tokens = estimate_tokens(json.dumps(schemas))
        self.schemas = schemas
        if limit:
            probe = probe or [{"role": "user", "content": "."}]
            estimate = message_tokens(probe) + schema_tokens
            exact = await self.client.count_tokens(probe, schemas)
            # This server's tokenizer against the 4-characters estimate (never assumed kinder than it).
            self._ratio = max(1.0, (exact or estimate) / max(1, estimate))
            free = limit - _answer_share(limit, self.client.max_tokens) - (exact or estimate)
            self._room = max(0, int(free / self._ratio))
            # Tool results share what is left with the evidence and the history.
            self._result_tokens = max(150, min(self.guards.result_tokens, self._room // 5))
        return self._room

    @property
    def answer_tokens(self) -> int:
        """max_tokens for the next request (less than configured when the window is small)."""
        return self._answer_tokens

    async def fit(self, messages: list[dict[str, Any]], res: LoopResult) -> int:
        """Fit the next request (messages + `self.schemas`) into the window, and account for it in `res`."""
        schemas = self.schemas
        size = await self._fit(messages, schemas, estimate_tokens(json.dumps(schemas)) if schemas else 0, res)
        res.tokens_sent += size
        res.largest_request = max(res.largest_request, size)
        return size

    async def _fit(
        self, messages: list[dict[str, Any]], schemas: list[dict[str, Any]] | None, schema_tokens: int, res: LoopResult
    ) -> int:
        """Keep the request within the served context minus the answer's max_tokens; returns its size.

        The 4-characters estimate decides when to ask the server: within NEAR of the limit the prompt is
        counted with /tokenize (the estimate can be off by a third on log text), and while it is over, the
        largest tool result or evidence block is cut to half, with a marker, and counted again."""
        size = message_tokens(messages) + schema_tokens
        limit = await self.client.context_limit()
        res.context_limit = limit
        if limit is None:
            return size
        room = limit - _answer_share(limit, self.client.max_tokens)
        exact: int | None = None
        for _ in range(12):
            if size * self._ratio < room * NEAR:
                break
            exact = await self.client.count_tokens(messages, schemas)
            counted = exact if exact is not None else int(size * self._ratio)
            if counted <= room or not _shrink_largest(messages):
                break
            exact, size = None, message_tokens(messages) + schema_tokens
        # The estimate scaled by this server's measured ratio when the last size was not counted.
        size = exact if exact is not None else int(size * self._ratio)
        self._answer_tokens = max(MIN_ANSWER, min(self.client.max_tokens, limit - size))
        return size

    def _remaining(self, t_start: float, res: LoopResult) -> float:
        # Cold-start waiting does not count against the time budget: the model was not thinking yet.
        cold_wait = self.client.cold_waited_s
        return self.guards.time_budget_s - (time.perf_counter() - t_start - cold_wait)

    def _calls(self, comp: Any, step: int) -> tuple[list[_Call], str]:
        if comp.tool_calls:
            calls = []
            for sc in comp.tool_calls:
                args, err = _json_args(sc.arguments)
                calls.append(_Call(id=sc.id, name=sc.name, arguments=args, error=err))
            return calls, strip_reasoning(comp.content)
        found, rest = parse_text_calls(comp.content)
        return [_from_text(tc, step, i) for i, tc in enumerate(found)], rest

    async def _execute(self, call: _Call, step: int, seen: dict[str, int], res: LoopResult) -> tuple[str, bool]:
        """(content for the model, whether it was refused as a repeat)."""
        tool = self.registry.get(call.name)
        if tool is None:
            res.calls.append((call.name, "unknown_tool"))
            names = ", ".join(self.registry.names())
            return f"Error: there is no tool named {call.name!r}. Available tools: {names}.", False
        if call.error or call.arguments is None:
            res.calls.append((call.name, "invalid_args"))
            return _arg_error(call.name, call.error or "arguments missing", tool.args), False
        try:
            args = tool.args.model_validate(call.arguments)
        except ValidationError as exc:
            res.calls.append((call.name, "invalid_args"))
            detail = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors()[:6])
            return _arg_error(call.name, detail, tool.args), False
        key = call.name + json.dumps(args.model_dump(mode="json"), sort_keys=True)
        if key in seen:
            res.calls.append((call.name, "repeat"))
            return (
                f"Refused: you already called {call.name} with these arguments at step {seen[key] + 1}; "
                "its result is above. Do not repeat a call: change the arguments or give your final answer.",
                True,
            )
        seen[key] = step
        if tool.modifies:
            return self._propose(call.name, args.model_dump(exclude_none=True), res), False
        assert tool.run is not None
        try:
            out = await tool.run(args)
        except UserFacingError as exc:
            out = f"Error from {call.name}: {exc}"
        except Exception as exc:
            log.warning("agent tool %s failed: %s: %s", call.name, type(exc).__name__, str(exc)[:200], exc_info=True)
            out = f"Error from {call.name}: {type(exc).__name__}"
        res.executed.append(call.name)
        res.calls.append((call.name, "ran"))
        # Everything sent to the model is redacted; tool output is data, and it is bounded.
        return truncate(redact(out), self._result_tokens, tool.narrow_hint), False

    def _propose(self, name: str, params: dict[str, Any], res: LoopResult) -> str:
        reason = str(params.pop("reason", ""))
        action, note = sanitize_action(ProposedAction(action=name, params=params, reason=reason))
        if action is None:
            res.calls.append((name, "refused_write"))
            res.notes.append(f"not proposed: {note}")
            return f"Not recorded: {note}."
        res.proposed.append(action)
        res.calls.append((name, "proposed"))
        return (
            f"Recorded as a proposed action ({name} {json.dumps(action.params, sort_keys=True)}). It was NOT "
            "executed: a human must approve it. Continue the investigation or give your final answer."
        )


def _answer_share(limit: int, max_tokens: int) -> int:
    """On a small window the answer gets at most a quarter of it (never less than MIN_ANSWER)."""
    return max(MIN_ANSWER, min(max_tokens, limit // 4))


def _shrink_largest(messages: list[dict[str, Any]]) -> bool:
    """Halve the largest tool result, else the largest user message keeping its head (the instructions) and
    its tail; never the system prompt. False when nothing is left worth cutting."""
    for roles in (("tool",), ("user",)):
        sizes = [(len(str(m.get("content") or "")), i) for i, m in enumerate(messages) if m.get("role") in roles]
        sizes = [(n, i) for n, i in sizes if n > 400]
        if not sizes:
            continue
        n, i = max(sizes)
        text = str(messages[i]["content"])
        if roles == ("tool",):
            cut = truncate(text, estimate_tokens(text) // 2, "the context window is small: ask for less")
        else:
            keep = n // 4
            cut = text[:keep] + "\n[... cut to fit the context window ...]\n" + text[-keep:]
        messages[i] = {**messages[i], "content": cut}
        return True
    return False


def _json_args(raw: str) -> tuple[dict[str, Any] | None, str]:
    if not raw.strip():
        return {}, ""
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return None, f"the arguments are not valid JSON ({exc})"
    if not isinstance(value, dict):
        return None, "the arguments must be a JSON object"
    return value, ""


def _from_text(tc: TextCall, step: int, i: int) -> _Call:
    return _Call(id=f"text_{step}_{i}", name=tc.name, arguments=None if tc.error else tc.arguments, error=tc.error)


def _arg_error(name: str, detail: str, model: Any) -> str:
    schema = json.dumps(compact_schema(model), separators=(",", ":"))
    return f"Error: invalid arguments for {name}: {detail}. Call it again with arguments matching: {schema}"


def _assistant_message(text: str, calls: list[_Call]) -> dict[str, Any]:
    """Structured tool_calls even when the model wrote them as text, so the chat template renders them."""
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": json.dumps(c.arguments or {}, separators=(",", ":")),
                },
            }
            for c in calls
        ],
    }

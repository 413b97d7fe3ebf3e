"""Scoring the agent as an on-call engineer: one scenario at a time, then a scorecard for the model.

Per scenario (the scenario manifest holds the right answer, see bot/sandbox/data/scenarios/README.md):
- cause: the plan's root cause names the failure (one of the manifest's words; for a healthy service, none of
  the failures) and its evidence quotes the logs or cites the matching finding — an answer that ignores the
  evidence gets no credit even when it guesses the cause;
- fix: a proposed action matches one of the manifest's fixes, params included (a healthy service: none);
- calls: every tool call was valid — no unknown tool, no malformed or schema-violating arguments, no write
  the policy refuses (destroy, or a change with bad params). Proposing a change through a change tool is
  allowed: it only records a proposal;
- cost: steps, tokens sent and received, the largest single request (against the served max_model_len), wall
  time.
A plan that did not come from the model (it gave no usable answer, so the deterministic findings stood in)
earns neither cause nor fix. Pure functions over plain data: the runner (bot/agent_eval_run.py) gathers it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from skills.diagnosis.remediation import ProposedAction, RemediationProposal

BAD_OUTCOMES = ("unknown_tool", "invalid_args", "refused_write")
_FAILURE_WORDS = ("out of memory", "oom", "kv cache", "startup probe", "crash", "failed", "error")


class Expectation(BaseModel):
    """The right answer for one scenario (its manifest entry; unknown keys such as `service` are ignored)."""

    kinds: list[str] = Field(default_factory=list)
    cause: dict[str, list[str]] = Field(default_factory=dict)  # {"any": [words]}
    fix: list[dict[str, Any]] = Field(default_factory=list)  # [{"action": ..., "params": {...}}]


@dataclass
class Run:
    """What one analysis produced, as the eval sees it."""

    scenario: str
    plan: RemediationProposal
    from_model: bool  # False: the model gave no usable plan and the deterministic findings stood in
    log_text: str  # the scenario's log lines, for checking that evidence quotes them
    calls: list[tuple[str, str]] = field(default_factory=list)  # (tool, outcome) from the loop
    steps: int = 0
    tokens_sent: int = 0
    tokens_received: int = 0
    largest_request: int = 0
    context_limit: int | None = None
    wall_s: float = 0.0
    error: str = ""


@dataclass
class Score:
    scenario: str
    cause: bool
    fix: bool
    calls_ok: bool
    grounded: bool
    bad_calls: dict[str, int]
    run: Run

    @property
    def points(self) -> int:
        return int(self.cause) + int(self.fix) + int(self.calls_ok)


def score(run: Run, expect: Expectation) -> Score:
    plan = run.plan
    words = [w.lower() for w in expect.cause.get("any", [])]
    claim = f"{plan.likely_root_cause} {plan.summary}".lower()
    grounded = _grounded(plan, run.log_text, expect.kinds)
    if words:
        named = any(w in claim for w in words)
    else:  # a healthy service: the right cause is "nothing is wrong"
        named = not plan.proposed_actions and not any(w in plan.likely_root_cause.lower() for w in _FAILURE_WORDS)
        grounded = True
    fix = _fix_ok(plan.proposed_actions, expect.fix)
    bad: dict[str, int] = {}
    for _, outcome in run.calls:
        if outcome in BAD_OUTCOMES:
            bad[outcome] = bad.get(outcome, 0) + 1
    if not run.from_model:
        named = fix = False
    return Score(run.scenario, named and grounded, fix, not bad, grounded, bad, run)


def _grounded(plan: RemediationProposal, log_text: str, kinds: list[str]) -> bool:
    logs = log_text.lower()
    for ev in plan.evidence:
        if ev.source.startswith("finding:") and ev.source.removeprefix("finding:") in kinds:
            return True
        for piece in ev.text.lower().replace("…", "...").split("..."):
            piece = piece.strip().strip("\"'`")
            if len(piece) >= 12 and piece in logs:
                return True
    return False


def _fix_ok(proposed: list[ProposedAction], fixes: list[dict[str, Any]]) -> bool:
    if not fixes:
        return not proposed
    return any(_matches(a, f) for a in proposed for f in fixes)


def _matches(action: ProposedAction, fix: dict[str, Any]) -> bool:
    if action.action != fix.get("action"):
        return False
    for key, want in (fix.get("params") or {}).items():
        got = action.params.get(key)
        if got is None:
            return False
        if isinstance(want, dict):
            if not isinstance(got, int | float) or isinstance(got, bool):
                return False
            if "min" in want and got < want["min"]:
                return False
            if "max" in want and got > want["max"]:
                return False
        elif got != want:
            return False
    return True


# --- the scorecard ------------------------------------------------------------------------------------------


def table(scores: list[Score]) -> str:
    head = (
        f"{'scenario':32} {'cause':>5} {'fix':>4} {'calls':>6} {'steps':>5} {'tok sent':>8} "
        f"{'tok recv':>8} {'largest':>8} {'wall s':>7}  notes"
    )
    rows = [head]
    for s in scores:
        r = s.run
        limit = f"/{r.context_limit}" if r.context_limit else ""
        notes = ", ".join(
            [f"{n} {k}" for k, n in sorted(s.bad_calls.items())]
            + ([] if r.from_model else ["no model plan"])
            + ([] if s.grounded else ["evidence not from the logs"])
            + ([r.error[:60]] if r.error else [])
        )
        rows.append(
            f"{s.scenario[:32]:32} {_mark(s.cause):>5} {_mark(s.fix):>4} {_mark(s.calls_ok):>6} {r.steps:5d} "
            f"{r.tokens_sent:8d} {r.tokens_received:8d} {f'{r.largest_request}{limit}':>8} {r.wall_s:7.1f}  {notes}"
        )
    return "\n".join(rows)


def one_line(model: str, scores: list[Score]) -> str:
    """ "model: 92% (cause 4/4, fix 3/4, valid calls 4/4) ..." — the figure a team quotes."""
    n = len(scores)
    if not n:
        return f"{model}: no scenarios"
    pct = 100 * sum(s.points for s in scores) / (3 * n)
    runs = [s.run for s in scores]
    largest = max(r.largest_request for r in runs)
    limit = next((r.context_limit for r in runs if r.context_limit), None)
    within = f" of {limit}" if limit else ""
    return (
        f"{model}: {pct:.0f}% (cause {sum(s.cause for s in scores)}/{n}, fix {sum(s.fix for s in scores)}/{n}, "
        f"valid calls {sum(s.calls_ok for s in scores)}/{n}); median {statistics.median(r.steps for r in runs):g} "
        f"steps, {statistics.median(r.tokens_sent for r in runs):.0f} tokens sent, largest request "
        f"{largest}{within}, median {statistics.median(r.wall_s for r in runs):.1f} s"
    )


def _mark(ok: bool) -> str:
    return "yes" if ok else "NO"

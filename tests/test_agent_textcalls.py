"""Recovering tool calls written as text, parsing plans, budgets and proposal sanitising (pure functions)."""

from __future__ import annotations

from bot.agent.agent import parse_plan
from bot.agent.budget import estimate_tokens, trim_history, truncate
from bot.agent.textcalls import parse_text_calls, strip_reasoning
from skills.diagnosis.remediation import ProposedAction, merge_actions, sanitize_action


def test_gemma_native_call_with_typed_values() -> None:
    text = (
        'Checking.\n<|tool_call>call:get_logs{since_minutes:30,min_severity:<|"|>ERROR<|"|>,'
        'contains:<|"|>host:8080 {x}, y<|"|>,flags:[true,null,2.5],o:{k:<|"|>v<|"|>}}<tool_call|>'
    )
    calls, rest = parse_text_calls(text)
    assert [(c.name, c.arguments) for c in calls] == [
        (
            "get_logs",
            {
                "since_minutes": 30,
                "min_severity": "ERROR",
                "contains": "host:8080 {x}, y",
                "flags": [True, None, 2.5],
                "o": {"k": "v"},
            },
        )
    ]
    assert rest == "Checking."


def test_several_calls_in_one_block_missing_end_tag_and_stripped_special_tokens() -> None:
    calls, _ = parse_text_calls("<|tool_call>call:service_status{}call:list_revisions{limit:2}")
    assert [(c.name, c.arguments) for c in calls] == [
        ("service_status", {}),
        ("list_revisions", {"limit": 2}),
    ]
    # With special tokens skipped by the server only the bare form remains, quotes and all gone.
    calls, _ = parse_text_calls("call:get_logs{min_severity:ERROR,since_minutes:15}")
    assert calls[0].arguments == {"min_severity": "ERROR", "since_minutes": 15}


def test_unparseable_arguments_become_an_error_for_the_model() -> None:
    calls, _ = parse_text_calls("<|tool_call>call:get_logs{since_minutes 30}<tool_call|>")
    assert calls[0].name == "get_logs" and "could not parse" in calls[0].error


def test_json_code_block_calls_but_not_a_plan() -> None:
    calls, rest = parse_text_calls('Sure:\n```json\n[{"name": "a", "arguments": "{\\"x\\": 1}"}, {"name": "b"}]\n```')
    assert [(c.name, c.arguments) for c in calls] == [("a", {"x": 1}), ("b", {})]
    assert rest == "Sure:"
    plan = '```json\n{"summary": "x", "name": "not a call"}\n```'
    assert parse_text_calls(plan)[0] == []


def test_reasoning_is_stripped() -> None:
    assert strip_reasoning("<|channel>thought\nsecret<channel|>Answer") == "Answer"
    assert strip_reasoning("<think>secret</think> Answer") == "Answer"


def test_parse_plan_accepts_prose_wrapped_json_and_lenient_fields() -> None:
    plan, err = parse_plan('Here is the plan: {"summary": "s", "confidence": 0.9, "steps": "do it", "evidence": ["e"]}')
    assert err == "" and plan is not None
    assert plan.confidence == "high" and plan.steps == ["do it"] and plan.evidence[0].text == "e"
    assert parse_plan("no json here")[0] is None
    assert "summary" in parse_plan('{"likely_root_cause": "x"}')[1]


def test_truncate_marks_the_cut_and_says_how_to_narrow() -> None:
    text = "\n".join(f"line {i} " + "x" * 60 for i in range(200))
    out = truncate(text, 100, "use a shorter window")
    assert out.endswith("use a shorter window]") and "[TRUNCATED" in out
    assert estimate_tokens(out) <= 120
    assert truncate("short", 100, "n/a") == "short"


def test_history_trim_keeps_newest_and_starts_with_a_question() -> None:
    hist = []
    for i in range(50):
        hist += [
            {"role": "user", "content": f"q{i} " + "y" * 400},
            {"role": "assistant", "content": "a" * 400},
        ]
    kept = trim_history(hist, 1000)
    assert kept[0]["role"] == "user" and kept[-1] == hist[-1] and len(kept) < len(hist)


def test_sanitize_drops_destroy_unknown_and_invalid_params() -> None:
    assert sanitize_action(ProposedAction(action="destroy"))[0] is None
    assert sanitize_action(ProposedAction(action="rm -rf"))[0] is None
    assert sanitize_action(ProposedAction(action="scale", params={"max_instances": 0}))[0] is None
    clean, note = sanitize_action(ProposedAction(action="Redeploy", params={"max_model_len": "8192", "evil": 1}))
    assert clean is not None and clean.action == "redeploy" and clean.params == {"max_model_len": 8192}
    assert "evil" in note
    merged = merge_actions(
        [ProposedAction(action="rollback")],
        [ProposedAction(action="rollback"), ProposedAction(action="destroy")],
    )
    assert [a.action for a in merged] == ["rollback"]

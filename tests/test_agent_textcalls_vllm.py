"""Tool calls written as text, recovered at parity with vLLM's `gemma4` tool parser.

Cases ported from vLLM's own tests, tests/tool_parsers/test_gemma4_tool_parser.py (vllm-project/vllm at
027004de3715411197be51ced325705abcf740a7; parser: vllm/tool_parsers/gemma4_tool_parser.py). vLLM tests its
argument parser on the text inside `{...}`; ours takes the whole reply, so each case is wrapped in a call.
Streaming cases become whole-text ones (the text the stream adds up to). Then our own cases for replies whose
special tokens the server stripped: a value holding `}` or `,` survives, or the call is reported unparseable.
"""

from __future__ import annotations

import json

import pytest

from bot.agent.textcalls import parse_text_calls


def _args(inner: str) -> dict:
    calls, _ = parse_text_calls(f"<|tool_call>call:f{{{inner}}}<tool_call|>")
    assert len(calls) == 1 and not calls[0].error, calls
    return calls[0].arguments


# --- TestParseGemma4Args ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("inner", "expected"),
    [
        ("", {}),  # test_empty_string
        ("   ", {}),  # test_whitespace_only
        ('location:<|"|>Paris<|"|>', {"location": "Paris"}),  # test_single_string_value
        ('location:<|"|>Paris, France<|"|>', {"location": "Paris, France"}),  # test_string_value_with_comma
        (
            'location:<|"|>San Francisco<|"|>,unit:<|"|>celsius<|"|>',
            {"location": "San Francisco", "unit": "celsius"},
        ),  # test_multiple_string_values
        ("count:42", {"count": 42}),  # test_integer_value
        ("score:3.14", {"score": 3.14}),  # test_float_value
        ("flag:true", {"flag": True}),  # test_boolean_true
        ("flag:false", {"flag": False}),  # test_boolean_false
        ("param:null", {"param": None}),  # test_null_value
        ("a:None,b:nil,c:NULL", {"a": None, "b": None, "c": None}),  # _parse_gemma4_value: null/none/nil, any case
        (
            'name:<|"|>test<|"|>,count:42,active:true,score:3.14',
            {"name": "test", "count": 42, "active": True, "score": 3.14},
        ),  # test_mixed_types
        ('nested:{inner:<|"|>value<|"|>}', {"nested": {"inner": "value"}}),  # test_nested_object
        ('record_map:{<|"|>3<|"|>:<|"|>new text<|"|>}', {"record_map": {"3": "new text"}}),
        ('outer:{inner:{<|"|>3<|"|>:<|"|>new text<|"|>}}', {"outer": {"inner": {"3": "new text"}}}),
        ('items:[<|"|>a<|"|>,<|"|>b<|"|>]', {"items": ["a", "b"]}),  # test_array_of_strings
        ('key:<|"|>unterminated', {"key": "unterminated"}),  # test_unterminated_string
        ("key:", {"key": ""}),  # test_empty_value
        ("left:108.,right:22.8", {"left": 108.0, "right": 22.8}),  # test_trailing_dot_float (non-partial)
        # TestParseGemma4Array
        ("xs:[42,true,3.14]", {"xs": [42, True, 3.14]}),  # test_bare_values
        ("xs:[]", {"xs": []}),  # test_empty_array
        ('xs:[[<|"|>a]b<|"|>,<|"|>c<|"|>],<|"|>tail<|"|>]', {"xs": [["a]b", "c"], "tail"]}),
    ],
)
def test_vllm_argument_cases(inner: str, expected: dict) -> None:
    args = _args(inner)
    assert args == expected
    assert json.loads(json.dumps(args)) == expected  # null stays null, not "null"


def test_null_is_json_null() -> None:
    assert json.dumps(_args("param:null")) == '{"param": null}'


def test_malformed_array_is_an_error_not_a_hang() -> None:
    calls, _ = parse_text_calls("<|tool_call>call:f{:[t:[]}<tool_call|>")  # test_malformed_partial_array
    assert calls and calls[0].error


# --- TestExtractToolCalls -----------------------------------------------------------------------------------
def test_no_tool_calls() -> None:
    text = "Hello, how can I help you today?"
    assert parse_text_calls(text) == ([], text)


def test_text_before_and_multiple_calls() -> None:
    calls, rest = parse_text_calls(
        'Let me check the weather for you. <|tool_call>call:get_weather{location:<|"|>Paris<|"|>}<tool_call|>'
        '<|tool_call>call:get_time{location:<|"|>London<|"|>}<tool_call|>'
    )
    assert [c.name for c in calls] == ["get_weather", "get_time"]
    assert rest == "Let me check the weather for you."


def test_nested_arguments_numbers_booleans_and_no_arguments() -> None:
    calls, _ = parse_text_calls(
        '<|tool_call>call:complex_function{nested:{inner:<|"|>value<|"|>},list:[<|"|>a<|"|>,<|"|>b<|"|>]}<tool_call|>'
        "<|tool_call>call:set_status{is_active:true,count:42,score:3.14}<tool_call|>"
        "<|tool_call>call:get_status{}<tool_call|>"
    )
    assert [(c.name, c.arguments) for c in calls] == [
        ("complex_function", {"nested": {"inner": "value"}, "list": ["a", "b"]}),
        ("set_status", {"is_active": True, "count": 42, "score": 3.14}),
        ("get_status", {}),
    ]


def test_hyphenated_and_dotted_function_names() -> None:
    for name in ("get-weather", "weather.get"):
        calls, _ = parse_text_calls(f'<|tool_call>call:{name}{{location:<|"|>London<|"|>}}<tool_call|>')
        assert calls[0].name == name


def test_incomplete_call_without_end_tag() -> None:
    # vLLM (test_incomplete_tool_call) leaves this as content; we recover it (the value runs to the end, as in
    # vLLM's unterminated-string rule), since a small model that stops early still meant the call.
    calls, _ = parse_text_calls('<|tool_call>call:get_weather{location:<|"|>London')
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", {"location": "London"})]


# --- Streaming cases, as the whole text they add up to ------------------------------------------------------
def test_streamed_texts_whole() -> None:
    calls, rest = parse_text_calls(
        '<|tool_call>call:write_file{path:<|"|>index.html<|"|>,content:<|"|><!DOCTYPE html>\n<html lang="zh-CN">\n'
        '<head>\n<|"|>}<tool_call|><div>'
    )  # test_streaming_html_argument_does_not_duplicate_tag_prefixes + ..._plain_text_after_tool_call
    assert calls[0].arguments == {"path": "index.html", "content": '<!DOCTYPE html>\n<html lang="zh-CN">\n<head>\n'}
    assert rest == "<div>"
    calls, _ = parse_text_calls(
        '<|tool_call>call:Edit{file_path:<|"|>src/env.py<|"|>,old_string:<|"|>old_val<|"|>,'
        'new_string:<|"|>new_val<|"|>,replace_all:false}<tool_call|>'
    )  # test_streaming_trailing_bare_bool_not_duplicated
    assert calls[0].arguments["replace_all"] is False
    calls, _ = parse_text_calls("<|tool_call>call:search{input:{all:true}}<tool_call|>")
    assert calls[0].arguments == {"input": {"all": True}}


# --- Special tokens stripped by the server: never cut a value short ------------------------------------------
def test_stripped_tokens_value_with_brace_and_comma_survives() -> None:
    calls, _ = parse_text_calls("call:get_logs{contains:host:8080 {x}, y,since_minutes:15}")
    assert calls[0].arguments == {"contains": "host:8080 {x}, y", "since_minutes": 15}
    calls, _ = parse_text_calls("call:get_logs{contains:a}b, c}")
    assert calls[0].arguments == {"contains": "a}b, c"}


def test_stripped_tokens_value_without_a_clear_end_is_unparseable() -> None:
    calls, _ = parse_text_calls("call:get_logs{contains:no end here, and none")
    assert calls[0].name == "get_logs" and calls[0].error
    calls, _ = parse_text_calls("call:get_logs{contains:a}b<tool_call|>")
    assert calls[0].error


def test_tag_fragments_are_not_left_in_the_text() -> None:
    calls, rest = parse_text_calls("Looking.\n<tool_call>call:service_status{}</tool_call>")
    assert [c.name for c in calls] == ["service_status"]
    assert rest == "Looking."

import json

import pytest

from sam3_agent_ros.core.errors import Mistake
from sam3_agent_ros.core.protocol import (
    SEGMENT,
    SELECT,
    TOOL_FUNCTIONS,
    TOOLS,
    ToolCall,
    clip_reasoning,
    interpret,
    normalize_prompt,
    parse_verdict,
    split_thinking,
)
from sam3_agent_ros.core.types import LlmReply, NativeToolCall


def call_of(reply: str) -> ToolCall:
    """The call a text reply makes (the test fails when the reply is a mistake)."""
    parsed = interpret(LlmReply(reply))
    assert parsed.mistake is None, parsed.mistake
    return parsed.call


def mistake_of(reply: str) -> str:
    parsed = interpret(LlmReply(reply))
    assert parsed.call is None and isinstance(parsed.mistake, Mistake)
    return parsed.mistake.text


def test_parses_the_first_tool_call_and_ignores_reasoning_and_later_calls():
    reply = ('Blue things first. <tool>{"name": "segment_phrase", "parameters": '
             '{"text_prompt": "blue box"}}</tool> <tool>{"name": "report_no_mask"}</tool>')
    parsed = interpret(LlmReply(reply))
    assert parsed.call == ToolCall("segment_phrase", {"text_prompt": "blue box"})
    assert parsed.kept_text.endswith('"blue box"}}</tool>') and parsed.ignored_calls == 1


def test_missing_parameters_key_means_no_parameters():
    assert call_of('<tool>{"name": "examine_each_mask"}</tool>').parameters == {}
    assert call_of(
        '<tool>{"name": "report_no_mask", "parameters": null}</tool>').parameters == {}


def test_think_blocks_are_ignored():
    reply = ('<think>maybe <tool>{"name": "report_no_mask"}</tool></think>'
             '<tool>{"name": "examine_each_mask", "parameters": {}}</tool>')
    assert call_of(reply).name == "examine_each_mask"


@pytest.mark.parametrize("reply, fragment", [
    ("", "was empty"),
    ("I think the cube is blue.", "no <tool> call"),
    ("<tool>{}", "not closed"),
    ("<tool>{'name': 'x'}</tool>", "not valid JSON"),
    ('<tool>"segment_phrase"</tool>', "JSON object"),
    ('<tool>{"name": "segment"}</tool>', "Unknown tool 'segment'"),
    ('<tool>{"name": "report_no_mask", "parameters": {}, "id": 3}</tool>', "Unexpected keys"),
    ('<tool>{"name": "report_no_mask", "parameters": []}</tool>', "must be a JSON object"),
    ('<tool>{"name": "examine_each_mask", "parameters": {"all": true}}</tool>', "unexpected"),
    ('<tool>{"name": "select_masks_and_return", "parameters": {"final_answer_masks": 1}}'
     '</tool>', "must be a JSON array"),
    ('<tool>{"name": "select_masks_and_return", "parameters": {"final_answer_masks": [true]}}'
     '</tool>', "integer mask ids"),
    ('<tool>{"name": "select_masks_and_return", "parameters": {"final_answer_masks": [1.5]}}'
     '</tool>', "integer mask ids"),
])
def test_malformed_calls_are_corrective_mistakes(reply, fragment):
    assert fragment in mistake_of(reply)


@pytest.mark.parametrize("reply, verdict", [
    ("ok <verdict>Accept</verdict>", True),
    ("<verdict> reject </verdict>", False),
    ("format is <verdict>Accept</verdict>; mine: <verdict>Reject</verdict>", False),
    ("I accept it", None),
    ("<verdict>Maybe</verdict>", None),
])
def test_verdicts(reply, verdict):
    assert parse_verdict(reply) is verdict


def test_prompt_normalisation_for_duplicates():
    assert normalize_prompt("  Blue   Box. ") == normalize_prompt("blue box")
    assert normalize_prompt("blue box") != normalize_prompt("blue boxes")


def test_qwen_xml_call_form_takes_strings_verbatim_and_json_for_other_types():
    call = call_of("<tool_call><function=select_masks_and_return><parameter="
                           "final_answer_masks>[2, 1]</parameter></function></tool_call>")
    assert call.parameters == {"final_answer_masks": [2, 1]}
    call = call_of("<tool_call><function=segment_phrase><parameter=text_prompt> 42 "
                           "</parameter></function></tool_call>")
    assert call.parameters == {"text_prompt": "42"}
    assert "not closed" in mistake_of("<tool_call><function=segment_phrase><parameter="
                                      "text_prompt>x</parameter></tool_call>")
    assert "must be JSON" in mistake_of("<tool_call><function=select_masks_and_return>"
                                        "<parameter=final_answer_masks>one</parameter>"
                                        "</function></tool_call>")


@pytest.mark.parametrize("text, thinking, answer", [
    ("plain answer", "", "plain answer"),
    ("I think.\n</think>\n\nanswer", "I think.", "answer"),
    ("<think>a</think> b <think>c</think> d", "a</think> b c", "d"),
    ("answer <think>unclosed to the end", "unclosed to the end", "answer"),
    ("<THINK>x</THINK>y", "x", "y"),
])
def test_split_thinking(text, thinking, answer):
    found_thinking, found_answer = split_thinking(text)
    assert found_answer == answer
    assert found_thinking.replace("</think>", "").split() == thinking.replace(
        "</think>", "").split()


def test_a_call_inside_thinking_is_never_taken():
    reply = ('I could call <tool>{"name": "report_no_mask", "parameters": {}}</tool>.\n'
             '</think>\nNo call here.')
    parsed = interpret(LlmReply(reply))
    assert parsed.call is None and "no <tool> call" in parsed.mistake.text
    assert "report_no_mask" not in parsed.kept_text


def test_native_first_call_runs_and_the_rest_are_counted():
    calls = (NativeToolCall("a", "segment_phrase", '{"text_prompt": "cup"}'),
             NativeToolCall("b", "report_no_mask", "{}"))
    parsed = interpret(LlmReply("Cups first.", tool_calls=calls), native=True)
    assert parsed.call.name == "segment_phrase" and parsed.native_call is calls[0]
    assert parsed.ignored_calls == 1 and parsed.reasoning == "Cups first."


def test_native_tool_calls_are_ignored_in_the_text_protocol():
    calls = (NativeToolCall("a", "report_no_mask", "{}"),)
    parsed = interpret(LlmReply("", tool_calls=calls), native=False)
    assert parsed.call is None and "empty" in parsed.mistake.text


def test_native_mistakes_keep_the_call_so_its_id_is_answered():
    parsed = interpret(LlmReply("", tool_calls=(NativeToolCall("x", "nope", "{}"),)), True)
    assert parsed.call is None and parsed.native_call.id == "x"
    assert "Unknown function 'nope'" in parsed.mistake.text


def test_reasoning_is_the_answer_before_the_call_else_the_thinking():
    call = '<tool>{"name": "report_no_mask"}</tool>'
    assert interpret(LlmReply(f"Nothing blue. {call}")).reasoning == "Nothing blue."
    assert interpret(LlmReply(f"Long thought.</think>{call}")).reasoning == "Long thought."
    assert interpret(LlmReply(call, reasoning="Server field.")).reasoning == "Server field."


def test_clip_reasoning_keeps_the_end():
    assert clip_reasoning("a  b\n c", 100) == "a b c"
    assert clip_reasoning("x" * 50 + "END", 10) == "...xxxxEND"
    assert clip_reasoning("anything", 0) is None and clip_reasoning("  ", 10) is None


def test_verdicts_ignore_thinking():
    assert parse_verdict("<verdict>Reject</verdict> hmm </think> <verdict>Accept</verdict>")
    assert parse_verdict("Maybe <verdict>Accept</verdict></think> No verdict here.") is None


# --- attacks: a pathological reply is a model mistake (a corrective turn), never an exception --

DEEP = "[" * 5000 + "]" * 5000
HUGE_INT = "9" * 5000


@pytest.mark.parametrize("body,fragment", [
    (f'{{"name": "segment_phrase", "parameters": {{"text_prompt": {DEEP}}}}}',
     "nested more than 32 levels deep"),
    (f'{{"name": "select_masks_and_return", "parameters": {{"final_answer_masks": [{HUGE_INT}]}}}}',
     "a number of 5000 digits"),
    (f'{{"name": "select_masks_and_return", "parameters": "{{\\"final_answer_masks\\": '
     f'{DEEP}}}"}}', "must be a JSON object"),  # parameters as a JSON string
], ids=["deep", "huge-int", "deep-in-string-parameters"])
def test_text_protocol_turns_pathological_json_into_a_mistake(body, fragment):
    parsed = interpret(LlmReply(f"Answer. <tool>{body}</tool>"))
    assert parsed.call is None and fragment in parsed.mistake.text


def test_xml_call_form_turns_pathological_json_into_a_mistake():
    parsed = interpret(LlmReply(
        "<tool_call><function=select_masks_and_return><parameter=final_answer_masks>"
        f"[{HUGE_INT}]</parameter></function></tool_call>"))
    assert parsed.call is None and "must be JSON" in parsed.mistake.text


@pytest.mark.parametrize("arguments,fragment", [
    (f'{{"text_prompt": {DEEP}}}', "nested more than 32 levels deep"),
    (f'{{"final_answer_masks": [{HUGE_INT}]}}', "a number of 5000 digits"),
], ids=["deep", "huge-int"])
def test_native_protocol_turns_pathological_arguments_into_a_mistake(arguments, fragment):
    name = "segment_phrase" if "text_prompt" in arguments else "select_masks_and_return"
    parsed = interpret(LlmReply("", tool_calls=(NativeToolCall("c1", name, arguments),)),
                       native=True)
    assert parsed.call is None and fragment in parsed.mistake.text
    assert parsed.native_call.id == "c1"  # answered by a tool message, as any mistake


# --- the one table of tools -------------------------------------------------------------------


def test_the_tool_table_names_the_four_tools_of_the_contract():
    assert list(TOOLS) == ["segment_phrase", "examine_each_mask", "select_masks_and_return",
                           "report_no_mask"]
    assert {name: [p.name for p in tool.parameters] for name, tool in TOOLS.items()} == {
        "segment_phrase": ["text_prompt"], "examine_each_mask": [],
        "select_masks_and_return": ["final_answer_masks"], "report_no_mask": []}


def test_native_functions_derive_from_the_table():
    assert [f["function"]["name"] for f in TOOL_FUNCTIONS] == list(TOOLS)
    for function in TOOL_FUNCTIONS:
        schema = function["function"]["parameters"]
        tool = TOOLS[function["function"]["name"]]
        assert function["type"] == "function" and function["function"]["description"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert list(schema["properties"]) == [p.name for p in tool.parameters]
        assert schema.get("required", []) == [p.name for p in tool.parameters]
    select = TOOL_FUNCTIONS[2]["function"]["parameters"]["properties"]["final_answer_masks"]
    assert select["type"] == "array" and select["items"] == {"type": "integer"}
    assert TOOL_FUNCTIONS[0]["function"]["parameters"]["properties"]["text_prompt"]["type"] \
        == "string"
    json.dumps(TOOL_FUNCTIONS)  # sent as JSON with every native request


@pytest.mark.parametrize("name", list(TOOLS))
def test_every_example_shown_to_the_model_is_a_valid_call(name):
    tool = TOOLS[name]
    assert call_of(tool.text_example()).name == name
    native = NativeToolCall("c1", name, tool.example_arguments())
    parsed = interpret(LlmReply("", tool_calls=(native,)), native=True)
    assert parsed.call == ToolCall(name, json.loads(tool.example_arguments()))
    assert tool.native_example() == f"{name}({tool.example_arguments()})"


def test_corrections_show_the_tools_own_example():
    text = mistake_of('<tool>{"name": "select_masks_and_return", "parameters": {}}</tool>')
    assert "missing ['final_answer_masks']" in text and TOOLS[SELECT].text_example() in text
    native = interpret(LlmReply("", tool_calls=(NativeToolCall("c", SEGMENT, "{}"),)), True)
    assert TOOLS[SEGMENT].native_example() in native.mistake.text


@pytest.mark.parametrize("name", ['["segment_phrase"]', '{"a": 1}', "3", "null"])
def test_a_tool_name_that_is_not_a_string_is_a_mistake(name):
    assert "Unknown tool" in mistake_of(f'<tool>{{"name": {name}, "parameters": {{}}}}</tool>')

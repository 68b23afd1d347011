import pytest

from sam3_agent_ros.core.errors import ModelMistake
from sam3_agent_ros.core.protocol import kept_text, normalize_prompt, parse_tool_call, parse_verdict


def test_parses_the_first_tool_call_and_ignores_reasoning_and_later_calls():
    reply = ('Blue things first. <tool>{"name": "segment_phrase", "parameters": '
             '{"text_prompt": "blue box"}}</tool> <tool>{"name": "report_no_mask"}</tool>')
    call = parse_tool_call(reply)
    assert call.name == "segment_phrase" and call.parameters == {"text_prompt": "blue box"}
    assert kept_text(reply).endswith('"blue box"}}</tool>')


def test_missing_parameters_key_means_no_parameters():
    assert parse_tool_call('<tool>{"name": "examine_each_mask"}</tool>').parameters == {}
    assert parse_tool_call(
        '<tool>{"name": "report_no_mask", "parameters": null}</tool>').parameters == {}


def test_think_blocks_are_ignored():
    reply = ('<think>maybe <tool>{"name": "report_no_mask"}</tool></think>'
             '<tool>{"name": "examine_each_mask", "parameters": {}}</tool>')
    assert parse_tool_call(reply).name == "examine_each_mask"


@pytest.mark.parametrize("reply, fragment", [
    ("", "no <tool> call"),
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
def test_malformed_calls_raise_a_corrective_mistake(reply, fragment):
    with pytest.raises(ModelMistake) as info:
        parse_tool_call(reply)
    assert fragment in str(info.value)


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

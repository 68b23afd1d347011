"""guarded_json: JSON from peers and models parsed within depth and number-length bounds."""

from __future__ import annotations

import json
import time

import pytest

from sam3_agent_ros.core import guarded_json
from sam3_agent_ros.core.guarded_json import MAX_DEPTH, MAX_DIGITS, JsonRefused


@pytest.mark.parametrize("text", [
    '{"id": "q-1", "query": "the red cup"}',
    '{"name": "select_masks_and_return", "parameters": {"final_answer_masks": [1, 2]}}',
    "[" * MAX_DEPTH + "]" * MAX_DEPTH,
    "1" * MAX_DIGITS,
    '{"q": "' + "[{" * 5000 + '"}',  # brackets inside a string are text
    '{"q": "\\"[[[[' + "[" * 100 + '"}',  # an escaped quote does not end the string
    '{"q": "\\\\", "r": ' + "[" * 3 + "]" * 3 + "}",  # an escaped backslash does
    '{"n": "' + "7" * 10_000 + '"}',  # digits inside a string are text
])
def test_ordinary_json_parses_as_json_does(text):
    assert guarded_json.loads(text) == json.loads(text)


@pytest.mark.parametrize("text,reason", [
    ("[" * 5000 + "]" * 5000, f"nested more than {MAX_DEPTH} levels deep"),  # RecursionError
    ('{"query": ' + "[" * 750, f"nested more than {MAX_DEPTH} levels deep"),  # the 1.5 kB query
    ("{" + '"a": {' * 40 + "}" * 41, f"nested more than {MAX_DEPTH} levels deep"),
    ("[" + "9" * 5000 + "]", "a number of 5000 digits"),  # ValueError (int max str digits)
    ("1." + "0" * 100, "a number of 100 digits"),
    ("{oops", "Expecting property name enclosed in double quotes at position 1"),
    ("", "Expecting value at position 0"),
])
def test_pathological_and_malformed_json_is_refused_with_a_reason(text, reason):
    with pytest.raises(JsonRefused) as caught:
        guarded_json.loads(text)
    assert reason in str(caught.value) and caught.value.reason == str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_the_bounds_are_parameters():
    assert guarded_json.loads("[[1]]", max_depth=2) == [[1]]
    with pytest.raises(JsonRefused, match="more than 1 levels"):
        guarded_json.loads("[[1]]", max_depth=1)
    with pytest.raises(JsonRefused, match="a number of 3 digits, more than 2"):
        guarded_json.loads("[123]", max_digits=2)


def test_the_scan_is_linear_on_adversarial_text():
    """Unterminated strings full of escapes, and a million brackets: well under a second each
    (a regex that re-scans from every quote would take minutes on these)."""
    for text in ('"' + '\\"' * 200_000, '"' * 200_001, "[" * 1_000_000, "1," * 300_000):
        started = time.monotonic()
        with pytest.raises(JsonRefused):
            guarded_json.loads(text)
        assert time.monotonic() - started < 5.0

"""core/finite_json.py: JSON the node writes never holds NaN or Infinity (issue 34)."""

from __future__ import annotations

import json
import math

import pytest

from sam3_agent_ros.core import finite_json


def test_finite_values_are_written_as_json_dumps_writes_them():
    value = {"a": [1, 2.5, {"b": None, "c": "x"}], "d": (1.0, -0.0)}
    assert finite_json.dumps(value) == json.dumps(value)
    assert finite_json.dumps(value, indent=1) == json.dumps(value, indent=1)


@pytest.mark.parametrize("number", [math.inf, -math.inf, math.nan])
def test_a_non_finite_number_becomes_null_never_a_bare_word(number):
    text = finite_json.dumps({"box": {"center": [number, 1.0]}, "n": number})
    assert "Infinity" not in text and "NaN" not in text
    assert json.loads(text) == {"box": {"center": [None, 1.0]}, "n": None}
    assert finite_json.non_finite_paths({"box": {"center": [number, 1.0]}}) == [
        "box.center[0]"]

"""Every writable parameter of a running node, set by a peer with every parameter type and
extreme values (issue 25: one string set on ``concepts.prompts`` killed the node, a padded one
stored 8 MB). The node runs as a user starts it (subprocess, offline backends, DDS on loopback);
the peer is the harness's parameter client, one ``set_parameters`` request per value carrying
every writable parameter (rclpy answers each one).

Checked: every reply is an answer (refused ones with a reason), every value that is bad whatever
the parameter is refused (wrong type, NaN, infinities, out of the declared range, megabytes of
text, padding beyond the bound); the node never dies; afterwards the start-up values come back,
a lifecycle cycle configures with them, and a query is answered correctly.
"""

from __future__ import annotations

import math
import os

import pytest
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterType, ParameterValue
from rcl_interfaces.srv import ListParameters, SetParameters, SetParametersAtomically
from rclpy.parameter import Parameter

from sam3_agent_demo.scene import render_scene
from sam3_agent_ros.config import PARAMETERS, PARAMETERS_BY_NAME
from sam3_agent_ros.ros.conversions import rgb8_image
from test.ros.helpers import NOT_SET, TRANSITION, Camera, Harness, NodeProcess

NS = "/fuzzed"
NODE = f"{NS}/sam3_agent"
QUERY = "the leftmost blue object"
ALIAS_BOMB = "a: &a [" + ",".join(["x"] * 9) + "]\n" + "".join(
    f"{b}: &{b} [" + ",".join([f"*{a}"] * 9) + "]\n" for a, b in zip("abcde", "bcdef"))
MB = 1_000_000
HUGE_TEXT = 100_000  # from this length, text is bad for every parameter (bloat)

# One request per value: (case id, value). The value's Python type gives its ROS type.
SMALL_VALUES = [
    ("true", True), ("false", False),
    ("zero", 0), ("minus-one", -1), ("int64-max", 2**63 - 1), ("int64-min", -2**63),
    ("0.0", 0.0), ("-1.0", -1.0), ("nan", math.nan), ("inf", math.inf), ("-inf", -math.inf),
    ("1e308", 1e308), ("-1e308", -1e308), ("denormal", 5e-324),
    ("empty-text", ""), ("space", " "), ("forged-line", "x\n[ERROR] [0.0] forged"),
    ("list-text", "[cup, red ball]"), ("alias-bomb", ALIAS_BOMB), ("deep-short", "[" * 2000),
    ("byte-array", [b"\x00", b"\xff"]), ("bool-array", [True, False]),
    ("int-array", [1, -(2**63)]), ("double-array", [math.nan, 1.5]),
    ("string-array", ["cup"]), ("empty-array", []), ("not-set", NOT_SET),
    ("deep-array", ["[" * 2000]), ("padded-array", [" " * 200 + "cup"]),
    ("many-array", [f"c{i}" for i in range(10_000)]), ("twice-array", ["cup", "Cup"]),
    ("blank-array", [""]),
]
# Big values go only to the text parameters (strings and string arrays): 1-8 MB each.
BIG_VALUES = [
    ("deep-1MB", "[" * MB), ("padded-1MB", " " * MB + "cup"), ("text-1MB", "x" * MB),
    ("padded-array-1MB", [" " * MB + "cup"]), ("array-1MB", ["x" * MB, "cup"]),
]
EIGHT_MB = [("text-8MB", " " * (8 * MB) + "x"), ("padded-array-8MB", [" " * (8 * MB) + "cup"])]


@pytest.fixture(scope="module")
def fuzzed(ros_env, tmp_path_factory):
    proc = NodeProcess(NS, {}, tmp_path_factory.mktemp("fuzzed"), dict(os.environ, **ros_env))
    harness = Harness("sam3_agent_fuzzer")
    try:
        harness.listen(f"{NODE}/result")
        harness.wait_state(NODE, "active", timeout=60)
        yield harness, proc
    finally:
        proc.stop()
        harness.close()


def ros_type(value) -> int:
    return ParameterType.PARAMETER_NOT_SET if value is NOT_SET else \
        Parameter(name="v", value=value).type_.value


def bad_for_every_parameter(descriptor, value, max_prompts: int, max_prompt_chars: int) -> str:
    """Why ``value`` must be refused for a parameter with ``descriptor`` ('' when it may be
    accepted: the node's own rules may still refuse it, with a reason)."""
    kind = ros_type(value)
    string_array = PARAMETERS_BY_NAME[descriptor.name].type is tuple
    if string_array:
        if value is NOT_SET or (isinstance(value, list) and not value):
            return ""  # an empty array of any type (or none) is the empty list: off
        if kind != ParameterType.PARAMETER_STRING_ARRAY:
            return "wrong type"
        if len(value) > max_prompts or any(len(v) > max_prompt_chars for v in value):
            return "over the bounds, padding included"
        return ""
    if kind != descriptor.type:
        return "wrong type"
    if kind == ParameterType.PARAMETER_DOUBLE:
        if not math.isfinite(value):
            return "not finite"
        for bound in descriptor.floating_point_range:
            if not bound.from_value <= value <= bound.to_value:
                return "out of range"
    if kind == ParameterType.PARAMETER_INTEGER:
        for bound in descriptor.integer_range:
            if not bound.from_value <= value <= bound.to_value:
                return "out of range"
    if kind == ParameterType.PARAMETER_STRING and len(value) >= HUGE_TEXT:
        return "huge text"
    return ""


def test_no_parameter_value_kills_freezes_or_bloats_the_node(fuzzed):
    harness, proc = fuzzed
    before = ask(harness, "before-fuzz")
    names = harness._call(ListParameters, f"{NODE}/list_parameters", ListParameters.Request(),
                          10).result.names
    table = [name for name in names if name in PARAMETERS_BY_NAME]
    descriptors = dict(zip(table, harness.describe_parameters(NODE, table), strict=True))
    writable = [name for name in table if not descriptors[name].read_only]
    # The node's writable parameters are the table's: none is missed here.
    assert set(writable) == {p.name for p in PARAMETERS if not p.read_only}
    texts = [name for name in writable if descriptors[name].type in (
        ParameterType.PARAMETER_STRING, ParameterType.PARAMETER_STRING_ARRAY)]
    started = harness.get_parameters(NODE, table)
    limits = (started["concepts.max_prompts"], started["concepts.max_prompt_chars"])

    cases = [(case, value, writable) for case, value in SMALL_VALUES]
    cases += [(case, value, texts) for case, value in BIG_VALUES]
    cases += [(case, value, ["concepts.prompts", "llm.model"]) for case, value in EIGHT_MB]
    must_refuse = 0
    for case, value, targets in cases:
        results = harness.set_parameters(NODE, {name: value for name in targets}, timeout=60)
        proc.check_alive()
        assert len(results) == len(targets), case
        for name, result in zip(targets, results, strict=True):
            bad = bad_for_every_parameter(descriptors[name], value, *limits)
            if bad:
                must_refuse += 1
                assert not result.successful, f"{case} on {name} ({bad}) was accepted"
            if not result.successful:
                assert result.reason.strip(), f"{case} on {name}: refused without a reason"
                assert len(result.reason) < 1000, f"{case} on {name}: a reason of " \
                                                  f"{len(result.reason)} chars"
    print(f"fuzz: {sum(len(c[2]) for c in cases)} sets, {must_refuse} must be refused")
    assert must_refuse > 1000  # the oracle is not empty

    # Nothing a peer sent is held beyond the bounds.
    held = harness.get_parameters(NODE, writable)
    assert all(len(v) < HUGE_TEXT for v in held.values() if isinstance(v, str))
    assert len(held["concepts.prompts"]) <= limits[0]
    assert all(len(v) <= limits[1] for v in held["concepts.prompts"])

    # A value of an unknown type (rclpy itself raises reading it), one at a time and atomically.
    odd = ParameterMsg(name="agent.max_rounds", value=ParameterValue(type=42))
    (answer,) = harness._call(SetParameters, f"{NODE}/set_parameters",
                              SetParameters.Request(parameters=[odd]), 10).results
    assert not answer.successful and answer.reason
    atomic = harness._call(SetParametersAtomically, f"{NODE}/set_parameters_atomically",
                           SetParametersAtomically.Request(parameters=[odd]), 10).result
    assert not atomic.successful and atomic.reason
    bad_atomic = harness.set_parameters_atomically(
        NODE, {"agent.max_rounds": 5, "concepts.prompts": "[" * 5000})
    assert not bad_atomic.successful and bad_atomic.reason
    proc.check_alive()

    # The start-up values come back, configure with them, and a query is answered.
    restored = harness.set_parameters(NODE, {name: started[name] for name in writable})
    assert [r.reason for r in restored if not r.successful] == []
    assert harness.get_parameters(NODE, table) == started
    for transition in (TRANSITION.TRANSITION_DEACTIVATE, TRANSITION.TRANSITION_CLEANUP,
                       TRANSITION.TRANSITION_CONFIGURE, TRANSITION.TRANSITION_ACTIVATE):
        assert harness.change_state(NODE, transition), transition
    after = ask(harness, "after-fuzz")
    assert after["status"] == "succeeded" and after["masks"], after
    assert after["masks"] == before["masks"] and after["text_prompts"] == before["text_prompts"]
    assert "Traceback" not in proc.log()


def ask(harness: Harness, query_id: str) -> dict:
    with Camera(harness, f"{NS}/image", rgb8_image(render_scene().rgb)) as camera:
        harness.send_query(NS, {"id": query_id, "query": QUERY})
        result = harness.wait_result(NS, query_id, timeout=60)
    assert camera.sent(result["stamp"])
    return result

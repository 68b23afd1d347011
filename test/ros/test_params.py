"""ROS parameters declared from config.PARAMETERS: descriptors, overrides, validation, the
read-only refusal and the change log lines (in-process nodes; test_trust_params.py attacks a node
process over the parameter services)."""

from __future__ import annotations

import sys

import pytest
import rclpy
import rclpy.node
from rclpy.parameter import Parameter as RosParameter

from sam3_agent_ros.config import PARAMETERS, PARAMETERS_BY_NAME, Config
from sam3_agent_ros.ros import params


@pytest.fixture(scope="module")
def context():
    ctx = rclpy.Context()
    rclpy.init(context=ctx)  # DDS on loopback: conftest.py set the environment
    yield ctx
    rclpy.shutdown(context=ctx)


@pytest.fixture
def make_node(context):
    nodes = []

    def make(**overrides):
        node = rclpy.create_node(
            "params_under_test", context=context,
            parameter_overrides=[RosParameter(k, value=v) for k, v in overrides.items()])
        nodes.append(node)
        return node

    yield make
    for node in nodes:
        node.destroy_node()


def test_every_parameter_has_a_descriptor_with_its_description():
    for param in PARAMETERS:
        descriptor = params.descriptor_for(param)
        assert descriptor.name == param.name
        assert descriptor.description == param.description and param.description


def test_descriptor_ranges_and_choices():
    timeout = params.descriptor_for(PARAMETERS_BY_NAME["llm.timeout_s"])
    (fp_range,) = timeout.floating_point_range
    assert (fp_range.from_value, fp_range.to_value) == (0.1, 3600.0)
    age = params.descriptor_for(PARAMETERS_BY_NAME["max_frame_age_s"])  # min only
    assert age.floating_point_range[0].to_value == sys.float_info.max
    rounds = params.descriptor_for(PARAMETERS_BY_NAME["agent.max_rounds"])
    (int_range,) = rounds.integer_range
    assert (int_range.from_value, int_range.to_value, int_range.step) == (1, 200, 0)
    policy = params.descriptor_for(PARAMETERS_BY_NAME["query_policy"])
    assert policy.additional_constraints == "one of: 'preempt', 'queue'"
    backend = params.descriptor_for(PARAMETERS_BY_NAME["segmenter.backend"])
    assert "plugin 'package.module:factory'" in backend.additional_constraints
    assert not params.descriptor_for(PARAMETERS_BY_NAME["llm.model"]).floating_point_range


def test_defaults_read_back_as_the_default_config(make_node):
    node = make_node()
    assert params.declare_parameters(node) == []
    assert params.read_config(node) == Config()
    described = node.describe_parameter("agent.max_rounds")
    assert described.description == PARAMETERS_BY_NAME["agent.max_rounds"].description


def test_overrides_are_read_into_the_config(make_node):
    node = make_node(**{"llm.model": "qwen", "agent.max_rounds": 5, "query_policy": "queue",
                        "segmenter.backend": "my_pkg.seg:factory"})
    assert params.declare_parameters(node) == []
    config = params.read_config(node)
    assert (config.llm.model, config.agent.max_rounds) == ("qwen", 5)
    assert config.node.query_policy == "queue"
    assert config.segmenter.backend == "my_pkg.seg:factory"


def test_integer_for_a_float_parameter_is_accepted(make_node):
    node = make_node(**{"llm.timeout_s": 60, "frame_wait_s": 1})
    assert params.declare_parameters(node) == []
    assert node.get_parameter("llm.timeout_s").value == 60.0
    assert params.read_config(node).node.frame_wait_s == 1.0


def test_bad_overrides_keep_the_default_and_say_why(make_node):
    node = make_node(**{"agent.max_rounds": 0, "llm.max_retries": "many",
                        "max_frame_age_s": -1.0})
    problems = params.declare_parameters(node)
    assert len(problems) == 3
    assert problems[0].text.startswith("llm.max_retries: 'many' is not a")
    assert [p.text for p in problems[1:]] == ["agent.max_rounds: 0 is below the minimum 1",
                                             "max_frame_age_s: -1.0 is below the minimum 0.0"]
    assert [p.name for p in problems] == ["llm.max_retries", "agent.max_rounds",
                                          "max_frame_age_s"]
    assert not any(p.fixed_by_restart for p in problems)  # dynamic: a runtime set fixes them
    assert node.get_parameter("agent.max_rounds").value == 16  # the default, kept


def test_choice_and_cross_field_problems_are_all_reported(make_node):
    node = make_node(**{"image_qos": "bogus", "query_policy": "lifo"})
    assert params.declare_parameters(node) == []  # strings: only the table knows the choices
    found = params.problems(params.current_values(node))
    assert [str(p) for p in found] == [
        "image_qos: 'bogus' is not one of 'sensor_data', 'reliable'",
        "query_policy: 'lifo' is not one of 'preempt', 'queue'"]
    with pytest.raises(Exception, match="image_qos"):
        params.read_config(node)
    values = {p.name: p.default for p in PARAMETERS}
    values.update({"depth.min_m": 5.0, "depth.max_m": 1.0})
    assert params.problems(values) == [
        params.Problem(None, "depth.min_m must be below depth.max_m")]


def test_runtime_changes_are_validated(make_node):
    node = make_node()
    params.declare_parameters(node)
    node.add_on_set_parameters_callback(
        lambda changes: params.validate_changes(params.current_values(node), changes))
    (bad,) = node.set_parameters([RosParameter("query_policy", value="lifo")])
    assert not bad.successful and "not one of 'preempt', 'queue'" in bad.reason
    (out_of_range,) = node.set_parameters([RosParameter("agent.max_rounds", value=0)])
    assert not out_of_range.successful
    (cross,) = node.set_parameters([RosParameter("depth.min_m", value=20.0)])
    assert not cross.successful and cross.reason == "depth.min_m must be below depth.max_m"
    (good,) = node.set_parameters([RosParameter("query_policy", value="queue")])
    assert good.successful and params.read_config(node).node.query_policy == "queue"


def test_one_bad_value_can_be_fixed_while_another_is_pending():
    current = {p.name: p.default for p in PARAMETERS}
    current.update({"image_qos": "bogus", "agent.max_rounds": 0})
    fix = params.validate_changes(current, [RosParameter("agent.max_rounds", value=4)])
    assert fix.successful
    worse = params.validate_changes(current, [RosParameter("query_policy", value="x")])
    assert not worse.successful


READ_ONLY = ("llm.backend", "llm.base_url", "llm.api_key_env", "segmenter.backend",
             "segmenter.checkpoint", "segmenter.bpe_path", "segmenter.random_weights",
             "agent.prompts_dir", "max_query_chars", "queue_size")


def test_where_data_goes_what_runs_and_peer_limits_are_read_only():
    marked = {p.name for p in PARAMETERS if p.read_only}
    assert set(READ_ONLY) <= marked
    for name in marked:
        descriptor = params.descriptor_for(PARAMETERS_BY_NAME[name])
        assert descriptor.read_only, name
        assert "read-only: set at start-up" in descriptor.additional_constraints
    for name in ("llm.model", "llm.timeout_s", "agent.max_rounds", "query_policy"):  # tuning
        assert not params.descriptor_for(PARAMETERS_BY_NAME[name]).read_only


class ReadOnlyNode(params.ReadOnlyParameters, rclpy.node.Node):
    """What the node does: the mixin before rclpy's Node."""


@pytest.fixture
def read_only_node(context):
    node = ReadOnlyNode("read_only_under_test", context=context)
    params.declare_parameters(node)
    node.add_on_set_parameters_callback(
        lambda changes: params.validate_changes(params.current_values(node), changes))
    yield node
    node.destroy_node()


def test_a_read_only_set_answers_how_to_change_it(read_only_node):
    node = read_only_node
    (refused,) = node.set_parameters([RosParameter("llm.base_url", value="http://evil:1/v1")])
    assert not refused.successful
    assert refused.reason.startswith("llm.base_url is read-only after start-up")
    assert "restart the node" in refused.reason and "-p llm.base_url:=VALUE" in refused.reason
    assert "Trying to set a read-only parameter" not in refused.reason  # ours, not rclpy's
    assert node.get_parameter("llm.base_url").value == "http://127.0.0.1:8000/v1"


def test_a_list_sets_the_dynamic_ones_and_refuses_the_read_only_ones(read_only_node):
    node = read_only_node
    results = node.set_parameters([RosParameter("agent.max_rounds", value=4),
                                   RosParameter("segmenter.backend", value="os:abort"),
                                   RosParameter("llm.model", value="other")])
    assert [r.successful for r in results] == [True, False, True]
    assert "segmenter.backend is read-only" in results[1].reason
    default_backend = PARAMETERS_BY_NAME["segmenter.backend"].default
    assert node.get_parameter("segmenter.backend").value == default_backend
    assert (node.get_parameter("agent.max_rounds").value,
            node.get_parameter("llm.model").value) == (4, "other")


def test_an_atomic_set_with_a_read_only_parameter_sets_nothing(read_only_node):
    node = read_only_node
    result = node.set_parameters_atomically([
        RosParameter("agent.max_rounds", value=3), RosParameter("llm.api_key_env", value="HOME"),
        RosParameter("max_query_chars", value=10**9)])
    assert not result.successful
    assert result.reason.startswith("llm.api_key_env, max_query_chars are read-only")
    assert node.get_parameter("agent.max_rounds").value == 16
    assert node.get_parameter("llm.api_key_env").value == "OPENAI_API_KEY"


def test_unknown_overrides_are_problems_with_the_closest_name(context):
    node = rclpy.create_node(
        "typos_under_test", context=context, parameter_overrides=[
            RosParameter("llm.backnd", value="offline"), RosParameter("use_sim_time", value=False),
            RosParameter("qos_overrides./image.subscription.depth", value=5),
            RosParameter("zzz", value=1)])
    try:
        assert params.declare_parameters(node) == []
        problems = params.unknown_overrides(node)
        assert [p.text for p in problems] == [
            "unknown parameter 'llm.backnd' (did you mean 'llm.backend'?)",
            "unknown parameter 'zzz'"]
        assert all(p.fixed_by_restart for p in problems)
    finally:
        node.destroy_node()


def test_a_bad_start_up_value_of_a_read_only_parameter_needs_a_restart():
    values = {p.name: p.default for p in PARAMETERS}
    values.update({"llm.backend": "bogus", "agent.max_rounds": 0})
    found = params.problems(values)
    assert [(p.name, p.fixed_by_restart) for p in found] == [("llm.backend", True),
                                                            ("agent.max_rounds", False)]


@pytest.mark.parametrize("value,expected", [
    (16, "16"),
    ("a\n[ERROR] forged", "'a\\n[ERROR] forged'"),
    ("x" * 1_000_000, "'" + "x" * 79 + "... (1000002 chars)"),
], ids=["number", "newline", "1MB"])
def test_values_in_log_lines_are_escaped_and_bounded(value, expected):
    assert params.shown(value) == expected
    assert "\n" not in params.shown(value)


def test_change_lines_name_old_and_new_values_of_table_parameters_only():
    current = {"agent.max_rounds": 16, "llm.model": "a"}
    lines = params.change_lines(current, [RosParameter("agent.max_rounds", value=4),
                                          RosParameter("use_sim_time", value=True)])
    assert lines == ["agent.max_rounds: 16 -> 4"]


def test_a_string_array_is_typed_by_the_table_and_read_from_every_override(make_node):
    node = make_node()
    assert params.declare_parameters(node) == []
    assert node.get_parameter("concepts.prompts").value == []
    assert node.get_parameter("concepts.prompts").type_ == RosParameter.Type.STRING_ARRAY
    described = node.describe_parameter("concepts.prompts")
    assert described.dynamic_typing and "a list of strings" in described.additional_constraints
    given = make_node(**{"concepts.prompts": ["cup", "red ball"]})
    assert params.declare_parameters(given) == []
    assert params.read_config(given).concepts.prompts == ("cup", "red ball")
    empty = make_node(**{"concepts.prompts": []})  # rclpy calls an empty list a byte array
    assert params.declare_parameters(empty) == []
    assert params.read_config(empty).concepts.prompts == ()
    wrong = make_node(**{"concepts.prompts": "cup"})
    (problem,) = params.declare_parameters(wrong)
    assert problem.name == "concepts.prompts" and "is not a list of strings" in problem.text
    assert not problem.fixed_by_restart and wrong.get_parameter("concepts.prompts").value == []


def test_the_concept_list_is_checked_at_runtime_and_its_change_applies_now(make_node):
    node = make_node()
    params.declare_parameters(node)
    logged = []
    node.get_logger().info = logged.append  # what on_set_parameters logs
    node.add_on_set_parameters_callback(
        lambda changes: params.on_set_parameters(node, changes, configured=True))
    (good,) = node.set_parameters([RosParameter("concepts.prompts", value=["cup", "bottle"])])
    assert good.successful
    assert logged == ["parameter changed: concepts.prompts: [] -> ['cup', 'bottle'] "
                      "(applied now)"]
    (too_many,) = node.set_parameters([RosParameter("concepts.prompts",
                                                    value=[f"c{i}" for i in range(9)])])
    assert not too_many.successful and "more than concepts.max_prompts (8)" in too_many.reason
    (tuning,) = node.set_parameters([RosParameter("agent.max_rounds", value=4)])
    assert tuning.successful and logged[-1].endswith("(takes effect at the next configure: "
                                                     "deactivate, cleanup, configure, activate)")
    assert params.read_config(node).concepts.prompts == ("cup", "bottle")
    (not_a_list,) = node.set_parameters([RosParameter("concepts.prompts", value="cup")])
    assert not not_a_list.successful and "is not a list of strings" in not_a_list.reason
    # `ros2 param set NODE concepts.prompts "[]"` sends an empty bool array: off, and the
    # parameter stays a string array (the node's pre-set callback)
    node.add_pre_set_parameters_callback(params.typed_string_arrays)
    (off,) = node.set_parameters([RosParameter("concepts.prompts",
                                               RosParameter.Type.BOOL_ARRAY, [])])
    assert off.successful and params.read_config(node).concepts.prompts == ()
    assert node.get_parameter("concepts.prompts").type_ == RosParameter.Type.STRING_ARRAY
    assert node.describe_parameter("concepts.prompts").type == 9  # PARAMETER_STRING_ARRAY
    # `ros2 param load` of a file with `prompts: []` sends no value (rclpy: undeclare it)
    (loaded,) = node.set_parameters([RosParameter("concepts.prompts")])
    assert loaded.successful and node.get_parameter("concepts.prompts").value == []


# --- issue 25: a peer's value never takes the node down, no secret in a parameter -------------
class GuardedNode(params.ReadOnlyParameters, rclpy.node.Node):
    """The node's set path (the mixin) on a plain rclpy node."""


@pytest.fixture
def guarded(context):
    node = GuardedNode("guarded_under_test", context=context)
    params.declare_parameters(node)
    node.add_on_set_parameters_callback(
        lambda changes: params.on_set_parameters(node, changes, configured=True))
    node.add_pre_set_parameters_callback(params.typed_string_arrays)
    yield node
    node.destroy_node()


@pytest.mark.parametrize("value", ["[" * 2000, "[cup, bottle]", " " * 1_000_000 + "[cup]"],
                         ids=["deep", "list-text", "padded"])
def test_a_string_for_the_concept_list_is_refused_never_parsed(guarded, value):
    (result,) = guarded.set_parameters([RosParameter("concepts.prompts", value=value)])
    assert not result.successful and "is not a list of strings" in result.reason
    assert len(result.reason) < 300
    assert guarded.get_parameter("concepts.prompts").value == []


def test_padding_counts_in_the_concept_length(guarded):
    padded = [" " * 8_000_000 + "cup"]
    (result,) = guarded.set_parameters([RosParameter("concepts.prompts", value=padded)])
    assert not result.successful
    assert "8000003 characters, more than concepts.max_prompt_chars (100)" in result.reason
    assert guarded.get_parameter("concepts.prompts").value == []


def test_what_a_callback_raises_is_a_refusal_with_the_reason(guarded):
    def deep(changes):
        raise RecursionError("maximum recursion depth exceeded")

    guarded.add_on_set_parameters_callback(deep)
    (result,) = guarded.set_parameters([RosParameter("agent.max_rounds", value=5)])
    assert not result.successful
    assert result.reason == ("agent.max_rounds: refused, the value could not be checked "
                             "(RecursionError: maximum recursion depth exceeded)")
    guarded.remove_on_set_parameters_callback(deep)

    def broken(parameters):
        raise MemoryError

    guarded.add_pre_set_parameters_callback(broken)
    atomic = guarded.set_parameters_atomically([RosParameter("llm.model", value="x")])
    assert not atomic.successful and "(MemoryError: )" in atomic.reason
    guarded.remove_pre_set_parameters_callback(broken)
    assert guarded.get_parameter("agent.max_rounds").value == 16
    assert guarded.set_parameters([RosParameter("agent.max_rounds", value=5)])[0].successful


def test_credentials_in_the_endpoint_are_never_declared(make_node):
    url = "http://operator7:pass-hunter2@llm.example:8000/v1?api-key=K-9f3a7c1e"
    node = make_node(**{"llm.base_url": url, "llm.api_key_env": "MY_KEY"})
    events = []  # what /parameter_events would carry to every peer
    node._parameter_event_publisher.publish = events.append
    (problem,) = params.declare_parameters(node)
    declared = [p for event in events for p in event.new_parameters]
    assert "llm.base_url" in {p.name for p in declared}
    assert not any(secret in repr(events) for secret in ("pass-hunter2", "K-9f3a7c1e"))
    assert problem.name == "llm.base_url" and problem.fixed_by_restart
    assert problem.text.startswith("llm.base_url http://***@llm.example:8000/v1?api-key=*** "
                                   "carries credentials")
    assert "environment variable named by llm.api_key_env (export MY_KEY=<key>)" in problem.text
    assert node.get_parameter("llm.base_url").value == \
        "http://***@llm.example:8000/v1?api-key=***"
    plain = make_node(**{"llm.base_url": "https://api.openai.com/v1"})
    assert params.declare_parameters(plain) == []

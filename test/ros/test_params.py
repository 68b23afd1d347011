"""ROS parameters declared from config.PARAMETERS: descriptors, overrides, validation."""

from __future__ import annotations

import sys

import pytest
import rclpy
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
    assert problems[0].startswith("llm.max_retries: 'many' is not a")
    assert problems[1:] == ["agent.max_rounds: 0 is below the minimum 1",
                            "max_frame_age_s: -1.0 is below the minimum 0.0"]
    assert node.get_parameter("agent.max_rounds").value == 16  # the default, kept


def test_choice_and_cross_field_problems_are_all_reported(make_node):
    node = make_node(**{"image_qos": "bogus", "query_policy": "lifo"})
    assert params.declare_parameters(node) == []  # strings: only the table knows the choices
    found = params.problems(params.current_values(node))
    assert found == ["image_qos: 'bogus' is not one of 'sensor_data', 'reliable'",
                     "query_policy: 'lifo' is not one of 'preempt', 'queue'"]
    with pytest.raises(Exception, match="image_qos"):
        params.read_config(node)
    values = {p.name: p.default for p in PARAMETERS}
    values.update({"depth.min_m": 5.0, "depth.max_m": 1.0})
    assert params.problems(values) == ["depth.min_m must be below depth.max_m"]


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

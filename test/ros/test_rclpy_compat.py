"""sam3_agent_ros/ros/rclpy_compat.py: one `with` form of rclpy.init on Humble/Jazzy (rclpy 7.x,
init returns None) and Kilted (rclpy 9.x, init returns a context manager).

`make test` runs this file with both: in .venv (Kilted) and in .venv-jazzy (Jazzy).
"""

from __future__ import annotations

import importlib.metadata

import pytest
import rclpy

from sam3_agent_ros.ros.rclpy_compat import InitFailed, initialized


def _rclpy_major() -> int:
    return int(importlib.metadata.version("rclpy").split(".")[0])


def test_the_distros_differ_where_the_shim_says():
    context = rclpy.Context()
    returned = rclpy.init(context=context)
    try:
        if _rclpy_major() < 8:
            assert returned is None
        else:
            assert hasattr(returned, "__enter__") and hasattr(returned, "__exit__")
    finally:
        rclpy.try_shutdown(context=context)


def test_context_is_up_inside_and_shut_down_after():
    context = rclpy.Context()
    with initialized(context=context) as inside:
        assert inside is context
        assert context.ok()
    assert not context.ok()


def test_arguments_reach_the_nodes_of_the_context():
    context = rclpy.Context()
    with initialized(args=["prog", "--ros-args", "-r", "__ns:=/robot7"], context=context):
        node = rclpy.create_node("compat_probe", context=context)
        try:
            assert node.get_namespace() == "/robot7"
        finally:
            node.destroy_node()


def test_an_exception_inside_still_shuts_down_and_propagates():
    context = rclpy.Context()
    with pytest.raises(RuntimeError, match="boom"), initialized(context=context):
        raise RuntimeError("boom")
    assert not context.ok()


def test_a_shutdown_from_inside_is_not_an_error_on_the_way_out():
    context = rclpy.Context()
    with initialized(context=context):
        rclpy.shutdown(context=context)
    assert not context.ok()


def test_default_context_when_none_is_given():
    with initialized(args=["prog"]) as context:
        assert context is rclpy.get_default_context()
        assert context.ok()
    assert not rclpy.get_default_context().ok()


def test_arguments_rcl_refuses_raise_init_failed_on_one_line(tmp_path):
    bad = tmp_path / "mixed.yaml"
    bad.write_text('/**:\n  ros__parameters:\n    x: [1, "s"]\n')
    context = rclpy.Context()
    with pytest.raises(InitFailed) as raised, initialized(
            args=["prog", "--ros-args", "--params-file", str(bad)], context=context):
        pass
    assert "Couldn't parse params file" in str(raised.value)
    assert "\n" not in str(raised.value)
    assert not context.ok()

"""``sam3-agent ask`` argument handling without ROS (goals over DDS: test/ros/test_action.py)."""

from __future__ import annotations

import pytest

from sam3_agent_ros.cli import main


def test_ask_needs_ros(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["ask", "the cup"])
    assert caught.value.code == 2
    assert "--ros" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["   "], "the query is empty"),
    (["the cup", "--timeout", "0"], "--timeout must be > 0"),
])
def test_ask_usage_errors_exit_2_before_touching_ros(args, message, capsys):
    assert main(["ask", "--ros", *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["the cup", "--stop-follow"], "--stop-follow takes no query, --follow or --refines"),
    (["--stop-follow", "--follow"], "--stop-follow takes no query, --follow or --refines"),
    (["--stop-follow", "--refines", "q-1"], "--stop-follow takes no query, --follow or --refines"),
    (["--topic"], "the query is empty"),
    (["the cup", "--node", "/"], "--node: the node name is empty"),
])
def test_ask_topic_and_stop_follow_usage_errors_exit_2_before_touching_ros(args, message,
                                                                           capsys):
    assert main(["ask", "--ros", *args]) == 2
    assert message in capsys.readouterr().err

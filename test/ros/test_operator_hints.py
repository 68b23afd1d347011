"""What the node tells its operator to do (ros/operator_hints.py): commands that work as written."""

from __future__ import annotations

from sam3_agent_ros.ros import operator_hints
from sam3_agent_ros.ros.params import Problem

NODE = "/robot1/sam3_agent"


def test_manual_start_gives_both_forms_of_both_transitions_with_the_real_name():
    text = operator_hints.manual_start(NODE)
    assert ("'ros2 lifecycle set /robot1/sam3_agent configure' then "
            "'ros2 lifecycle set /robot1/sam3_agent activate'") in text
    assert ("'sam3-agent lifecycle configure --node /robot1/sam3_agent' then "
            "'sam3-agent lifecycle activate --node /robot1/sam3_agent'") in text


def test_a_dynamic_problem_is_fixed_by_a_set_and_a_configure():
    text = operator_hints.fix_parameters(
        [Problem("agent.max_rounds", "agent.max_rounds: 0 ...")], NODE)
    assert text.startswith(f"set corrected values ('ros2 param set {NODE} NAME VALUE')")
    assert operator_hints.lifecycle_command(NODE, "configure") in text
    assert "restart" not in text


def test_a_read_only_or_unknown_problem_needs_a_restart_whatever_else_is_wrong():
    problems = [Problem("agent.max_rounds", "..."), Problem("segmenter.backend", "..."),
                Problem("llm.backnd", "unknown parameter 'llm.backnd'"), Problem(None, "...")]
    text = operator_hints.fix_parameters(problems, NODE)
    assert text.startswith("restart the node with corrected start-up values")
    assert "for: llm.backnd (not a parameter: remove or correct it), segmenter.backend;" in text
    assert "configure" not in text  # a configure cannot help before the restart


def test_autostart_failure_says_the_node_exits_and_how_to_fix_it_in_place():
    assert operator_hints.autostart_failed(NODE, restart_only=True) == \
        f"autostart: configure failed (see above); {operator_hints.EXITING}"
    assert "exits with status 1" in operator_hints.EXITING
    text = operator_hints.autostart_failed(NODE, restart_only=False)
    assert text.startswith("autostart: configure failed (see above); the node exits")
    assert "start it with autostart:=false" in text
    assert f"'ros2 lifecycle set {NODE} activate'" in text
    assert f"'sam3-agent lifecycle activate --node {NODE}'" in text


def test_backend_failures_name_the_restart_and_the_configure():
    text = operator_hints.fix_backends(NODE)
    assert "restart the node with a corrected value" in text
    assert operator_hints.lifecycle_command(NODE, "configure") in text

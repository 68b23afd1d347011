"""test/ros/helpers.py: a node process that dies at start-up fails the waiting test at once, with
its log, instead of after the test's timeouts (minutes over a module of tests)."""

from __future__ import annotations

import os

import pytest

from test.ros.helpers import Harness, NodeDied, NodeProcess, check_nodes_alive

NS = "/helpers_probe"


@pytest.fixture
def dead_node(tmp_path):
    # rcl refuses this domain id in rclpy.init(): the process exits before any node exists.
    proc = NodeProcess(NS, {}, tmp_path, env=dict(os.environ, ROS_DOMAIN_ID="not-a-number"))
    try:
        proc.process.wait(60)
        yield proc
    finally:
        proc.stop()


def test_a_dead_node_is_reported_with_its_log(dead_node):
    with pytest.raises(NodeDied) as info:
        check_nodes_alive()
    message = str(info.value)
    assert dead_node.process.returncode != 0
    assert f"{NS}/sam3_agent exited with status {dead_node.process.returncode}" in message
    assert "ROS_DOMAIN_ID is not an integral number" in message  # the log's tail comes along


def test_harness_waits_stop_at_once_when_the_node_died(dead_node):
    harness = Harness("helpers_test")
    try:
        # The node can never become active; without the check this waits the full 600 s.
        with pytest.raises(NodeDied):
            harness.wait_state(dead_node.name, "active", timeout=600)
    finally:
        harness.close()


def test_a_node_stopped_by_the_test_is_not_reported(tmp_path):
    proc = NodeProcess(NS, {}, tmp_path)
    harness = Harness("helpers_test")
    try:
        harness.wait_state(proc.name, "active", timeout=60)
    finally:
        harness.close()
        assert proc.stop() == 0
    check_nodes_alive()

"""test/ros/helpers.py: a node process that dies at start-up fails the waiting test at once, with
its log, instead of after the test's timeouts (minutes over a module of tests); the test
executor's spinner survives rclpy's wait-set races and stops on a failed callback."""

from __future__ import annotations

import os
import time

import pytest

from test.ros.helpers import (
    Harness,
    NodeDied,
    NodeProcess,
    Spinner,
    SpinnerDied,
    check_nodes_alive,
)
from test.waiting import wait_until

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


# --- Spinner: rclpy's wait-set races are waited again, a failed callback stops it -------------

def _wait_for_ready_callbacks():  # named like rclpy's wait-set builder, where the races raise
    raise AttributeError("'ActionClient' object has no attribute '_lock'")


class _Running:
    def ok(self) -> bool:
        return True


class _ScriptedExecutor:
    """``spin_once`` raises what the script says, from where rclpy would raise it."""

    def __init__(self, script: list[str | None], then: str | None = None):
        self.context = _Running()
        self._script, self._then = list(script), then
        self.spins = 0

    def spin_once(self, timeout_sec: float) -> None:
        self.spins += 1
        step = self._script.pop(0) if self._script else self._then
        if step == "wait_set":
            _wait_for_ready_callbacks()
        if step == "callback":
            raise RuntimeError("a callback failed")
        time.sleep(0.001)

    def wake(self) -> None:
        pass


def test_the_spinner_spins_on_through_wait_set_races():
    executor = _ScriptedExecutor(["wait_set"] * 3)
    spinner = Spinner(executor, "races")
    try:
        wait_until(lambda: executor.spins >= 10, "ten spins")
        assert spinner.error is None and spinner.wait_set_races == 3
        spinner.check()
    finally:
        spinner.stop()


def test_the_spinner_stops_on_a_failed_callback_and_the_waits_say_why():
    executor = _ScriptedExecutor(["wait_set", "callback"])
    spinner = Spinner(executor, "callback")
    try:
        wait_until(lambda: spinner.error is not None, "the spinner to fail")
        assert isinstance(spinner.error, RuntimeError) and spinner.wait_set_races == 1
        with pytest.raises(SpinnerDied, match="a callback failed"):
            spinner.check()
    finally:
        spinner.stop()


def test_a_race_that_never_ends_is_no_race():
    executor = _ScriptedExecutor([], then="wait_set")
    spinner = Spinner(executor, "endless")
    try:
        wait_until(lambda: spinner.error is not None, "the spinner to fail")
        assert isinstance(spinner.error, AttributeError)
        assert spinner.wait_set_races == Spinner.MAX_WAIT_SET_RACES
    finally:
        spinner.stop()


def test_the_test_node_process_is_the_demos_harness(tmp_path):
    """One node-process harness: the tests' NodeProcess adds its parameters file, namespace and
    the running-nodes check to the demos' (sam3_agent_demo.node_process), which starts, logs and
    stops the process for both."""
    from sam3_agent_demo import node_process

    assert issubclass(NodeProcess, node_process.NodeProcess)
    assert NodeProcess.stop is not node_process.NodeProcess.stop  # the registry, then the base
    for own in ("running", "log", "log_tail", "startup_failure", "check_starting"):
        assert getattr(NodeProcess, own) is getattr(node_process.NodeProcess, own), own


# --- entities made between two turns: the race does not happen at all --------------------------

class _TurnRecorder(_ScriptedExecutor):
    """Records whether a turn (``spin_once``: a wait set being built) is under way."""

    def __init__(self) -> None:
        super().__init__([])
        self.in_turn = False

    def spin_once(self, timeout_sec: float) -> None:
        self.spins += 1
        self.in_turn = True
        try:
            time.sleep(0.005)  # a wait set being built, then the wait
        finally:
            self.in_turn = False


def test_an_entity_is_built_between_two_turns_of_the_spinner():
    executor = _TurnRecorder()
    spinner = Spinner(executor, "builds")
    try:
        seen = [spinner.paused(lambda: executor.in_turn) for _ in range(200)]
        assert not any(seen)
        assert spinner.paused(lambda: 42) == 42
        spins = executor.spins
        wait_until(lambda: executor.spins > spins, "the spinner to spin on")
    finally:
        spinner.stop()


def test_action_clients_made_while_the_harness_spins_raise_no_race(ros_env):
    """bench/node_exit.py died with ``AttributeError: ... '_lock'``: an ``ActionClient`` made
    while the harness's executor built a wait set. Made through the harness, none races."""
    from sam3_agent_ros.action import Segment

    harness = Harness("sam3_agent_helpers_clients")
    harness.created(lambda: harness.node.create_timer(0.0005, lambda: None))  # busy spinning
    try:
        for k in range(100):
            harness.action_client(Segment, f"/nobody{k}/sam3_agent/segment")
        time.sleep(0.3)
        harness._spinner.check()
        assert harness._spinner.wait_set_races == 0
    finally:
        harness.close()

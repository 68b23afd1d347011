"""The CLI verbs' one short-lived rclpy start-up (graph/verb_node.py)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

rclpy = pytest.importorskip("rclpy")

from sam3_agent_ros.graph.verb_node import verb_node  # noqa: E402


def test_a_stop_signal_only_sets_stop_and_the_old_handler_comes_back():
    before = signal.getsignal(signal.SIGTERM)
    with verb_node("sam3_agent_short_lived_test", stop_signals=(signal.SIGTERM,)) as ros:
        assert ros.context.ok() and ros.node.get_name() == "sam3_agent_short_lived_test"
        os.kill(os.getpid(), signal.SIGTERM)
        assert ros.stop.wait(5.0)
        context = ros.context
    assert signal.getsignal(signal.SIGTERM) is before
    assert not context.ok()  # shut down at the end of the block


@pytest.mark.parametrize("threads", [1, 2])
def test_spinning_runs_the_nodes_callbacks_until_the_block_ends(threads):
    ticks = threading.Event()
    with verb_node("sam3_agent_short_lived_spin") as ros:
        ros.node.create_timer(0.01, ticks.set)
        with ros.spinning(threads):
            assert ticks.wait(10.0)
        assert ros.stop.is_set()
        ticks.clear()
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline:
            time.sleep(0.02)
        assert not ticks.is_set()  # nobody spins it any more


def test_the_context_is_shut_down_when_the_block_raises():
    with pytest.raises(RuntimeError), verb_node("sam3_agent_short_lived_raise") as ros:
        context = ros.context
        raise RuntimeError("the verb failed")
    assert not context.ok()

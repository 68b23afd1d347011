"""sam3_agent_ros/ros/spinning.py: the executor returns once the context stops, even when nothing
wakes its wait (what rclpy's signal thread does when it is preempted between its two steps)."""

from __future__ import annotations

import threading
import time

import pytest
import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

from sam3_agent_ros.ros.spinning import spin_until_shutdown

CHECK_S = 0.2
WAIT_S = 20.0  # generous: a loaded 2-core machine


@pytest.fixture
def idle_executor():
    """An executor with one idle node (no timer, no subscription: nothing wakes it)."""
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("spinning_test", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    yield executor
    executor.shutdown(timeout_sec=1.0)
    node.destroy_node()
    rclpy.try_shutdown(context=context)


def test_returns_after_a_shutdown_that_woke_nobody(idle_executor):
    returned = threading.Event()
    waiting = threading.Event()

    def spin() -> None:
        try:
            waiting.set()
            spin_until_shutdown(idle_executor, CHECK_S)
        except ExternalShutdownException:
            pass
        returned.set()

    threading.Thread(target=spin, daemon=True).start()
    assert waiting.wait(WAIT_S)
    time.sleep(3 * CHECK_S)  # well inside its wait
    assert not returned.is_set()
    # rclpy's signal thread shuts the context down in C++: no on_shutdown callback, no wake-up
    # (Context.shutdown() from Python would wake the executor through its callbacks).
    idle_executor.context.handle.shutdown()
    assert returned.wait(WAIT_S), "the executor kept waiting after the context stopped"

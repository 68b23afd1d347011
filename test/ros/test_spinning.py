"""sam3_agent_ros/ros/spinning.py: the executor returns once the context stops, even when nothing
wakes its wait (what rclpy's signal thread does when it is preempted between its two steps), or
once asked to; Ctrl-C is noted, never raised in the middle of Python code."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
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


# Ctrl-C while Python code runs in the main thread (e.g. a message constructor inside rclpy's
# take): noted, never raised; rclpy still shuts the context down.
SIGINT_CHILD = r'''
import time
import rclpy
from std_msgs.msg import Header
from sam3_agent_ros.ros.spinning import sigint_noted

with sigint_noted() as noted:
    rclpy.init()
    context = rclpy.get_default_context()
    print("ready", flush=True)
    made = 0
    while not noted.is_set():  # Python code all the time, like messages being converted
        Header(frame_id="camera")
        made += 1
    for _ in range(200):  # rclpy's signal thread shuts the context down soon after
        if not context.ok():
            break
        time.sleep(0.05)
    print(f"noted after {made} messages; context ok: {context.ok()}", flush=True)
    rclpy.try_shutdown()
'''


def test_ctrl_c_is_noted_and_shuts_rclpy_down_without_raising():
    child = subprocess.Popen([sys.executable, "-c", SIGINT_CHILD], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        time.sleep(0.2)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=WAIT_S)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "context ok: False" in out, out


def test_spinning_stops_when_asked(idle_executor):
    stop = threading.Event()
    returned = threading.Event()

    def spin() -> None:
        spin_until_shutdown(idle_executor, CHECK_S, stop=stop.is_set)
        returned.set()

    threading.Thread(target=spin, daemon=True).start()
    time.sleep(3 * CHECK_S)
    assert not returned.is_set()
    stop.set()
    assert returned.wait(WAIT_S), "the executor kept spinning after stop() became true"
    assert idle_executor.context.ok()


class _Context:
    def __init__(self):
        self.running = True

    def ok(self) -> bool:
        return self.running


class _ShutDownWhileWaiting:
    """The context is shut down between the check and the wait: the wait raises as rclpy's does."""

    def __init__(self, shut_down: bool):
        self.context, self._shut_down = _Context(), shut_down

    def spin_once(self, timeout_sec: float) -> None:
        if self._shut_down:
            self.context.running = False
            raise RuntimeError("failed to initialize wait set: the given context is not valid")
        raise RuntimeError("a callback failed")


def test_a_wait_that_fails_because_the_context_went_down_ends_the_spin_quietly():
    spin_until_shutdown(_ShutDownWhileWaiting(shut_down=True), CHECK_S)


def test_a_failure_while_the_context_runs_is_raised():
    with pytest.raises(RuntimeError, match="a callback failed"):
        spin_until_shutdown(_ShutDownWhileWaiting(shut_down=False), CHECK_S)

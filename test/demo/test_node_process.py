"""The node subprocess of the demos and the ROS tests: its command line, its stop, its session."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from sam3_agent_demo import sample
from sam3_agent_demo.node_process import NodeProcess, node_arguments, node_env


def test_node_arguments_order_files_then_overrides_then_remaps():
    args = node_arguments([Path("a.yaml"), Path("b.yaml")], ["llm.model:=m"])
    assert args[:5] == ["--ros-args", "--params-file", "a.yaml", "--params-file", "b.yaml"]
    assert args[5:7] == ["-p", "llm.model:=m"]
    assert "image:=" + sample.COLOR_TOPIC in args and "query:=" + sample.QUERY_TOPIC in args
    custom = node_arguments([], [], remaps={"image": "/cam"})
    assert custom == ["--ros-args", "-r", "image:=/cam"]


# --- the one node-process harness (the demos', and the ROS tests' through test/ros/helpers.py) --

STUBBORN = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a node that does not end on Ctrl-C
print("ready", flush=True)
time.sleep(120)
"""


def _started(tmp_path, **kwargs) -> NodeProcess:
    process = NodeProcess([sys.executable, "-c", STUBBORN], tmp_path / "node.log",
                          node_env(), **kwargs)
    deadline = time.monotonic() + 30
    while "ready" not in process.log():
        assert process.running() and time.monotonic() < deadline, process.log()
        time.sleep(0.02)
    return process


@pytest.mark.parametrize(("hung_signal", "status"), [(None, -signal.SIGTERM),
                                                     (signal.SIGABRT, -signal.SIGABRT)])
def test_a_node_that_ignores_ctrl_c_gets_the_hung_signal(tmp_path, hung_signal, status):
    """The demos follow SIGINT with SIGTERM; the tests with SIGABRT (the node's stacks)."""
    kwargs = {} if hung_signal is None else {"hung_signal": hung_signal}
    process = _started(tmp_path, stop_timeout_s=0.2, **kwargs)
    assert process.stop() == status
    assert not process.running()


def test_the_node_runs_in_a_session_of_its_own_and_its_log_is_kept(tmp_path):
    """A terminal's Ctrl-C reaches the demo (or pytest), which stops the node itself."""
    process = _started(tmp_path, stop_timeout_s=0.2)
    try:
        assert os.getsid(process.process.pid) == process.process.pid != os.getsid(0)
    finally:
        process.stop()
    assert process.log_tail(1) == "ready"
    assert process.startup_failure() is None
    process.log_path.unlink()
    assert process.log() == ""  # an unreadable log is no crash

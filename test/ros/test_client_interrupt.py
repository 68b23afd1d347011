"""Ctrl-C on ``sam3-agent ask --ros`` (client.py): the goal is cancelled on the node and the
command exits at once (status 130), not at ``--timeout``.

One node with a segmenter slow enough (4 s a call) that the goal is still running when the
test sends SIGINT to the ``sam3-agent ask`` subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from std_msgs.msg import String

from sam3_agent_demo.scene import render_scene
from sam3_agent_ros.ros.conversions import rgb8_image
from test.ros.helpers import Camera, Harness, NodeProcess

NS = "/askint"
SLOW = {"segmenter": {"backend": "test.ros.slow_segmenter:factory"}}
QUERY = "the leftmost blue object"
EXIT_WAIT_S = 5.0  # generous for a loaded machine; the goal's own timeout is 120 s


@pytest.fixture(scope="module")
def ros(ros_env, tmp_path_factory):
    env = dict(os.environ, **ros_env, SLOW_SEGMENTER_S="4")
    proc = NodeProcess(NS, SLOW, tmp_path_factory.mktemp("ask_interrupt"), env)
    harness = Harness("sam3_agent_ask_interrupt_test")
    try:
        harness.listen(f"{NS}/sam3_agent/result", String)
        harness.listen(f"{NS}/sam3_agent/status", String)
        harness.wait_state(proc.name, "active", timeout=60)
        harness.wait_outputs_reach_us(NS)
        yield harness
    finally:
        proc.stop()
        harness.close()


def test_ctrl_c_on_ask_cancels_the_goal_and_exits_at_once(ros, ros_env):
    harness = ros
    script = Path(sys.executable).parent / "sam3-agent"
    with Camera(harness, f"{NS}/image", rgb8_image(render_scene().rgb)):
        ask = subprocess.Popen(
            [str(script), "ask", "--ros", QUERY, "--action", f"{NS}/sam3_agent/segment",
             "--query-id", "ctrl-c-1", "--timeout", "120"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, **ros_env))
        try:
            harness.wait_status(NS, "ctrl-c-1", "segmenting", timeout=60)
            ask.send_signal(signal.SIGINT)
            try:
                stdout, stderr = ask.communicate(timeout=EXIT_WAIT_S)
            except subprocess.TimeoutExpired:
                pytest.fail(f"sam3-agent ask still running {EXIT_WAIT_S:g} s after Ctrl-C")
        finally:
            if ask.poll() is None:
                ask.kill()
                ask.communicate()
    assert ask.returncode == 130, (ask.returncode, stdout, stderr)
    assert "interrupted" in stderr
    # The node ended the goal as cancelled (once the segmenter call it was in returns).
    result = harness.wait_result(NS, "ctrl-c-1", timeout=30)
    assert result["status"] == "cancelled", result
    if stdout.strip():  # the cancelled goal's result, when it came back in time
        assert json.loads(stdout)["status"] == "cancelled"

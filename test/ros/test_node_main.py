"""The node's exit (ros/node_main.py, CONTRACTS §11) over real rclpy: every accepted goal and
every taken topic query, running or waiting, ends with its result before the process exits, and
``sam3-agent ask --ros`` (the action and the ``--topic`` form) exits non-zero right after.

One node with a segmenter that takes 8 s a call and the queue policy: the goal of an ``ask``
subprocess is inside that call, a ``ask --topic`` query and a query of this process wait behind
it, when the node gets SIGINT (then, in a second node, SIGTERM). Before the fix rclpy's signal
handler shut the context down at once: nothing was published, the action form waited for its
whole ``--timeout`` and the topic form until it was killed. The same node, before any camera,
names its image topic when a query finds no frame.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from std_msgs.msg import String

from sam3_agent_demo.scene import render_scene
from sam3_agent_ros.ros.conversions import rgb8_image
from test.ros.helpers import Camera, Harness, NodeProcess

SLOW = {"segmenter": {"backend": "test.ros.slow_segmenter:factory"}, "query_policy": "queue",
        "frame_wait_s": 0.5}
QUERY = "the leftmost blue object"
SHUTDOWN = "node shutting down"
ASK_TIMEOUT_S = 120  # the asks' own --timeout: far beyond what this test may wait
RESULT_WAIT_S = 5.0  # generous for a loaded machine (measured: well under 1 s)
ASK_EXIT_S = 2.0  # CONTRACTS §11: ask exits within 2 s of the node's exit


def _ask(ros_env: dict, ns: str, *args: str) -> subprocess.Popen:
    script = Path(sys.executable).parent / "sam3-agent"
    return subprocess.Popen([str(script), "ask", "--ros", QUERY, "--node", f"{ns}/sam3_agent",
                             "--timeout", str(ASK_TIMEOUT_S), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, **ros_env))


def _node(ns: str, ros_env: dict, tmp: Path) -> tuple[NodeProcess, Harness]:
    proc = NodeProcess(ns, SLOW, tmp, dict(os.environ, **ros_env, SLOW_SEGMENTER_S="8"))
    harness = Harness(f"sam3_agent_exit_test{ns.replace('/', '_')}")
    harness.listen(f"{ns}/sam3_agent/result", String)
    harness.listen(f"{ns}/sam3_agent/status", String)
    harness.wait_state(proc.name, "active", timeout=60)
    harness.wait_outputs_reach_us(ns)
    return proc, harness


def _ended_by(harness: Harness, ns: str, query_id: str, timeout: float) -> dict:
    return harness.wait_for(
        lambda: next((r for r in harness.json_messages(f"{ns}/sam3_agent/result")
                      if r["query_id"] == query_id and r["status"] == "failed"), None),
        timeout, f"the failed result of {query_id}")


def _exit_times(procs: list[subprocess.Popen], by: float) -> list[float]:
    """When each process exited (monotonic, looked at every 10 ms), or ``by`` for one still
    running then."""
    times: list[float | None] = [None] * len(procs)
    while None in times and time.monotonic() < by:
        for index, proc in enumerate(procs):
            if times[index] is None and proc.poll() is not None:
                times[index] = time.monotonic()
        time.sleep(0.01)
    return [by if at is None else at for at in times]


def _exits(proc: subprocess.Popen, by: float) -> tuple[int, str, str, float]:
    try:
        stdout, stderr = proc.communicate(timeout=max(0.1, by - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        pytest.fail(f"ask still running past its deadline: {stderr[-2000:]}")
    return proc.returncode, stdout, stderr, time.monotonic()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_every_goal_and_taken_query_ends_before_the_node_exits(ros_env, tmp_path, sig):
    ns = f"/exit_{sig.name.lower()}"
    proc, harness = _node(ns, ros_env, tmp_path)
    asks: list[subprocess.Popen] = []
    try:
        if sig == signal.SIGINT:  # once: the node names its image topic when no frame comes
            harness.send_query(ns, {"id": "no-camera", "query": QUERY})
            failed = _ended_by(harness, ns, "no-camera", 30)
            assert failed["error"] == f"no frame received on {ns}/image (waited 0.5 s)"
        with Camera(harness, f"{ns}/image", rgb8_image(render_scene().rgb)):
            asks.append(_ask(ros_env, ns, "--query-id", "goal-1"))  # the action
            harness.wait_status(ns, "goal-1", "segmenting", timeout=60)
            asks.append(_ask(ros_env, ns, "--topic", "--query-id", "topic-1"))
            harness.wait_status(ns, "topic-1", "queued", timeout=30)
            harness.send_query(ns, {"id": "topic-2", "query": QUERY})
            harness.wait_status(ns, "topic-2", "queued", timeout=30)
            signalled = time.monotonic()
            proc.send_signal(sig)  # goal-1 is 8 s inside its segmenter call
            ended = {query_id: _ended_by(harness, ns, query_id, RESULT_WAIT_S)
                     for query_id in ("goal-1", "topic-1", "topic-2")}
            results_in = time.monotonic() - signalled
            exited = _exit_times([proc.process, *asks], time.monotonic() + 15)
            status = proc.process.returncode
            node_exit = exited[0]
            outcomes = [_exits(ask, node_exit + ASK_EXIT_S + 1.0) for ask in asks]
    finally:
        for ask in asks:
            if ask.poll() is None:
                ask.kill()
                ask.communicate()
        proc.stop()
        harness.close()
    assert status == 0, proc.log_tail(40)
    assert {r["error"] for r in ended.values()} == {SHUTDOWN}, ended
    print(f"\n{sig.name}: results {results_in:.2f} s after the signal, node exit "
          f"{node_exit - signalled:.2f} s, asks (action, topic) exit "
          + ", ".join(f"{at - signalled:.2f} s" for at in exited[1:]) + " after the signal")
    for (returncode, stdout, stderr, _), at in zip(outcomes, exited[1:]):
        assert returncode == 1, (returncode, stdout, stderr)
        assert at - node_exit <= ASK_EXIT_S, (at - node_exit, stderr)
        result = json.loads(stdout)  # the result the node ended it with, as on ~/result
        assert (result["status"], result["error"]) == ("failed", SHUTDOWN), result
    log = proc.log()
    assert "ended 3 query(ies): goal-1, topic-1, topic-2" in log, log[-3000:]

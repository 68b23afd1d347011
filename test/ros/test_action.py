"""The action ``~/segment`` over real rclpy: node subprocesses, goals from this process.

Three nodes for the module (offline backends, DDS on loopback):
- /act1: colour segmenter, preempt policy (answers, bad goals, the client and ``sam3-agent ask``);
- /act2: the slow segmenter plugin, preempt policy (cancel, preemption by a goal or a topic query);
- /act3: the slow segmenter, queue policy with queue_size 1 (overflow rejected at goal time).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from sensor_msgs.msg import Image
from std_msgs.msg import String

from sam3_agent_demo.scene import render_scene
from sam3_agent_ros.action import Segment
from sam3_agent_ros.client import SegmentClient, SegmentError
from sam3_agent_ros.ros.conversions import rgb8_image
from test.ros.helpers import TRANSITION, Camera, Harness, NodeProcess

A1, A2, A3 = "/act1", "/act2", "/act3"
SLOW = {"segmenter": {"backend": "test.ros.slow_segmenter:factory"}}
CONFIGS = {A1: {"max_query_chars": 500}, A2: SLOW,
           A3: {**SLOW, "query_policy": "queue", "queue_size": 1}}
QUERY = "the leftmost blue object"
GOAL_WAIT_S = 30.0


def action(ns: str) -> str:
    return f"{ns}/sam3_agent/segment"


@pytest.fixture(scope="module")
def scene():
    return render_scene()


@pytest.fixture(scope="module")
def ros(ros_env, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("action_nodes")
    env = dict(os.environ, **ros_env, SLOW_SEGMENTER_S="1.0")
    procs = {ns: NodeProcess(ns, params, tmp, env) for ns, params in CONFIGS.items()}
    harness = Harness("sam3_agent_action_test")
    try:
        for ns in CONFIGS:
            harness.listen(f"{ns}/sam3_agent/result", String)
        for proc in procs.values():
            harness.wait_state(proc.name, "active", timeout=60)
        yield harness, procs
    finally:
        for proc in procs.values():
            proc.stop()
        harness.close()


class Goal:
    """One goal sent with a raw ActionClient (the harness spins it): feedback, status, result."""

    def __init__(self, harness: Harness, ns: str, query: str, query_id: str = ""):
        self.harness = harness
        self.client = _clients(harness, ns)
        assert self.client.wait_for_server(timeout_sec=20), f"no server {action(ns)}"
        harness.wait_outputs_reach_us(ns)  # the goal response reaches this (maybe new) client
        self.feedback: list = []
        self._changed = harness._changed
        sent = self.client.send_goal_async(Segment.Goal(query=query, query_id=query_id),
                                           feedback_callback=self._on_feedback)
        self.handle = self._wait(sent, "the goal response").result()
        self._result = self.handle.get_result_async() if self.handle.accepted else None

    def _on_feedback(self, message) -> None:
        with self._changed:
            self.feedback.append(message.feedback)
            self._changed.notify_all()

    def _wait(self, future, what: str):
        done = threading.Event()
        future.add_done_callback(lambda _: done.set())
        assert done.wait(GOAL_WAIT_S), f"timed out waiting for {what}"
        return future

    def wait_phase(self, phase: str) -> None:
        self.harness.wait_for(lambda: any(f.phase == phase for f in self.feedback), GOAL_WAIT_S,
                              f"feedback phase {phase}")

    def cancel(self) -> None:
        self._wait(self.handle.cancel_goal_async(), "the cancel response")

    def outcome(self) -> tuple[int, object]:
        response = self._wait(self._result, "the result").result()
        return response.status, response.result


_CLIENTS: dict = {}


def _clients(harness: Harness, ns: str) -> ActionClient:
    key = (id(harness), ns)
    if key not in _CLIENTS:
        _CLIENTS[key] = harness.action_client(Segment, action(ns))
    return _CLIENTS[key]


def image_array(msg: Image) -> np.ndarray:
    return np.frombuffer(msg.data, np.uint8).reshape(msg.height, msg.width)


def test_goal_gets_feedback_and_a_result_matching_the_frame(ros, scene):
    harness, _ = ros
    client = harness.created(lambda: SegmentClient(harness.node, action(A1)))
    harness.wait_outputs_reach_us(A1)
    feedback = []
    with Camera(harness, f"{A1}/image", rgb8_image(scene.rgb),
                frame_id="camera_color_optical_frame") as camera:
        outcome = client.send(QUERY, timeout_s=GOAL_WAIT_S, query_id="goal-1",
                              on_feedback=feedback.append)
    result = outcome.result
    assert outcome.goal_status == "SUCCEEDED"
    assert (result.status, result.error) == ("succeeded", "")
    # The node sends the feedback "done" just before the result, but on another topic: when
    # the result is taken first, rclpy drops that last feedback (the client knows the result).
    phases = [f.phase for f in feedback]
    assert len(phases) >= 2 and phases[0] == "queued" and "done" not in phases[:-1], phases
    assert {"thinking", "segmenting"} <= {f.phase for f in feedback}

    stamp = {"sec": result.header.stamp.sec, "nanosec": result.header.stamp.nanosec}
    assert camera.sent(stamp) and result.header.frame_id == "camera_color_optical_frame"
    for image in (result.mask, result.labels):
        assert (image.encoding, image.width, image.height) == ("mono8", 640, 480)
        assert image.header == result.header
    mask = image_array(result.mask)
    assert set(np.unique(mask)) == {0, 255}
    truth = scene.masks["blue_box"]
    assert ((mask > 0) & truth).sum() / ((mask > 0) | truth).sum() > 0.95
    np.testing.assert_array_equal(image_array(result.labels) == 1, mask == 255)

    assert [m.id for m in result.masks] == [1]
    ys, xs = np.nonzero(mask)
    np.testing.assert_allclose(result.masks[0].bbox, [xs.min(), ys.min(), xs.max(), ys.max()],
                               atol=1.5)
    assert result.masks[0].area == int((mask > 0).sum())
    assert result.target_valid is False  # no depth on this node

    as_json = json.loads(result.result_json)
    assert as_json["query_id"] == "goal-1" and as_json["status"] == "succeeded"
    assert as_json["backends"] == {"llm": "offline", "segmenter": "color"}
    assert harness.wait_result(A1, "goal-1") == as_json  # the same JSON went out on ~/result


def test_empty_query_goal_is_aborted_with_the_reason(ros):
    harness, _ = ros
    goal = Goal(harness, A1, "   ", query_id="empty-1")
    status, result = goal.outcome()
    assert status == GoalStatus.STATUS_ABORTED
    assert (result.status, result.error) == ("failed", "empty query")
    assert harness.wait_result(A1, "empty-1")["error"] == "empty query"


def test_cancel_ends_the_goal_canceled(ros, scene):
    harness, _ = ros
    with Camera(harness, f"{A2}/image", rgb8_image(scene.rgb)):
        goal = Goal(harness, A2, QUERY, query_id="cancel-1")
        goal.wait_phase("segmenting")
        goal.cancel()
        status, result = goal.outcome()
    assert status == GoalStatus.STATUS_CANCELED
    assert result.status == "cancelled" and "cancelled by the client" in result.error
    assert harness.wait_result(A2, "cancel-1")["status"] == "cancelled"


def test_a_second_goal_preempts_the_first(ros, scene):
    harness, _ = ros
    with Camera(harness, f"{A2}/image", rgb8_image(scene.rgb)):
        first = Goal(harness, A2, QUERY, query_id="first-1")
        first.wait_phase("segmenting")
        second = Goal(harness, A2, QUERY, query_id="second-1")
        first_status, first_result = first.outcome()
        second_status, second_result = second.outcome()
    assert first_status == GoalStatus.STATUS_CANCELED
    assert first_result.status == "cancelled" and "second-1" in first_result.error
    assert second_status == GoalStatus.STATUS_SUCCEEDED and second_result.status == "succeeded"


def test_a_topic_query_preempts_a_goal(ros, scene):
    harness, _ = ros
    harness.wait_subscribed(f"{A2}/query")
    with Camera(harness, f"{A2}/image", rgb8_image(scene.rgb)):
        goal = Goal(harness, A2, QUERY, query_id="goal-2")
        goal.wait_phase("segmenting")
        harness.send_query(A2, {"id": "topic-2", "query": QUERY})
        status, result = goal.outcome()
        topic_result = harness.wait_result(A2, "topic-2", timeout=GOAL_WAIT_S)
    assert status == GoalStatus.STATUS_CANCELED
    assert result.status == "cancelled" and "topic-2" in result.error
    assert topic_result["status"] == "succeeded"


def test_a_goal_reusing_a_running_query_id_is_aborted_alone(ros, scene):
    harness, _ = ros
    with Camera(harness, f"{A3}/image", rgb8_image(scene.rgb)):
        first = Goal(harness, A3, QUERY, query_id="dup-3")
        first.wait_phase("segmenting")
        status, result = Goal(harness, A3, QUERY, query_id="dup-3").outcome()
        assert status == GoalStatus.STATUS_ABORTED
        assert result.error == "query_id 'dup-3' is already in use by a running goal"
        # Made by the action server, not the agent: the backends are still named.
        assert json.loads(result.result_json)["backends"] == {
            "llm": "offline", "segmenter": "test.ros.slow_segmenter:factory"}
        assert first.outcome()[0] == GoalStatus.STATUS_SUCCEEDED


def test_a_topic_query_reusing_a_running_goals_id_is_refused_alone(ros, scene):
    harness, _ = ros
    harness.wait_subscribed(f"{A3}/query")
    with Camera(harness, f"{A3}/image", rgb8_image(scene.rgb)):
        goal = Goal(harness, A3, QUERY, query_id="shared-3")
        goal.wait_phase("segmenting")
        harness.send_query(A3, {"id": "shared-3", "query": "the red object"})
        refused = harness.wait_for(
            lambda: next((r for r in harness.json_messages(f"{A3}/sam3_agent/result")
                          if r["query_id"] == "shared-3" and r["status"] == "failed"), None),
            GOAL_WAIT_S, "the refused topic query's result")
        status, result = goal.outcome()
    assert refused["error"] == "query_id 'shared-3' is already in use by a running goal"
    assert refused["backends"]["segmenter"] == "test.ros.slow_segmenter:factory"
    assert status == GoalStatus.STATUS_SUCCEEDED and result.status == "succeeded"


def test_queue_overflow_is_rejected_at_goal_time(ros, scene):
    harness, _ = ros
    with Camera(harness, f"{A3}/image", rgb8_image(scene.rgb)):
        running = Goal(harness, A3, QUERY, query_id="run-3")
        running.wait_phase("segmenting")
        waiting = Goal(harness, A3, QUERY, query_id="wait-3")
        waiting.wait_phase("queued")
        overflow = Goal(harness, A3, QUERY, query_id="over-3")
        assert overflow.handle.accepted is False
        assert running.outcome()[0] == GoalStatus.STATUS_SUCCEEDED
        assert waiting.outcome()[0] == GoalStatus.STATUS_SUCCEEDED


def test_deactivate_aborts_the_goal_and_an_inactive_node_rejects_goals(ros, scene):
    """CONTRACTS §11: deactivate, as shutdown, ends every goal ``aborted`` "node shutting down"
    (the server ended it: a client's cancel is what CANCELED means)."""
    harness, procs = ros
    name = procs[A2].name
    with Camera(harness, f"{A2}/image", rgb8_image(scene.rgb)):
        goal = Goal(harness, A2, QUERY, query_id="deact-1")
        goal.wait_phase("segmenting")
        assert harness.change_state(name, TRANSITION.TRANSITION_DEACTIVATE)
        status, result = goal.outcome()
        assert status == GoalStatus.STATUS_ABORTED
        assert (result.status, result.error) == ("failed", "node shutting down (deactivated)")
        assert Goal(harness, A2, QUERY, query_id="inactive-1").handle.accepted is False
        assert harness.change_state(name, TRANSITION.TRANSITION_ACTIVATE)
        assert Goal(harness, A2, QUERY, query_id="again-1").outcome()[0] == \
            GoalStatus.STATUS_SUCCEEDED


def test_client_raises_when_there_is_no_server(ros):
    harness, _ = ros
    client = harness.created(
        lambda: SegmentClient(harness.node, "/nobody/sam3_agent/segment"))
    with pytest.raises(SegmentError, match="no action server"):
        client.ask(QUERY, timeout_s=1.0)
    client.destroy()


def _ask(ros_env: dict, *args: str) -> subprocess.CompletedProcess:
    script = Path(sys.executable).parent / "sam3-agent"
    return subprocess.run([str(script), "ask", "--ros", *args], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, **ros_env))


def test_sam3_agent_ask_prints_the_result_json(ros, scene, ros_env):
    harness, _ = ros
    with Camera(harness, f"{A1}/image", rgb8_image(scene.rgb)):
        completed = _ask(ros_env, QUERY, "--action", action(A1), "--query-id", "cli-ask-1",
                         "--timeout", "30", "--feedback")
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert (result["query_id"], result["status"]) == ("cli-ask-1", "succeeded")
    phases = [json.loads(line)["phase"] for line in completed.stderr.splitlines()
              if line.startswith("{")]
    # Feedback is a topic: the first one of a client process that has just started may go out
    # before the server's feedback writer has matched its reader (a loaded machine), and rclpy
    # drops one that arrives after the result. What arrives is the node's phases, in order.
    assert phases and set(phases) <= {"queued", "thinking", "segmenting", "examining", "done"}
    assert "queued" not in phases[1:] and "done" not in phases[:-1], phases


def test_sam3_agent_ask_exit_codes(ros, ros_env):
    failed = _ask(ros_env, "x" * 600, "--action", action(A1), "--timeout", "30")
    assert failed.returncode == 1  # longer than max_query_chars: the goal is aborted
    assert json.loads(failed.stdout)["status"] == "failed"
    nobody = _ask(ros_env, QUERY, "--action", "/nobody/segment", "--timeout", "1")
    assert nobody.returncode == 1 and "no action server" in nobody.stderr
    assert _ask(ros_env, " ", "--action", action(A1)).returncode == 2


def test_a_goal_can_ask_to_be_followed(ros, scene):
    """Segment.Goal.follow (issue 13): after the answer, ~/follow/status tracks that query."""
    harness, _ = ros
    status_topic = f"{A1}/sam3_agent/follow/status"
    harness.listen(status_topic, String)
    client = harness.created(lambda: SegmentClient(harness.node, action(A1)))
    harness.wait_outputs_reach_us(A1)
    with Camera(harness, f"{A1}/image", rgb8_image(scene.rgb)):
        result = client.ask(QUERY, timeout_s=GOAL_WAIT_S, query_id="goal-followed", follow=True)
        assert result.status == "succeeded", result.error
        harness.wait_for(lambda: any(
            s.get("query_id") == "goal-followed" and s.get("state") == "tracking"
            for s in harness.json_messages(status_topic)), GOAL_WAIT_S, "follow tracking")
        # A goal without follow (follow.default false) ends following and is not followed.
        assert client.ask(QUERY, timeout_s=GOAL_WAIT_S, query_id="goal-plain").status == \
            "succeeded"
    states = [(s["query_id"], s["state"]) for s in harness.json_messages(status_topic)]
    assert ("goal-followed", "stopped") in states
    assert not any(query_id == "goal-plain" for query_id, _ in states)


def test_a_goal_refines_an_earlier_answer_on_its_frame_and_reports_it(ros, scene, ros_env):
    """Segment.Goal.refines (issue 20): answered on the refined answer's frame, with the
    refinement named in the feedback and the result; an unknown id aborts the goal."""
    harness, _ = ros
    client = harness.created(lambda: SegmentClient(harness.node, action(A1)))
    with Camera(harness, f"{A1}/image", rgb8_image(scene.rgb)) as camera:
        first = client.ask("the largest red object", timeout_s=GOAL_WAIT_S,
                           query_id="goal-red")
    assert first.status == "succeeded", first.error
    flipped = rgb8_image(np.ascontiguousarray(scene.rgb[:, ::-1]))  # the scene has changed
    feedback = []
    with Camera(harness, f"{A1}/image", flipped, stamp_base=7000) as later:
        outcome = client.send("no, the other one", timeout_s=GOAL_WAIT_S,
                              query_id="goal-red-other", on_feedback=feedback.append,
                              refines="goal-red")
        # and from the command line, through the query topic (a refinement of the refinement)
        completed = _ask(ros_env, "the one to its right", "--topic", "--node",
                         f"{A1}/sam3_agent", "--id", "topic-right", "--refines",
                         "goal-red-other", "--timeout", "30")
    result = outcome.result
    assert outcome.goal_status == "SUCCEEDED" and result.status == "succeeded", result.error
    assert result.header == first.header and not later.sent(
        {"sec": result.header.stamp.sec, "nanosec": result.header.stamp.nanosec})
    assert camera.sent({"sec": result.header.stamp.sec, "nanosec": result.header.stamp.nanosec})
    mask = image_array(result.mask) > 0
    truth = scene.masks["red_cylinder"]
    assert (mask & truth).sum() / (mask | truth).sum() > 0.95
    assert json.loads(result.result_json)["refines"] == "goal-red"
    assert feedback and {f.refines for f in feedback} == {"goal-red"}
    assert completed.returncode == 0, completed.stderr
    right = json.loads(completed.stdout)
    assert (right["refines"], right["stamp"]) == ("goal-red-other", json.loads(
        result.result_json)["stamp"])

    missing = client.send("the other one", timeout_s=GOAL_WAIT_S, query_id="goal-missing",
                          refines="never-asked")
    assert missing.goal_status == "ABORTED"
    assert "cannot refine query_id 'never-asked'" in missing.result.error
    assert json.loads(missing.result.result_json)["refines"] == "never-asked"


def test_nodes_exit_with_status_0_on_ctrl_c_even_with_a_goal_running(ros, scene):
    harness, procs = ros
    with Camera(harness, f"{A2}/image", rgb8_image(scene.rgb)):
        Goal(harness, A2, QUERY, query_id="exit-1").wait_phase("segmenting")
        for proc in procs.values():
            assert proc.stop() == 0
            log = proc.log()
            # rclpy's words when an execute callback raises; ours when a result cannot be built
            assert "Error raised in execute callback" not in log, log
            assert "segment result of" not in log and "segment feedback of" not in log, log
            assert "Traceback" not in log, log  # nothing published into a dead context


BLOCK_INTERFACES = '''
import sys
class _NoInterfaces:
    def find_spec(self, name, path=None, target=None):
        if name in ("sam3_agent_ros.action", "sam3_agent_ros.msg"):
            raise ImportError(f"{name} blocked by the test")
        return None
sys.meta_path.insert(0, _NoInterfaces())
'''


def test_without_the_interfaces_the_node_runs_with_topics_and_says_so_once(ros_env, tmp_path,
                                                                           scene):
    (tmp_path / "sitecustomize.py").write_text(BLOCK_INTERFACES)
    env = dict(os.environ, **ros_env, PYTHONPATH=str(tmp_path))
    proc = NodeProcess("/noaction", {}, tmp_path / "node", env)
    harness = Harness("sam3_agent_noaction_test")
    try:
        harness.listen("/noaction/sam3_agent/result")
        harness.wait_state(proc.name, "active", timeout=60)
        assert harness.change_state(proc.name, TRANSITION.TRANSITION_DEACTIVATE)
        assert harness.change_state(proc.name, TRANSITION.TRANSITION_ACTIVATE)
        harness.wait_subscribed("/noaction/query")
        with Camera(harness, "/noaction/image", rgb8_image(scene.rgb)):
            harness.send_query("/noaction", {"id": "topic-only", "query": QUERY})
            assert harness.wait_result("/noaction", "topic-only")["status"] == "succeeded"
        assert not harness.action_client(Segment, "/noaction/sam3_agent/segment") \
            .wait_for_server(timeout_sec=1.0)
    finally:
        assert proc.stop() == 0
        harness.close()
    assert proc.log().count("the action ~/segment is off") == 1, proc.log()
    assert proc.log().count("~/concepts/detections is off") == 1, proc.log()  # the same for it



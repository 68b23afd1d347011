"""The node over real rclpy: subprocesses started like a user would, a test node in this process.

Three nodes run for the whole module, in three namespaces (offline backends; DDS on loopback with a
random domain id):
- /robot1: colour segmenter, preempt policy, short frame bounds (frames, masks, bad input);
- /robot2: a slow segmenter plugin, preempt policy (preemption, deactivate);
- /robot3: the slow segmenter, queue policy with queue_size 1, compressed images, reliable QoS.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import time

import numpy as np
import pytest
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import String

from sam3_agent_demo.scene import render_scene
from sam3_agent_ros.ros.conversions import rgb8_image
from test.ros.helpers import TRANSITION, Camera, Harness, NodeProcess, png_message

R1, R2, R3 = "/robot1", "/robot2", "/robot3"
SLOW = {"segmenter": {"backend": "test.ros.slow_segmenter:factory"}}
CONFIGS = {
    R1: {"max_frame_age_s": 1.0, "frame_wait_s": 1.0, "max_query_chars": 500},
    R2: SLOW,
    R3: {**SLOW, "query_policy": "queue", "queue_size": 1, "image_transport": "compressed",
         "image_qos": "reliable"},
}
OUTPUTS = {"result": String, "status": String, "mask": Image, "labels": Image, "overlay": Image}
QUERY = "the leftmost blue object"
OFFLINE_BACKENDS = {"llm": "offline", "segmenter": "color"}
SLOW_BACKENDS = {"llm": "offline", "segmenter": "test.ros.slow_segmenter:factory"}


@pytest.fixture(scope="module")
def scene():
    return render_scene()


@pytest.fixture(scope="module")
def ros(ros_env, tmp_path_factory):
    """The three node processes (DDS on loopback, see conftest.py) and the test harness."""
    tmp = tmp_path_factory.mktemp("nodes")
    env = dict(os.environ, **ros_env, SLOW_SEGMENTER_S="1.0")
    procs = {ns: NodeProcess(ns, params, tmp, env) for ns, params in CONFIGS.items()}
    harness = Harness()
    try:
        for ns in CONFIGS:
            for name, msg_type in OUTPUTS.items():
                harness.listen(f"{ns}/sam3_agent/{name}", msg_type)
        for ns, proc in procs.items():
            harness.wait_state(proc.name, "active", timeout=60)
            harness.wait_subscribed(f"{ns}/query")
        yield harness, procs
    finally:
        for proc in procs.values():
            proc.stop()
        harness.close()


def image_array(msg: Image) -> np.ndarray:
    channels = 3 if msg.encoding == "rgb8" else 1
    return np.frombuffer(msg.data, np.uint8).reshape(msg.height, msg.width, channels).squeeze()


def iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum()) / float((a | b).sum())


def new_failed_result(harness: Harness, ns: str, send) -> dict:
    """Send something without an id; the node's one new result for it."""
    before = len(harness.results(ns))
    send()
    found = harness.wait_for(lambda: harness.results(ns)[before:], 10, "a new result")
    assert len(found) == 1
    return found[0]


def test_query_answers_with_the_blue_object_and_the_frame_header(ros, scene):
    harness, _ = ros
    with Camera(harness, f"{R1}/image", rgb8_image(scene.rgb),
                frame_id="camera_color_optical_frame") as camera:
        harness.send_query(R1, {"id": "blue-1", "query": QUERY})
        result = harness.wait_result(R1, "blue-1")
    assert result["status"] == "succeeded", result
    assert result["query"] == QUERY
    assert camera.sent(result["stamp"]) and result["frame_id"] == "camera_color_optical_frame"
    assert (result["width"], result["height"]) == (640, 480)
    assert [m["id"] for m in result["masks"]] == [1]
    assert result["backends"] == OFFLINE_BACKENDS

    images = {name: harness.image_with_stamp(f"{R1}/sam3_agent/{name}", result["stamp"])
              for name in ("mask", "labels", "overlay")}
    for msg in images.values():
        assert msg.header.frame_id == "camera_color_optical_frame"
    assert [images[n].encoding for n in ("mask", "labels", "overlay")] == ["mono8", "mono8",
                                                                          "rgb8"]
    mask = image_array(images["mask"])
    assert set(np.unique(mask)) == {0, 255}
    assert iou(mask > 0, scene.masks["blue_box"]) > 0.95
    labels = image_array(images["labels"])
    np.testing.assert_array_equal(labels == 1, mask == 255)
    overlay = image_array(images["overlay"])
    assert overlay.shape == (480, 640, 3) and not np.array_equal(overlay, scene.rgb)


def test_status_reports_every_phase_in_order(ros, scene):
    harness, _ = ros
    with Camera(harness, f"{R1}/image", rgb8_image(scene.rgb)):
        harness.send_query(R1, {"id": "phases-1", "query": QUERY})
        harness.wait_result(R1, "phases-1")
    harness.wait_status(R1, "phases-1", "done")
    statuses = harness.statuses(R1, "phases-1")
    phases = [s["phase"] for s in statuses]
    assert phases[0] == "queued" and phases[-1] == "done" and phases.count("done") == 1
    assert {"thinking", "segmenting"} <= set(phases)
    assert statuses[-1]["status"] == "succeeded"
    elapsed = [s["elapsed_s"] for s in statuses[1:]]
    assert elapsed == sorted(elapsed)
    # The model's reasoning of the round rides on the status (agent.status_reasoning_chars).
    segmenting = next(s for s in statuses if s["phase"] == "segmenting")
    assert segmenting["reasoning"] == 'Segmenting "blue object".'
    assert all(s["backends"] == OFFLINE_BACKENDS for s in statuses)


def test_plain_text_query_gets_a_node_made_id(ros, scene):
    harness, _ = ros
    with Camera(harness, f"{R1}/image", rgb8_image(scene.rgb)):
        result = new_failed_result(harness, R1, lambda: harness.send_query(R1, "the green object"))
    assert result["status"] == "succeeded" and result["query_id"].startswith("q-")
    assert len(result["masks"]) == 1


def test_no_fresh_frame_fails_after_the_wait(ros, scene):
    harness, _ = ros
    time.sleep(1.2)  # longer than max_frame_age_s: whatever came before is stale
    harness.send_query(R1, {"id": "no-frame", "query": QUERY})
    result = harness.wait_result(R1, "no-frame")
    assert result["status"] == "failed"
    assert "no frame" in result["error"] and "waited 1 s" in result["error"]
    # Made by the node, not the agent: it still names the backends, as does its status.
    assert result["backends"] == OFFLINE_BACKENDS
    done = harness.wait_status(R1, "no-frame", "done")
    assert done[0]["backends"] == OFFLINE_BACKENDS


def bad_image(**fields) -> Image:
    msg = Image(height=480, width=640, encoding="rgb8", step=640 * 3)
    msg.data = bytes(640 * 480 * 3)
    for name, value in fields.items():
        setattr(msg, name, value)
    return msg


@pytest.mark.parametrize("msg,reason", [
    (bad_image(encoding="yuv422"), "unsupported image encoding 'yuv422'"),
    (bad_image(data=bytes(1000)), "1000 bytes, expected step*height = 921600"),
    (bad_image(height=0, width=0, step=0, data=b""), "zero-size"),
], ids=["encoding", "short-data", "zero-size"])
def test_bad_frames_fail_the_query_with_the_reason(ros, msg, reason):
    harness, procs = ros
    query_id = f"bad-frame-{reason[:8]}"
    with Camera(harness, f"{R1}/image", msg, stamp_base=5000) as camera:
        time.sleep(0.3)
        harness.send_query(R1, {"id": query_id, "query": QUERY})
        result = harness.wait_result(R1, query_id)
    assert result["status"] == "failed" and reason in result["error"], result
    assert camera.sent(result["stamp"])  # names the frame it refers to
    assert procs[R1].process.poll() is None
    assert "unusable frame on the image topic" in procs[R1].log()


@pytest.mark.parametrize("text,reason", [
    ("", "empty query"),
    ("   \n", "empty query"),
    ("{not json", "invalid JSON query"),
    ('{"id": 1.5, "query": "x"}', "'id' must be a string"),
    ('{"query": ["a list"]}', "'query' must be a string"),
    ("x" * 501, "more than max_query_chars=500"),
], ids=["empty", "blank", "bad-json", "bad-id", "bad-json-2", "huge"])
def test_bad_queries_get_one_failed_result(ros, text, reason):
    harness, procs = ros
    result = new_failed_result(harness, R1, lambda: harness.send_query(R1, text))
    assert result["status"] == "failed" and reason in result["error"], result
    assert result["masks"] == []
    assert procs[R1].process.poll() is None


def test_json_query_with_empty_text_keeps_its_id(ros):
    harness, _ = ros
    harness.send_query(R1, {"id": "empty-json", "query": " "})
    result = harness.wait_result(R1, "empty-json")
    assert result["status"] == "failed" and result["error"] == "empty query"


def test_node_still_answers_after_bad_input(ros, scene):
    harness, _ = ros
    with Camera(harness, f"{R1}/image", rgb8_image(scene.rgb)):
        harness.send_query(R1, {"id": "after-bad", "query": QUERY})
        assert harness.wait_result(R1, "after-bad")["status"] == "succeeded"


def test_invalid_parameter_changes_are_rejected_with_a_reason(ros):
    harness, _ = ros
    name = f"{R1}/sam3_agent"
    rejected = harness.set_parameter(name, "query_policy", "bogus")
    assert not rejected.successful and "not one of" in rejected.reason
    out_of_range = harness.set_parameter(name, "frame_wait_s", -1.0)
    assert not out_of_range.successful
    assert harness.set_parameter(name, "frame_wait_s", 1.0).successful


def test_a_new_query_preempts_the_running_one(ros, scene):
    harness, _ = ros
    with Camera(harness, f"{R2}/image", rgb8_image(scene.rgb)):
        harness.send_query(R2, {"id": "first", "query": QUERY})
        harness.wait_status(R2, "first", "segmenting")
        harness.send_query(R2, {"id": "second", "query": QUERY})
        first = harness.wait_result(R2, "first")
        second = harness.wait_result(R2, "second")
    assert first["status"] == "cancelled" and "preempted by query second" in first["error"]
    assert second["status"] == "succeeded"
    assert first["backends"] == second["backends"] == SLOW_BACKENDS  # a plugin: its spec
    assert [s["status"] for s in harness.statuses(R2, "first") if s["phase"] == "done"] == [
        "cancelled"]
    assert len(harness.results(R2, "first")) == 1


def test_two_namespaces_answer_independently(ros, scene):
    harness, _ = ros
    with Camera(harness, f"{R1}/image", rgb8_image(scene.rgb), stamp_base=100) as cam1, \
            Camera(harness, f"{R2}/image", rgb8_image(scene.rgb), stamp_base=200) as cam2:
        harness.send_query(R2, {"id": "ns-2", "query": QUERY})
        harness.send_query(R1, {"id": "ns-1", "query": "the green object"})
        one = harness.wait_result(R1, "ns-1")
        two = harness.wait_result(R2, "ns-2")
    assert one["status"] == two["status"] == "succeeded"
    assert cam1.sent(one["stamp"]) and cam2.sent(two["stamp"])
    assert harness.results(R1, "ns-2") == [] and harness.results(R2, "ns-1") == []
    assert one["masks"][0]["centroid"] != two["masks"][0]["centroid"]


def test_deactivate_ends_the_running_query_and_activate_resumes(ros, scene):
    """Deactivate ends the running query ``failed`` "node shutting down (deactivated)"
    (CONTRACTS §11); the ids the node makes go on across the cycle (issue 33: they restarted)."""
    harness, _ = ros
    name = f"{R2}/sam3_agent"
    query_pub = harness.publisher(f"{R2}/query")

    def made_ids() -> list[str]:
        return [r["query_id"] for r in harness.json_messages(f"{R2}/sam3_agent/result")
                if re.fullmatch(r"q-[0-9a-f]{6}-[0-9]+", r["query_id"])]

    with Camera(harness, f"{R2}/image", rgb8_image(scene.rgb)):
        before = len(made_ids())
        harness.send_query(R2, {"query": ""})  # no id: the node makes one (and fails it)
        harness.wait_for(lambda: len(made_ids()) > before, 20, "a node-made id")
        harness.send_query(R2, {"id": "deact", "query": QUERY})
        harness.wait_status(R2, "deact", "segmenting")
        assert harness.change_state(name, TRANSITION.TRANSITION_DEACTIVATE)
        result = harness.wait_result(R2, "deact")
        assert (result["status"], result["error"]) == ("failed",
                                                       "node shutting down (deactivated)")
        assert harness.lifecycle_state(name) == "inactive"
        harness.wait_for(lambda: query_pub.get_subscription_count() == 0, 10, "unsubscribe")
        assert harness.change_state(name, TRANSITION.TRANSITION_ACTIVATE)
        harness.wait_subscribed(f"{R2}/query")
        harness.send_query(R2, {"id": "reactivated", "query": QUERY})
        assert harness.wait_result(R2, "reactivated")["status"] == "succeeded"
        harness.send_query(R2, {"query": ""})
        harness.wait_for(lambda: len(made_ids()) > before + 1, 20, "a second node-made id")
    ids = made_ids()
    assert len(set(ids)) == len(ids), ids  # never one id twice, before and after the cycle


def test_queue_policy_runs_in_order_and_rejects_overflow(ros, scene):
    harness, _ = ros
    with Camera(harness, f"{R3}/image/compressed", png_message(scene.rgb)) as camera:
        harness.send_query(R3, {"id": "q-a", "query": QUERY})
        harness.wait_status(R3, "q-a", "thinking")  # running: the queue is empty again
        harness.send_query(R3, {"id": "q-b", "query": QUERY})
        harness.wait_status(R3, "q-b", "queued")
        harness.send_query(R3, {"id": "q-c", "query": QUERY})
        overflow = harness.wait_result(R3, "q-c")
        first = harness.wait_result(R3, "q-a")
        second = harness.wait_result(R3, "q-b")
    assert overflow["status"] == "failed" and "queue full" in overflow["error"]
    assert first["status"] == second["status"] == "succeeded"
    assert camera.sent(first["stamp"]) and camera.sent(second["stamp"])
    order = [r["query_id"] for r in harness.results(R3) if r["query_id"] in ("q-a", "q-b")]
    assert order == ["q-a", "q-b"]
    mask = image_array(harness.image_with_stamp(f"{R3}/sam3_agent/mask", second["stamp"]))
    assert iou(mask > 0, scene.masks["blue_box"]) > 0.95


def test_undecodable_compressed_frame_fails_the_query(ros):
    harness, _ = ros
    garbage = CompressedImage(format="jpeg")
    garbage.data = b"\xff\xd8 definitely not a jpeg"
    with Camera(harness, f"{R3}/image/compressed", garbage, stamp_base=7000):
        time.sleep(0.3)
        harness.send_query(R3, {"id": "garbage", "query": QUERY})
        result = harness.wait_result(R3, "garbage")
    assert result["status"] == "failed" and "cannot decode" in result["error"]


def test_demo_backends_are_announced_at_start_up(ros):
    _, procs = ros
    log = procs[R1].log()
    warnings = [line for line in log.splitlines() if "DEMO BACKENDS" in line]
    assert len(warnings) == 1 and "WARN" in warnings[0], log
    assert "(llm.backend=offline, segmenter.backend=color)" in warnings[0]
    assert "not from a model" in warnings[0]
    # A plugin segmenter is no demo backend: only the planner is named.
    assert "DEMO BACKENDS (llm.backend=offline):" in procs[R2].log()


def ended_by_itself(proc: NodeProcess, timeout: float = 30.0) -> int | None:
    """The node's exit status once it ended on its own within ``timeout`` s, else None."""
    try:
        return proc.process.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


def test_real_backends_without_key_or_weights_fail_configure_at_once(ros, tmp_path):
    """The node with its defaults (the real backends) and nothing set up: one ERROR line per
    missing thing, each naming the fix and how to try without a model; nothing slow was started,
    and under autostart the process ends with status 1 (launch, systemd see it die), cleanly."""
    env = {k: v for k, v in os.environ.items()
           if k != "OPENAI_API_KEY" and not k.startswith(("HF_", "HUGGING_FACE_"))}
    env["HF_HOME"] = str(tmp_path / "hf_home")  # no cached weights, no token
    proc = NodeProcess("/robot6", {}, tmp_path, env, offline=False)
    try:
        status = ended_by_itself(proc)
        log = proc.log()
        assert status == 1, log
        assert "autostart: configure failed" in log and "exits with status 1" in log
        errors = [line for line in log.splitlines() if "cannot configure:" in line]
        assert len(errors) == 2 and all("ERROR" in line for line in errors), log
        key, weights = errors
        assert "OPENAI_API_KEY" in key and "export OPENAI_API_KEY=EMPTY" in key
        if all(importlib.util.find_spec(name) for name in ("torch", "sam3")):
            assert "facebook/sam3" in weights and "hf auth login" in weights
        else:  # e.g. the Jazzy venv (no torch): SAM 3 itself is what is missing first
            assert "SAM 3 needs" in weights and "not installed" in weights
        for line in errors:
            assert line.endswith("sam3_agent.launch.py offline:=true, or -p "
                                 "llm.backend:=offline -p segmenter.backend:=color"), line
        assert "building the backends" not in log
        assert "Traceback" not in log
    finally:
        assert proc.stop() == 1


def test_a_failed_manual_configure_keeps_the_node_up_unconfigured(ros, tmp_path):
    """Under a lifecycle manager (autostart false) a failed configure leaves the process up and
    unconfigured, as managers expect; the missing key is named."""
    harness, _ = ros
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = NodeProcess("/robot7", {"autostart": False, "llm": {"backend": "openai"}}, tmp_path,
                       env)
    name = "/robot7/sam3_agent"
    try:
        harness.wait_for(lambda: "autostart is false" in proc.log(), 30, "the manual hint")
        assert not harness.change_state(name, TRANSITION.TRANSITION_CONFIGURE)
        assert "cannot configure:" in proc.log() and "OPENAI_API_KEY" in proc.log()
        assert ended_by_itself(proc, timeout=2.0) is None  # a bounded look: still running
        assert harness.lifecycle_state(name) == "unconfigured"
    finally:
        assert proc.stop() == 0


def test_invalid_params_file_leaves_the_node_unconfigured_until_fixed(ros, tmp_path):
    """Bad values of dynamic parameters are fixed at runtime (read-only ones need a restart:
    test_trust_params.py). Under a lifecycle manager (autostart false): under autostart the node
    would exit (test_real_backends_without_key_or_weights_fail_configure_at_once)."""
    harness, _ = ros
    proc = NodeProcess("/robot4", {"agent": {"max_rounds": 0}, "image_qos": "bogus",
                                   "autostart": False}, tmp_path)
    name = "/robot4/sam3_agent"
    try:
        harness.wait_for(lambda: "the node cannot configure" in proc.log(), 30,
                         "the configure error")
        assert not harness.change_state(name, TRANSITION.TRANSITION_CONFIGURE)
        log = proc.log()
        assert "agent.max_rounds: 0 is below the minimum 1" in log
        assert "image_qos: 'bogus' is not one of" in log
        assert f"set corrected values ('ros2 param set {name} NAME VALUE')" in log
        assert f"'ros2 lifecycle set {name} configure'" in log
        assert f"'sam3-agent lifecycle configure --node {name}'" in log
        assert harness.lifecycle_state(name) == "unconfigured"
        assert harness.set_parameter(name, "agent.max_rounds", 5).successful
        assert not harness.change_state(name, TRANSITION.TRANSITION_CONFIGURE)  # one left
        assert harness.set_parameter(name, "image_qos", "reliable").successful
        assert harness.change_state(name, TRANSITION.TRANSITION_CONFIGURE)
        assert harness.lifecycle_state(name) == "inactive"
    finally:
        assert proc.stop() == 0


def test_lifecycle_services_answer_while_the_models_load(ros, tmp_path):
    harness, _ = ros
    # A load long enough that the service call (discovery of a new node included) lands inside
    # it even on a loaded 2-core machine.
    env = dict(os.environ, SLOW_SEGMENTER_LOAD_S="15")
    proc = NodeProcess("/robot5", SLOW, tmp_path, env)
    name = "/robot5/sam3_agent"
    try:
        harness.wait_for(lambda: "building the backends" in proc.log(), 30, "the load to start")
        assert harness.lifecycle_state(name, timeout=10.0) == "configuring"
        harness.wait_state(name, "active", timeout=45)
    finally:
        assert proc.stop() == 0


def test_a_refinement_is_answered_on_the_frame_of_the_answer_it_refines(ros, scene):
    """Issue 20 over the query topic: "no, the other one" after "the largest red object", while
    the camera shows something else (or nothing): the earlier frame, its stamp, the other one."""
    harness, procs = ros
    with Camera(harness, f"{R1}/image", rgb8_image(scene.rgb), stamp_base=8000) as camera:
        harness.send_query(R1, {"id": "red-1", "query": "the largest red object"})
        first = harness.wait_result(R1, "red-1")
    assert first["status"] == "succeeded" and first["refines"] is None
    flipped = rgb8_image(np.ascontiguousarray(scene.rgb[:, ::-1]))
    with Camera(harness, f"{R1}/image", flipped, stamp_base=9000) as later:
        harness.send_query(R1, {"id": "red-2", "query": "no, the other one", "refines": "red-1"})
        result = harness.wait_result(R1, "red-2")
    assert result["status"] == "succeeded", result
    assert result["refines"] == "red-1" and result["stamp"] == first["stamp"]
    assert camera.sent(result["stamp"]) and not later.sent(result["stamp"])
    harness.wait_status(R1, "red-2", "done")
    assert {s["refines"] for s in harness.statuses(R1, "red-2")} == {"red-1"}
    # ~/mask of the refinement: the second one with that stamp (the first is red-1's)
    masks = harness.wait_for(lambda: [m for m in harness.messages(f"{R1}/sam3_agent/mask")
                                      if (m.header.stamp.sec, m.header.stamp.nanosec)
                                      == (first["stamp"]["sec"], first["stamp"]["nanosec"])][1:],
                             10, "the refinement's ~/mask")
    assert iou(image_array(masks[0]) > 0, scene.masks["red_cylinder"]) > 0.95

    # no camera at all (max_frame_age_s would fail a plain query): a refinement of the refinement
    harness.send_query(R1, {"id": "red-3", "query": "not that one either", "refines": "red-2"})
    third = harness.wait_result(R1, "red-3")
    assert (third["status"], third["stamp"]) == ("no_mask", first["stamp"])  # both were shown


def test_refinements_of_unknown_ids_fail_and_their_ids_are_escaped_in_the_log(ros):
    harness, procs = ros
    harness.send_query(R1, {"id": "ref-unknown", "query": "the other one", "refines": "nope"})
    result = harness.wait_result(R1, "ref-unknown")
    assert result["status"] == "failed" and result["refines"] == "nope"
    assert "cannot refine query_id 'nope': no answer with that query_id is known" in \
        result["error"]
    harness.send_query(R1, {"id": "ref-forged", "query": "the other one",
                            "refines": "x\n[ERROR] forged line"})
    forged = harness.wait_result(R1, "ref-forged")
    assert forged["status"] == "failed" and forged["refines"] == "x\n[ERROR] forged line"
    harness.wait_for(lambda: "ref-forged" in procs[R1].log(), 10, "the log line")
    log = procs[R1].log()
    assert "(refines 'x\\n[ERROR] forged line')" in log
    assert not any(line.startswith("[ERROR] forged") for line in log.splitlines())
    long_refines = "r" * 129
    failed = new_failed_result(harness, R1, lambda: harness.send_query(
        R1, '{"query": "the other one", "refines": "' + long_refines + '"}'))
    assert failed["status"] == "failed" and "'refines' is 129 characters long" in failed["error"]


def test_nodes_exit_cleanly_on_ctrl_c(ros):
    _, procs = ros
    for proc in procs.values():
        assert proc.stop() == 0
        assert "Traceback" not in proc.log(), proc.log()


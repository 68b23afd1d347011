"""Standing concepts over real rclpy (DDS on loopback, test/conftest.py): sam3_agent_node in a
subprocess (offline backends, depth on, concepts.prompts set) fed the tabletop sample's frames by
this process, checked against the scene's ground truth.

Checked: ~/concepts/detections carry the frame's header, every instance once with the same id on
every frame, its 3D position within 3 cm; ~/concepts/labels (mono16) hold the ids on the objects'
pixels; ~/concepts/overlay/compressed is a JPEG of the frame; a query still gets its answer; a
new list applies at once (ids restart at 1, logged); lists over the bounds are refused; an empty
list stops the passes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import cv2
import numpy as np
import pytest
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import CameraInfo, CompressedImage, Image
from std_msgs.msg import String
from visualization_msgs.msg import Marker, MarkerArray

from sam3_agent_demo import sample
from sam3_agent_ros.msg import ConceptDetections
from test.ros.helpers import Harness, NodeProcess

NS = "/conceptual"
CONCEPTS = ["blue object", "red object"]
TRUTH = {"blue object": ("blue_box", "blue_cylinder"), "red object": ("red_box", "red_cylinder")}
PARAMS = {"image_qos": "reliable", "depth": {"enabled": True},
          "concepts": {"prompts": CONCEPTS, "rate_hz": 5.0}}
OUTPUTS = {"result": String, "concepts/detections": ConceptDetections,
           "concepts/labels": Image, "concepts/overlay/compressed": CompressedImage,
           "concepts/markers": MarkerArray}


def topic(name: str) -> str:
    return f"{NS}/sam3_agent/{name}"


class Player:
    """The sample's first frame (colour, aligned depth, camera_info) at 10 Hz, a new stamp each
    time, in a background thread; remembers the stamps it sent."""

    def __init__(self, harness: Harness):
        rendered = sample.render_frame(0.0)
        self.truth = rendered
        cdr = sample.frame_messages(rendered, 0, sample.new_typestore())
        self.msgs = [deserialize_message(bytes(cdr[sample.CAMERA_INFO_TOPIC]), CameraInfo),
                     deserialize_message(bytes(cdr[sample.DEPTH_TOPIC]), Image),
                     deserialize_message(bytes(cdr[sample.COLOR_TOPIC]), Image)]
        self.pubs = [harness.publisher(f"{NS}/camera_info", CameraInfo),
                     harness.publisher(f"{NS}/depth", Image),
                     harness.publisher(f"{NS}/image", Image)]
        self.stamps: set[tuple[int, int]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        serial = 0
        while not self._stop.is_set():
            serial += 1
            stamp = (2000 + serial, serial)
            for msg in self.msgs:
                msg.header.stamp.sec, msg.header.stamp.nanosec = stamp
                msg.header.frame_id = sample.FRAME_ID
            self.stamps.add(stamp)
            for publisher, msg in zip(self.pubs, self.msgs):  # colour last
                publisher.publish(msg)
            self._stop.wait(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture(scope="module")
def ros(ros_env, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("concepts")
    proc = NodeProcess(NS, PARAMS, tmp, dict(os.environ, **ros_env))
    harness = Harness("concepts_test")
    player = None
    try:
        for name, msg_type in OUTPUTS.items():
            harness.listen(topic(name), msg_type)
        harness.wait_state(proc.name, "active", timeout=60)
        harness.wait_subscribed(f"{NS}/query")
        harness.wait_subscribed(f"{NS}/image", Image)
        for name, msg_type in (("depth", Image), ("camera_info", CameraInfo)):
            harness.wait_subscribed(f"{NS}/{name}", msg_type)
        player = Player(harness)
        yield harness, proc, player
    finally:
        if player is not None:
            player.stop()
        harness.close()
        code = proc.stop()
    assert code == 0, proc.log()
    assert "Traceback" not in proc.log(), proc.log()


def stamp_of(msg) -> tuple[int, int]:
    return msg.header.stamp.sec, msg.header.stamp.nanosec


def detections(harness: Harness, concepts: set[str] | None = None) -> list:
    found = harness.messages(topic("concepts/detections"))
    if concepts is None:
        return found
    return [m for m in found if m.detections and {d.concept for d in m.detections} == concepts]


def truth_name(truth, detection) -> str | None:
    """The scene object under the detection's centroid, among those of its concept."""
    u, v = (int(round(c)) for c in detection.centroid)
    for name in TRUTH.get(detection.concept, ()):
        if truth.masks[name][v, u]:
            return name
    return None


def test_every_frame_s_instances_keep_their_ids_with_labels_overlay_and_positions(ros):
    harness, proc, player = ros
    truth = player.truth
    try:
        harness.wait_for(lambda: len(detections(harness, set(CONCEPTS))) >= 4, 30.0,
                         "four concept passes")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n--- node log ---\n{proc.log()}") from exc
    passes = detections(harness, set(CONCEPTS))
    id_of: dict[str, int] = {}
    for msg in passes:
        assert stamp_of(msg) in player.stamps and msg.header.frame_id == sample.FRAME_ID
        assert [d.concept for d in msg.detections] == ["blue object"] * 2 + ["red object"] * 2
        for d in msg.detections:
            name = truth_name(truth, d)
            assert name is not None, (d.concept, d.centroid)
            assert id_of.setdefault(name, d.id) == d.id, f"{name} changed its id"
            assert d.position_valid
            error_m = np.linalg.norm(np.array([d.position.x, d.position.y, d.position.z])
                                     - np.array(truth.positions[name]))
            assert error_m < 0.03, (name, error_m)
            x0, y0, x1, y1 = d.bbox
            assert x0 < d.centroid[0] < x1 and y0 < d.centroid[1] < y1 and d.area > 100
    assert sorted(id_of.values()) == [1, 2, 3, 4]

    def labelled(msg) -> Image | None:
        found = [m for m in harness.messages(topic("concepts/labels"))
                 if stamp_of(m) == stamp_of(msg)]
        return found[0] if found else None

    last = passes[-1]
    labels_msg = harness.wait_for(lambda: labelled(last), 10.0, "the labels of a pass")
    assert labels_msg.encoding == "mono16" and labels_msg.step == labels_msg.width * 2
    labels = np.frombuffer(bytes(labels_msg.data), np.uint16).reshape(labels_msg.height,
                                                                      labels_msg.width)
    assert set(np.unique(labels).tolist()) == {0, 1, 2, 3, 4}
    for name, instance_id in id_of.items():
        mine, theirs = labels == instance_id, truth.masks[name]
        assert (mine & theirs).sum() / (mine | theirs).sum() >= 0.8, name
    overlays = harness.wait_for(lambda: harness.messages(topic("concepts/overlay/compressed")),
                                10.0, "an overlay")
    overlay = cv2.imdecode(np.frombuffer(bytes(overlays[-1].data), np.uint8), cv2.IMREAD_COLOR)
    assert overlay.shape == truth.rgb.shape and "jpeg" in overlays[-1].format
    assert stamp_of(overlays[-1]) in player.stamps
    # RViz: per pass a DELETEALL, then a box and a "<concept> #<id>" label per instance.
    arrays = harness.wait_for(lambda: harness.messages(topic("concepts/markers")), 10.0,
                              "concept markers")
    drawn = arrays[-1].markers
    assert drawn[0].action == Marker.DELETEALL and stamp_of(drawn[0]) in player.stamps
    labels_drawn = {m.text for m in drawn if m.type == Marker.TEXT_VIEW_FACING}
    assert labels_drawn == {f"{concept} #{id_of[name]}" for concept, names in TRUTH.items()
                            for name in names}
    cubes = [m for m in drawn if m.type == Marker.CUBE]
    assert len(cubes) == 4 and all(stamp_of(m) == stamp_of(drawn[0]) for m in cubes)


def test_a_query_is_answered_while_concepts_run(ros):
    harness, _, _ = ros
    harness.send_query(NS, {"id": "q-concepts", "query": "the leftmost blue object"})
    result = harness.wait_result(NS, "q-concepts", timeout=30.0)
    assert result["status"] == "succeeded", result


def test_a_new_list_applies_at_once_restarting_the_ids_and_bad_lists_are_refused(ros):
    harness, proc, _ = ros
    node = proc.name
    reply = harness.set_parameter(node, "concepts.prompts", ["yellow object"])
    assert reply.successful, reply.reason
    msg = harness.wait_for(lambda: detections(harness, {"yellow object"}), 20.0,
                           "a pass with the new list")[0]
    assert [d.id for d in msg.detections] == [1]
    harness.wait_for(lambda: "standing concepts (1): 'yellow object'; instance ids start at 1"
                     in proc.log(), 10.0, "the new list in the log")
    assert "parameter changed: concepts.prompts: ['blue object', 'red object'] -> " \
           "['yellow object'] (applied now)" in proc.log()

    too_many = harness.set_parameter(node, "concepts.prompts", [f"c{i}" for i in range(9)])
    assert not too_many.successful and "concepts.max_prompts (8)" in too_many.reason
    too_long = harness.set_parameter(node, "concepts.prompts", ["x" * 101])
    assert not too_long.successful and "concepts.max_prompt_chars (100)" in too_long.reason
    values = harness.get_parameters(node, ["concepts.prompts"])
    assert values["concepts.prompts"] == ["yellow object"]

    # `sam3-agent param set` converts the text to the type the node declares: a string array
    cli = subprocess.run([sys.executable, "-m", "sam3_agent_ros.cli", "param", "set",
                          "concepts.prompts", "[yellow object, cup]", "--node", node],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert harness.get_parameters(node, ["concepts.prompts"])["concepts.prompts"] == [
        "yellow object", "cup"]
    assert harness.set_parameter(node, "concepts.prompts", []).successful
    harness.wait_for(lambda: "standing concepts: off" in proc.log(), 10.0, "concepts off")
    threading.Event().wait(1.0)  # a pass that was publishing at the change
    count = len(detections(harness))
    threading.Event().wait(1.0)
    assert len(detections(harness)) == count

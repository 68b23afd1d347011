"""ros/outputs.py: the messages of an answer (built without a graph) and their lazy publishing
through the outputs room over real rclpy (DDS on loopback, by test/conftest.py)."""

from __future__ import annotations

import itertools
import json
import os

import numpy as np
import pytest
import rclpy
from geometry_msgs.msg import PointStamped
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header, String
from visualization_msgs.msg import Marker, MarkerArray

from sam3_agent_ros import render
from sam3_agent_ros.config import Config, OverlayConfig
from sam3_agent_ros.core.types import Frame, Mask, QueryStatus, Result
from sam3_agent_ros.geometry.measurement import Measurement
from sam3_agent_ros.pipeline.measurement import measure_answer
from sam3_agent_ros.pipeline.query_life import ERROR_LOG_CHARS, result_line
from sam3_agent_ros.pipeline.three_d import measure_3d
from sam3_agent_ros.render import downscale
from sam3_agent_ros.ros import outputs
from sam3_agent_ros.ros.conversions import compressed_to_rgb, image_to_rgb
from sam3_agent_ros.ros.messages.answer import answer_messages, follow_messages
from sam3_agent_ros.ros.messages.markers import (
    BOX_NAMESPACE,
    LABEL_CHARS,
    LABEL_NAMESPACE,
    MIN_MARKER_SCALE_M,
    marker_messages,
    target_messages,
)
from test.ros.helpers import RELIABLE, Spinner
from test.waiting import wait_until

STAMP = (1234, 5678)
POSITIONS = [{"position": {"x": 0.1, "y": -0.2, "z": 0.9}, "position_error": None},
             {"position": None, "position_error": "too few valid depth pixels (3 < 20)"}]
# A box turned 90 degrees about the camera's z axis (quaternion z = w = sqrt(1/2)), flat.
BOX = {"center": {"x": 0.1, "y": -0.2, "z": 0.91}, "size": {"x": 0.15, "y": 0.1, "z": 0.0},
       "orientation": {"x": 0.0, "y": 0.0, "z": 0.707107, "w": 0.707107}}
BOXES = [{**POSITIONS[0], "box": BOX, "box_error": None},
         {"position": {"x": -0.3, "y": 0.0, "z": 1.2}, "position_error": None, "box": None,
          "box_error": "the mask's depth points do not span a surface (a line or a point)"},
         {**POSITIONS[1], "box": None, "box_error": POSITIONS[1]["position_error"]}]
_namespaces = itertools.count()


def measured(extras):
    """The typed measurements of result JSON 3D fields."""
    return [Measurement.from_json(extra) for extra in extras]


def answered(result, depth=None, **kwargs):
    """A query's messages the node's way: the 3D step first, then the builders."""
    return answer_messages(measure_answer(result, depth), **kwargs)


def followed(frame, masks, status, depth=None, **kwargs):
    """A follow update's messages the publisher's way: measured first, then built."""
    located = measure_3d(depth, frame, masks) if depth is not None else None
    return follow_messages(frame, masks, status, located, **kwargs)


class FakeDepth:
    """Returns the given extras for exactly the number of masks it expects; fails otherwise."""

    def __init__(self, extras, fail: bool = False):
        self.extras = extras
        self.fail = fail
        self.calls: list[tuple] = []

    def measure(self, frame, masks, pixels_to=None):
        self.calls.append((frame, masks))
        if self.fail:
            raise RuntimeError("depth exploded")
        assert len(masks) == len(self.extras), "measure called with an unexpected mask count"
        return [dict(e) for e in self.extras]


def two_masks(height=48, width=64):
    first = np.zeros((height, width), bool)
    first[5:15, 5:20] = True
    second = np.zeros((height, width), bool)
    second[30:40, 40:60] = True
    return first, second


def make_result(status=QueryStatus.SUCCEEDED, image=None):
    first, second = two_masks()
    frame = Frame(np.full((48, 64, 3), 90, np.uint8) if image is None else image, *STAMP, "cam")
    masks = [Mask.from_array(first, 0.9, (5, 5, 20, 15)), Mask.from_array(second, 0.8,
                                                                           (40, 30, 60, 40))]
    return Result("q-7", "the boxes", status, masks=masks if status == QueryStatus.SUCCEEDED
                  else [], frame=frame)


def pixels(msg: Image) -> np.ndarray:
    return np.frombuffer(bytes(msg.data), np.uint8).reshape(msg.height, msg.step)[:, :msg.width]


def test_answer_messages_carry_images_targets_and_json_with_the_frame_header():
    result = make_result()
    depth = FakeDepth(POSITIONS)
    built = answered(result, depth)
    assert (built.header.stamp.sec, built.header.stamp.nanosec) == STAMP
    assert built.header.frame_id == "cam"
    assert list(built.images) == ["mask", "labels", "overlay", "overlay/compressed"]
    for image in built.images.values():
        assert (image.header.stamp.sec, image.header.frame_id) == (STAMP[0], "cam")
    first, second = two_masks()
    assert np.array_equal(pixels(built.images["mask"]) == 255, first | second)
    labels = pixels(built.images["labels"])
    assert set(np.unique(labels[first])) == {1} and set(np.unique(labels[second])) == {2}
    assert built.images["overlay"].encoding == "rgb8"
    jpeg = built.images["overlay/compressed"]
    assert jpeg.format == "rgb8; jpeg compressed bgr8" and bytes(jpeg.data[:2]) == b"\xff\xd8"
    assert built.target.point.x == pytest.approx(0.1) and built.target.header.frame_id == "cam"
    assert len(built.targets.poses) == 1  # the second mask has no position
    payload = json.loads(built.result.data)
    assert payload["masks"][0]["position"] == POSITIONS[0]["position"]
    assert payload["masks"][1]["position_error"].startswith("too few valid")


def test_target_poses_are_the_boxes_and_positions_without_a_box_keep_the_identity():
    header = Header(frame_id="cam")
    target, poses = target_messages(header, measured(BOXES))
    assert target.point.x == pytest.approx(0.1) and target.point.z == pytest.approx(0.9)
    assert len(poses.poses) == 2  # the third mask has no position
    box_pose, point_pose = poses.poses
    assert [box_pose.position.x, box_pose.position.y, box_pose.position.z] == pytest.approx(
        [0.1, -0.2, 0.91])
    assert [box_pose.orientation.z, box_pose.orientation.w] == pytest.approx([0.707107] * 2)
    assert point_pose.position.x == pytest.approx(-0.3) and point_pose.orientation.w == 1.0


def test_the_target_is_the_best_mask_with_a_position_and_the_json_names_the_poses():
    # Mask 1 without depth: ~/target was not published at all and pose 0 of ~/targets was
    # mask 2's, with nothing saying so (issue 34).
    header = Header(frame_id="cam")
    no_depth = BOXES[2]
    target, poses = target_messages(header, measured([no_depth, BOXES[1], BOXES[0]]))
    assert target is not None and target.point.x == pytest.approx(-0.3)  # mask 2's point
    assert [p.position.x for p in poses.poses] == pytest.approx([-0.3, 0.1])  # masks 2, 3
    assert target_messages(header, measured([no_depth]))[0] is None
    # The result JSON names the same masks, in the same order.
    result = make_result()
    result.masks.insert(0, result.masks[1])
    depth = FakeDepth([no_depth, BOXES[1], BOXES[0]])
    payload = json.loads(answered(result, depth).result.data)
    assert payload["target_mask_id"] == 2 and payload["targets_mask_ids"] == [2, 3]
    assert [m["id"] for m in payload["masks"] if m["position"] is not None] == [2, 3]


def test_markers_delete_all_then_a_cube_and_a_label_per_mask():
    header = Header(frame_id="cam")
    header.stamp.sec, header.stamp.nanosec = STAMP
    markers = marker_messages(header, measured(BOXES), "the  red\nbox").markers
    assert markers[0].action == Marker.DELETEALL
    assert [(m.ns, m.id, m.type) for m in markers[1:]] == [
        (BOX_NAMESPACE, 1, Marker.CUBE), (LABEL_NAMESPACE, 1,
                                                  Marker.TEXT_VIEW_FACING),
        (BOX_NAMESPACE, 2, Marker.SPHERE), (LABEL_NAMESPACE, 2,
                                                    Marker.TEXT_VIEW_FACING)]
    for marker in markers:
        assert marker.header.frame_id == "cam"
        assert (marker.header.stamp.sec, marker.header.stamp.nanosec) == STAMP
    cube, label = markers[1], markers[2]
    assert cube.pose.position.z == pytest.approx(0.91)
    assert [cube.pose.orientation.z, cube.pose.orientation.w] == pytest.approx([0.707107] * 2)
    # A flat face is drawn with the smallest visible thickness, its sides as they are.
    assert [cube.scale.x, cube.scale.y, cube.scale.z] == pytest.approx(
        [0.15, 0.1, MIN_MARKER_SCALE_M])
    assert [cube.color.r, cube.color.g, cube.color.b] == pytest.approx(
        [c / 255 for c in render.palette_color(0)])
    assert label.text == "the red box #1"
    assert label.pose.position.z < cube.pose.position.z  # nearer the camera than the box
    assert markers[4].text == "the red box #2"
    long_label = marker_messages(header, measured(BOXES[:1]), "x" * 200).markers[2].text
    assert len(long_label) == LABEL_CHARS + len(" #1")


def test_answer_messages_build_only_the_kinds_asked_and_nothing_for_a_failure():
    only_mask = answered(make_result(), kinds=("mask",))
    assert set(only_mask.images) == {"mask"} and only_mask.target is None
    assert only_mask.targets is None
    depth = FakeDepth([])
    failed = answered(make_result(QueryStatus.FAILED), depth)
    assert failed.images == {} and failed.targets is None and depth.calls == []
    assert json.loads(failed.result.data)["status"] == "failed"
    no_pixels = make_result(image=np.zeros((0, 0, 3), np.uint8))
    assert answered(no_pixels, depth).images == {} and depth.calls == []
    with pytest.raises(ValueError, match="unknown image kind"):
        answered(make_result(), kinds=("depth",))


def test_overlays_are_drawn_once_at_the_size_limit_and_masks_stay_full_size():
    image = np.zeros((480, 640, 3), np.uint8)
    image[:, :, 1] = np.linspace(0, 250, 640, dtype=np.uint8)  # a gradient JPEG keeps
    first = np.zeros((480, 640), bool)
    first[100:300, 50:250] = True
    result = Result("q-9", "x", QueryStatus.SUCCEEDED,
                    masks=[Mask.from_array(first, 0.9, (50, 100, 250, 300))],
                    frame=Frame(image, *STAMP, "cam"))
    built = answered(result, overlay=OverlayConfig(max_side=320, jpeg_quality=90))
    raw = image_to_rgb(built.images["overlay"])
    decoded = compressed_to_rgb(built.images["overlay/compressed"])
    assert raw.shape == decoded.shape == (240, 320, 3)
    assert np.abs(decoded.astype(int) - raw).mean() < 3  # the same drawing, JPEG-encoded
    tinted = np.any(raw != downscale(image, 320), axis=2)
    assert tinted[50:150, 25:125].all() and not tinted[:, 200:].any()  # the mask, at half size
    assert (pixels(built.images["mask"]).shape, pixels(built.images["labels"]).shape) == (
        (480, 640), (480, 640))
    full = answered(result, overlay=OverlayConfig(max_side=0))
    assert image_to_rgb(full.images["overlay"]).shape == (480, 640, 3)
    quality = [len(answered(result, kinds=("overlay/compressed",), overlay=o)
                   .images["overlay/compressed"].data)
               for o in (OverlayConfig(0, 30), OverlayConfig(0, 95))]
    assert quality[0] < quality[1]


def test_the_union_mask_and_the_labels_agree_on_overlapping_masks():
    first, second = two_masks()
    second[5:15, 10:30] = True  # overlaps the first
    frame = Frame(np.zeros((48, 64, 3), np.uint8), *STAMP, "cam")
    result = Result("q-1", "x", QueryStatus.SUCCEEDED, frame=frame,
                    masks=[Mask.from_array(first, 0.9, (0, 0, 1, 1)),
                           Mask(second, 0.8, (0, 0, 1, 1), 1, (0.0, 0.0))])  # no pixel box
    built = answered(result, kinds=("labels", "mask"))
    assert list(built.images) == ["labels", "mask"]
    labels, union = pixels(built.images["labels"]), pixels(built.images["mask"])
    assert np.array_equal(union == 255, first | second) and np.array_equal(labels > 0, union > 0)
    assert np.all(labels[first] == 1) and np.all(labels[second & ~first] == 2)


def test_no_mask_answer_publishes_empty_images_and_an_empty_pose_array():
    result = make_result(QueryStatus.NO_MASK)
    built = answered(result, FakeDepth([]))
    assert not pixels(built.images["mask"]).any()
    assert built.target is None and built.targets.poses == []


def test_a_failing_depth_step_becomes_a_reason_per_mask():
    result = make_result()
    built = answered(result, FakeDepth(POSITIONS, fail=True))
    masks = json.loads(built.result.data)["masks"]
    assert [m["position"] for m in masks] == [None, None]
    assert all("depth exploded" in m["position_error"] for m in masks)
    assert built.target is None and built.targets.poses == []


def test_the_log_line_of_a_result_says_its_masks_or_its_error_clipped_and_escaped():
    assert result_line(make_result()) == "query q-7: succeeded, 2 mask(s)"
    failed = Result("q-\n8", "x", QueryStatus.FAILED, error="endpoint down\n" + "e" * 2000)
    line = result_line(failed)
    assert line.startswith("query q-\\n8: failed (endpoint down\\neee") and "\n" not in line
    assert len(line) < ERROR_LOG_CHARS + 100


def test_follow_messages_keep_each_objects_label_and_add_positions():
    first, second = two_masks()
    frame = Frame(np.zeros((48, 64, 3), np.uint8), *STAMP, "cam")
    status = {"query_id": "q-1", "state": "tracking",
              "objects": [{"id": 1, "bbox": [5, 5, 20, 15]}, {"id": 2, "bbox": [40, 30, 60, 40]}]}
    depth = FakeDepth(POSITIONS)
    built = followed(frame, [first, second], status, depth)
    assert set(built.images) == {"mask", "labels", "overlay/compressed"}
    assert compressed_to_rgb(built.images["overlay/compressed"]).shape == (48, 64, 3)
    assert depth.calls[0][1][0].mask is first  # depth measures the followed arrays themselves
    assert built.target.point.z == pytest.approx(0.9)
    payload = json.loads(built.status.data)
    assert payload["objects"][0]["position"] == POSITIONS[0]["position"]
    assert payload["objects"][0]["bbox"] == [5, 5, 20, 15]
    assert "position" not in status["objects"][0]  # the caller's dict is left alone

    # The first object out of view: the second keeps label 2, and there is no ~/follow/target.
    depth = FakeDepth(POSITIONS[:1])
    only_second = followed(
        frame, [None, second], {"objects": [{"id": 2}]}, depth)
    labels = pixels(only_second.images["labels"])
    assert set(np.unique(labels[second])) == {2} and not labels[first].any()
    assert only_second.target is None
    assert json.loads(only_second.status.data)["objects"][0]["position"]["x"] == 0.1

    lost = followed(frame, [None, None], {"state": "lost", "objects": []},
                                   FakeDepth([]))
    assert lost.images == {} and lost.target is None
    assert json.loads(lost.status.data)["state"] == "lost"


def test_follow_messages_draw_the_visible_objects_boxes_with_their_answer_ids():
    first, second = two_masks()
    frame = Frame(np.zeros((48, 64, 3), np.uint8), *STAMP, "cam")
    status = {"query_id": "q-1", "state": "tracking", "objects": [{"id": 2}]}
    built = followed(frame, [None, second], status, FakeDepth(BOXES[:1]))
    markers = built.markers.markers
    assert markers[0].action == Marker.DELETEALL
    assert [(m.id, m.type) for m in markers[1:]] == [(2, Marker.CUBE),
                                                     (2, Marker.TEXT_VIEW_FACING)]
    assert markers[2].text == "q-1 #2"  # no label given: the query id
    assert json.loads(built.status.data)["objects"][0]["box"] == BOX
    labelled = followed(frame, [first, None], status, FakeDepth(BOXES[:1]),
                                       label="the red box")
    assert labelled.markers.markers[2].text == "the red box #1"

    lost = followed(frame, [None, None], {"state": "lost"}, FakeDepth([]))
    assert [m.action for m in lost.markers.markers] == [Marker.DELETEALL]  # the boxes are gone
    stopped = followed(frame, [], {"state": "stopped"}, FakeDepth([]))
    assert stopped.markers is None  # the last boxes stay
    assert followed(frame, [second], status).markers is None  # no depth


# --- publishing over rclpy ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph():
    context = rclpy.Context()
    rclpy.init(context=context)
    executor = SingleThreadedExecutor(context=context)
    # Spinner: a node or subscription created by a test while a wait set is being built does
    # not end the spinning for the rest of the module (plain executor.spin() did, on Jazzy).
    spinner = Spinner(executor, name="outputs-test")
    yield context, executor
    spinner.stop()
    executor.shutdown(timeout_sec=2.0)
    rclpy.shutdown(context=context)


class Listener:
    def __init__(self, node, topics):
        self.received = {topic: [] for topic in topics}
        for topic, msg_type in topics.items():
            node.create_subscription(msg_type, topic, self.received[topic].append, RELIABLE)


def _nodes(graph):
    context, executor = graph
    namespace = f"/outputs_test_{os.getpid()}_{next(_namespaces)}"
    node = rclpy.create_node("sam3_agent", namespace=namespace, context=context)
    peer = rclpy.create_node("peer", namespace=namespace, context=context)
    executor.add_node(node)
    executor.add_node(peer)
    return node, peer


def room(node, **params):
    """The node's outputs room with depth on (the 3D topics exist) and ``params``."""
    return outputs.NodeOutputs(node, Config.from_params({"depth.enabled": True, **params}))


def test_answer_publisher_renders_only_subscribed_images(graph):
    node, peer = _nodes(graph)
    listener = Listener(peer, {"sam3_agent/result": String, "sam3_agent/mask": Image,
                               "sam3_agent/overlay/compressed": CompressedImage,
                               "sam3_agent/target": PointStamped,
                               "sam3_agent/markers": MarkerArray})
    publisher = room(node, publish_overlay=True)
    wait_until(lambda: all(publisher.subscribed(f"~/{kind}")
                           for kind in ("mask", "result", "overlay/compressed", "markers")),
               "matching")
    depth = FakeDepth(POSITIONS)
    sent = publisher.publish_answer(measure_answer(make_result(), depth))
    assert set(sent.images) == {"mask", "overlay/compressed"}  # nobody on labels, raw overlay
    wait_until(lambda: listener.received["sam3_agent/result"]
               and listener.received["sam3_agent/mask"]
               and listener.received["sam3_agent/overlay/compressed"], "the answer's messages")
    jpeg = listener.received["sam3_agent/overlay/compressed"][0]
    assert compressed_to_rgb(jpeg).shape == (48, 64, 3) and jpeg.header.stamp.sec == STAMP[0]
    assert json.loads(listener.received["sam3_agent/result"][0].data)["query_id"] == "q-7"
    assert listener.received["sam3_agent/mask"][0].header.stamp.sec == STAMP[0]
    wait_until(lambda: listener.received["sam3_agent/target"]
               and listener.received["sam3_agent/markers"], "the targets")
    assert listener.received["sam3_agent/target"][0].point.x == pytest.approx(0.1)
    assert sent.markers.markers[2].text == "the boxes #1"
    assert listener.received["sam3_agent/markers"][0].markers[2].text == "the boxes #1"
    publisher.destroy()
    wait_until(lambda: peer.count_publishers(f"{node.get_namespace()}/sam3_agent/result") == 0,
               "the publishers to go away")


def test_follow_publisher_always_sends_the_status_and_images_only_when_wanted(graph):
    node, peer = _nodes(graph)
    listener = Listener(peer, {"sam3_agent/follow/status": String,
                               "sam3_agent/follow/labels": Image,
                               "sam3_agent/follow/target": PointStamped,
                               "sam3_agent/markers": MarkerArray})
    publisher = room(node)
    wait_until(lambda: all(publisher.subscribed(name) for name in (
        "~/follow/status", "~/follow/labels", "~/markers")), "matching")
    first, _ = two_masks()
    frame = Frame(np.zeros((48, 64, 3), np.uint8), *STAMP, "cam")
    depth = FakeDepth(POSITIONS[:1])
    assert publisher.follow_wants_3d(depth) and not publisher.follow_wants_3d(None)
    sent = publisher.publish_follow(frame, [first], {"state": "tracking", "objects": [{"id": 1}]},
                                    measure_3d(depth, frame, [first]))
    assert set(sent.images) == {"labels"}
    wait_until(lambda: listener.received["sam3_agent/follow/status"]
               and listener.received["sam3_agent/follow/labels"]
               and listener.received["sam3_agent/follow/target"], "the follow outputs")
    target = listener.received["sam3_agent/follow/target"][0]
    assert (target.header.stamp.sec, target.header.stamp.nanosec) == STAMP
    # Measured for the target and status subscribers: the boxes go out on ~/markers too.
    depth = FakeDepth(BOXES[:1])
    publisher.publish_follow(frame, [first], {"state": "tracking", "objects": [{"id": 1}]},
                             measure_3d(depth, frame, [first]))
    assert len(depth.calls) == 1  # measured once, before publish
    wait_until(lambda: listener.received["sam3_agent/markers"], "the followed boxes")
    publisher.destroy()
    assert not publisher.follow_wants_3d(depth)  # destroyed: nothing to measure for
    quiet = publisher.publish_follow(frame, [first], {"state": "stopped"})
    assert quiet.images == {}  # destroyed: builds and sends nothing
    without_overlay = room(node, publish_overlay=False)
    assert "~/follow/overlay/compressed" not in without_overlay.names
    without_overlay.destroy()


def test_follow_publisher_sends_the_target_in_target_frame_or_none_without_the_transform(graph):
    from sam3_agent_ros.frames import Transform
    from sam3_agent_ros.pipeline.target_frame import TargetFrameRequest

    class Transforms:
        def __init__(self, transform):
            self.transform = transform

        def lookup(self, target, source, stamp_ns, timeout_s):
            return self.transform, f"no transform from '{source}' to '{target}'"

    node, peer = _nodes(graph)
    listener = Listener(peer, {"sam3_agent/follow/target": PointStamped})
    publisher = room(node)
    wait_until(lambda: publisher.subscribed("~/follow/target"), "matching")
    first, _ = two_masks()
    frame = Frame(np.zeros((48, 64, 3), np.uint8), *STAMP, "cam")
    status = {"state": "tracking", "objects": [{"id": 1}]}
    move = Transform(np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 0.0, 1.0]))
    for transform in (None, move):  # first no transform: nothing; then base_link
        located = measure_3d(FakeDepth(POSITIONS[:1]), frame, [first],
                             target_frame=TargetFrameRequest("base_link", Transforms(transform)))
        sent = publisher.publish_follow(frame, [first], status, located)
        assert (sent.target is None) == (transform is None)
    wait_until(lambda: listener.received["sam3_agent/follow/target"], "~/follow/target")
    received = listener.received["sam3_agent/follow/target"]
    assert len(received) == 1 and received[0].header.frame_id == "base_link"
    assert received[0].point.x == pytest.approx(POSITIONS[0]["position"]["x"] + 1.0)
    publisher.destroy()

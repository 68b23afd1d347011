"""ros/messages/vision.py: the detections and the point cloud decoded back (fields, bytes),
without a graph; and one cloud + one Detection3DArray through rclpy serialization."""

from __future__ import annotations

import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import PointCloud2, PointField
from std_msgs.msg import Header
from vision_msgs.msg import Detection3DArray

from sam3_agent_ros.concepts.types import ConceptDetection
from sam3_agent_ros.core.types import Mask
from sam3_agent_ros.ros.messages.vision import (
    answer_detections_2d,
    answer_detections_3d,
    concept_detections_2d,
    concept_detections_3d,
    point_cloud,
)

BOX = {"center": {"x": 0.1, "y": -0.2, "z": 0.91}, "size": {"x": 0.15, "y": 0.1, "z": 0.05},
       "orientation": {"x": 0.0, "y": 0.0, "z": 0.707107, "w": 0.707107}}


def header(frame_id: str = "camera_color_optical_frame") -> Header:
    out = Header(frame_id=frame_id)
    out.stamp.sec, out.stamp.nanosec = 1234, 5678
    return out


def mask_at(x0: int, y0: int, x1: int, y1: int, score: float) -> Mask:
    array = np.zeros((48, 64), bool)
    array[y0:y1, x0:x1] = True
    return Mask.from_array(array, score, (x0, y0, x1, y1))


def decode_cloud(msg: PointCloud2):
    """The cloud's bytes back to points and RGB, read from its own field table."""
    offsets = {f.name: f.offset for f in msg.fields}
    dtype = np.dtype({"names": ["x", "y", "z", "rgb"], "formats": ["<f4", "<f4", "<f4", "<f4"],
                      "offsets": [offsets[n] for n in ("x", "y", "z", "rgb")],
                      "itemsize": msg.point_step})
    records = np.frombuffer(bytes(msg.data), dtype)
    points = np.stack([records["x"], records["y"], records["z"]], axis=1)
    packed = records["rgb"].view("<u4")
    colours = np.stack([(packed >> 16) & 255, (packed >> 8) & 255, packed & 255], axis=1)
    return points, colours.astype(np.uint8)


def test_answer_detections_2d_follow_the_result_order_and_pixel_boxes():
    masks = [mask_at(10, 4, 30, 20, 0.9), mask_at(40, 30, 41, 31, 0.5)]
    msg = answer_detections_2d(header(), masks, "blue cube")
    assert msg.header.frame_id == "camera_color_optical_frame"
    assert [d.id for d in msg.detections] == ["1", "2"]
    first = msg.detections[0]
    assert first.header.stamp.sec == 1234
    assert (first.bbox.center.position.x, first.bbox.center.position.y) == (20.0, 12.0)
    assert (first.bbox.size_x, first.bbox.size_y) == (20.0, 16.0)
    assert first.bbox.center.theta == 0.0
    assert first.results[0].hypothesis.class_id == "blue cube"
    assert first.results[0].hypothesis.score == pytest.approx(0.9)
    second = msg.detections[1]
    assert (second.bbox.center.position.x, second.bbox.size_x) == (40.5, 1.0)


def test_answer_detections_3d_only_for_masks_with_a_box():
    masks = [mask_at(10, 4, 30, 20, 0.9), mask_at(40, 30, 44, 34, 0.5)]
    msg = answer_detections_3d(header("base_link"), masks, [None, BOX], "cube")
    assert len(msg.detections) == 1
    detection = msg.detections[0]
    assert detection.id == "2" and detection.header.frame_id == "base_link"
    centre, size = detection.bbox.center, detection.bbox.size
    assert (centre.position.x, centre.position.y, centre.position.z) == (0.1, -0.2, 0.91)
    assert (centre.orientation.z, centre.orientation.w) == (0.707107, 0.707107)
    assert (size.x, size.y, size.z) == (0.15, 0.1, 0.05)
    assert detection.results[0].pose.pose == centre
    assert detection.results[0].hypothesis.class_id == "cube"
    with pytest.raises(ValueError, match="2 masks but 1 boxes"):
        answer_detections_3d(header(), masks, [BOX], "cube")


def test_concept_detections_use_the_concept_and_the_stable_instance_id():
    m = mask_at(0, 0, 8, 6, 0.7)
    detections = [ConceptDetection(concept="mug", id=17, mask=m.mask, score=0.7,
                                   bbox=m.bbox, centroid=m.centroid, area=m.area)]
    flat = concept_detections_2d(header(), detections)
    assert flat.detections[0].id == "17"
    assert flat.detections[0].results[0].hypothesis.class_id == "mug"
    assert (flat.detections[0].bbox.size_x, flat.detections[0].bbox.size_y) == (8.0, 6.0)
    boxed = concept_detections_3d(header(), detections, [BOX])
    assert boxed.detections[0].id == "17" and boxed.detections[0].bbox.size.z == 0.05


def test_point_cloud_layout_and_bytes_decode_back():
    points = np.array([[0.1, -0.2, 0.9], [1.5, 2.5, -3.0], [0.0, 0.0, 0.25]], np.float32)
    colours = np.array([[255, 0, 0], [0, 128, 255], [1, 2, 3]], np.uint8)
    msg = point_cloud(header("base_link"), points, colours)
    assert (msg.height, msg.width, msg.point_step, msg.row_step) == (1, 3, 16, 48)
    assert not msg.is_bigendian and msg.is_dense
    assert [(f.name, f.offset, f.datatype, f.count) for f in msg.fields] == [
        ("x", 0, PointField.FLOAT32, 1), ("y", 4, PointField.FLOAT32, 1),
        ("z", 8, PointField.FLOAT32, 1), ("rgb", 12, PointField.FLOAT32, 1)]
    assert len(msg.data) == 48
    back_points, back_colours = decode_cloud(msg)
    np.testing.assert_array_equal(back_points, points)
    np.testing.assert_array_equal(back_colours, colours)
    # PCL's packing: 0x00RRGGBB as a little-endian uint32, the float32 with those bits.
    rgb = np.frombuffer(bytes(msg.data), "<u4").reshape(3, 4)[:, 3]
    assert rgb.tolist() == [0xFF0000, 0x0080FF, 0x010203]


def test_an_empty_cloud_is_a_valid_message():
    msg = point_cloud(header(), np.zeros((0, 3)), np.zeros((0, 3), np.uint8))
    assert (msg.width, msg.row_step, len(msg.data)) == (0, 0, 0)


def test_built_messages_survive_serialization():
    points = np.array([[0.1, 0.2, 0.3]], np.float32)
    cloud = point_cloud(header(), points, np.array([[9, 8, 7]], np.uint8))
    back = deserialize_message(serialize_message(cloud), PointCloud2)
    np.testing.assert_array_equal(decode_cloud(back)[0], points)
    boxes = answer_detections_3d(header(), [mask_at(1, 1, 3, 3, 0.4)], [BOX], "x")
    assert deserialize_message(serialize_message(boxes), Detection3DArray) == boxes


def test_the_target_cloud_is_dense_only_when_every_point_is_finite():
    # A cloud moved by a transform that overflowed had 0 finite points of 2670 and said
    # is_dense: true (issue 34).
    from sam3_agent_ros.geometry.target_points import TargetPoints, pack_points
    from sam3_agent_ros.ros.messages.vision import target_cloud

    colours = np.full((3, 3), 200, np.uint8)
    finite = np.array([[0.1, 0.2, 0.9], [0.0, 0.0, 1.0], [0.3, -0.1, 1.2]], np.float32)
    assert target_cloud(header(), TargetPoints(pack_points(finite, colours))).is_dense
    broken = finite.copy()
    broken[1, 0] = np.inf
    assert not target_cloud(header(), TargetPoints(pack_points(broken, colours))).is_dense

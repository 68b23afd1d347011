"""ros/messages/robot_frame.py: the 3D outputs in target_frame (headers, moved poses), none of them
when the transform is missing, the 2D detections always; decoded back from what was built."""

from __future__ import annotations

import numpy as np
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import PointCloud2
from vision_msgs.msg import Detection3DArray

from sam3_agent_ros.concepts.types import ConceptDetection
from sam3_agent_ros.config import DepthConfig
from sam3_agent_ros.core.types import Frame, Mask, QueryStatus, Result
from sam3_agent_ros.frames import Transform
from sam3_agent_ros.pipeline.measurement import measure_answer
from sam3_agent_ros.pipeline.target_frame import TargetFrameRequest
from sam3_agent_ros.pipeline.three_d import PreparedDepth, measure_3d
from sam3_agent_ros.ros.messages.robot_frame import (
    answer_robot_messages,
    concept_robot_messages,
    fill_action_result,
    follow_target,
)

H, W = 20, 30
K = (50.0, 50.0, 15.0, 10.0)
STAMP_NS = 7_250_000_000


class Transforms:
    def __init__(self, transform):
        self.transform, self.stamps = transform, []

    def lookup(self, target, source, stamp_ns, timeout_s):
        self.stamps.append(stamp_ns)
        return self.transform, f"no transform from '{source}' to '{target}': unknown frame"


MOVE = Transform(np.array([1.0, 2.0, 0.5]), np.array([0.0, 0.0, 0.0, 1.0]))


def frame() -> Frame:
    image = np.zeros((H, W, 3), np.uint8)
    image[..., 0] = 200
    return Frame(image=image, stamp_sec=7, stamp_nanosec=250_000_000, frame_id="opt")


def masks():
    a = np.zeros((H, W), bool)
    a[2:10, 3:12] = True
    b = np.zeros((H, W), bool)
    b[11:18, 15:27] = True
    return [a, b]


def result() -> Result:
    found = [Mask.from_array(m, s, (0, 0, W, H)) for m, s in zip(masks(), (0.9, 0.8))]
    return Result("q", "the red blocks", QueryStatus.SUCCEEDED, masks=found, frame=frame(),
                  text_prompts=["block", "red block"])


def still() -> PreparedDepth:
    depth = np.full((H, W), 1.5, np.float32)
    return PreparedDepth(depth, K, None, DepthConfig(erode_px=0, min_valid_pixels=5))


def measured(transform=MOVE, target_frame="base_link", cloud=100):
    request = TargetFrameRequest(target_frame, Transforms(transform)) if target_frame else None
    return measure_answer(result(), still(), target_frame=request, cloud_max_points=cloud)


def test_the_3d_outputs_are_in_target_frame_with_the_colour_stamp_and_moved_poses():
    camera = answer_robot_messages(measured(target_frame=""))
    robot = answer_robot_messages(measured())
    assert robot.header.frame_id == "base_link"
    assert (robot.header.stamp.sec, robot.header.stamp.nanosec) == (7, 250_000_000)
    for message in (robot.target, robot.targets, robot.detections_3d, robot.points):
        assert message.header.frame_id == "base_link"
    assert all(m.header.frame_id == "base_link" for m in robot.markers.markers)
    shift = np.array([1.0, 2.0, 0.5])
    cam, rob = camera.target.point, robot.target.point
    assert np.allclose([rob.x, rob.y, rob.z], np.array([cam.x, cam.y, cam.z]) + shift, atol=1e-4)
    decoded = deserialize_message(serialize_message(robot.detections_3d), Detection3DArray)
    assert [d.id for d in decoded.detections] == ["1", "2"]
    assert decoded.detections[0].results[0].hypothesis.class_id == "red block"
    centre = decoded.detections[1].bbox.center.position
    cam_centre = camera.detections_3d.detections[1].bbox.center.position
    assert np.isclose(centre.x, cam_centre.x + 1.0, atol=1e-4)
    cloud = deserialize_message(serialize_message(robot.points), PointCloud2)
    xyz = np.frombuffer(cloud.data, np.float32).reshape(-1, 4)[:, :3]
    assert 0 < cloud.width <= 100 and np.allclose(xyz[:, 2], 1.5 + 0.5)
    # the 2D detections stay in the colour frame
    assert robot.detections.header.frame_id == "opt"
    assert robot.detections.detections[0].bbox.size_x == 9.0


def test_a_missing_transform_publishes_no_3d_output_but_the_2d_detections():
    robot = answer_robot_messages(measured(transform=None))
    assert robot.detections is not None and len(robot.detections.detections) == 2
    assert (robot.target, robot.targets, robot.markers, robot.detections_3d,
            robot.points) == (None,) * 5


def test_the_action_result_gets_detections_3d_and_the_target_error():
    class Message:  # the fields of Segment.Result this fills
        target_valid = True
        target = None
        detections_3d = None
        target_error = "stale"

    ok = fill_action_result(Message(), measured())
    assert ok.target_error == "" and len(ok.detections_3d.detections) == 2
    assert ok.target.header.frame_id == "base_link" and ok.target_valid
    missing = fill_action_result(Message(), measured(transform=None))
    assert "unknown frame" in missing.target_error
    assert missing.detections_3d.detections == [] and not missing.target_valid
    assert missing.detections_3d.header.frame_id == "base_link"


def test_follow_and_concepts_outputs_follow_the_same_rule():
    visible = measure_3d(still(), frame(), [masks()[0], None],
                         target_frame=TargetFrameRequest("base_link", Transforms(MOVE)))
    target, markers = follow_target(frame(), visible, "q")
    assert target.header.frame_id == "base_link" and np.isclose(target.point.z, 2.0)
    assert [m.id for m in markers.markers[1:]] == [1, 1]  # the box and its label, object 1
    gone = measure_3d(still(), frame(), [masks()[0]],
                      target_frame=TargetFrameRequest("base_link", Transforms(None)))
    assert follow_target(frame(), gone) == (None, None)
    detections = [ConceptDetection("cup", 7, m, 0.7, (3.0, 2.0, 12.0, 10.0), (7.0, 6.0), 72)
                  for m in masks()[:1]]
    moved = measure_3d(still(), frame(), masks()[:1],
                       target_frame=TargetFrameRequest("base_link", Transforms(MOVE)))
    out = concept_robot_messages(frame(), detections, moved)
    assert out.detections_2d.header.frame_id == "opt"
    assert out.detections_2d.detections[0].id == "7"
    assert out.detections_2d.detections[0].results[0].hypothesis.class_id == "cup"
    assert out.detections_3d.header.frame_id == "base_link"
    assert out.detections_3d.detections[0].id == "7"
    none = concept_robot_messages(frame(), detections, measure_3d(
        still(), frame(), masks()[:1],
        target_frame=TargetFrameRequest("base_link", Transforms(None))))
    assert none.detections_3d is None and none.markers is None

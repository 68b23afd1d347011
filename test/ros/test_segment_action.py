"""The action server's pure parts: feedback fields and the result message
(generated types, no ROS graph). Goal validation: test/pipeline/test_intake.py; the goal flow
over DDS: test_action.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
from geometry_msgs.msg import PointStamped, PoseArray
from sensor_msgs.msg import Image
from std_msgs.msg import String

from sam3_agent_ros.action import Segment
from sam3_agent_ros.core.types import Frame, Mask, Phase, QueryStatus, Result, StatusEvent
from sam3_agent_ros.geometry.box import Box3D
from sam3_agent_ros.geometry.grasps import Grasp
from sam3_agent_ros.geometry.measurement import Measurement
from sam3_agent_ros.msg import MaskInfo
from sam3_agent_ros.pipeline.answer_scene import AnswerScene, SceneObject
from sam3_agent_ros.pipeline.measurement import Answer
from sam3_agent_ros.ros.conversions import frame_header
from sam3_agent_ros.ros.messages.action import result_message
from sam3_agent_ros.ros.messages.answer import AnswerMessages, answer_messages
from sam3_agent_ros.ros.segment_action import (
    KeptImages,
    feedback_fields,
    load_interfaces,
)


def test_feedback_fields_fill_none_with_empty_strings():
    fields = feedback_fields(StatusEvent("q", Phase.QUEUED))
    assert fields == {"phase": "queued", "round": 0, "tool": "", "text_prompt": "",
                      "num_masks": 0, "reasoning": "", "elapsed_s": 0.0, "refines": ""}
    refining = Segment.Feedback(**feedback_fields(StatusEvent("q", Phase.QUEUED, refines="q-1")))
    assert refining.refines == "q-1"
    event = StatusEvent("q", Phase.SEGMENTING, round=2, tool="segment_phrase",
                        text_prompt="cup", num_masks=3, elapsed_s=1.5, reasoning="the left one")
    feedback = Segment.Feedback(**feedback_fields(event))
    assert (feedback.phase, feedback.round, feedback.tool, feedback.num_masks,
            feedback.reasoning) == ("segmenting", 2, "segment_phrase", 3, "the left one")


def _answer(status=QueryStatus.SUCCEEDED) -> Result:
    image = np.zeros((6, 8, 3), np.uint8)
    first = np.zeros((6, 8), bool)
    first[1:3, 2:5] = True
    second = np.zeros((6, 8), bool)
    second[4:6, 6:8] = True
    masks = [Mask.from_array(first, 0.9, (2, 1, 5, 3)), Mask.from_array(second, 0.5, (6, 4, 8, 6))]
    return Result("q-7", "the cups", status, masks=masks if status != QueryStatus.FAILED else [],
                  error="why" if status == QueryStatus.FAILED else None,
                  frame=Frame(image, 12, 34, "cam"))


def test_result_message_renders_mask_and_labels_on_the_frame_header():
    result = _answer()
    message = result_message(Segment, MaskInfo, result)
    assert (message.status, message.error) == ("succeeded", "")
    assert (message.header.stamp.sec, message.header.stamp.nanosec,
            message.header.frame_id) == (12, 34, "cam")
    mask = np.frombuffer(message.mask.data, np.uint8).reshape(6, 8)
    labels = np.frombuffer(message.labels.data, np.uint8).reshape(6, 8)
    assert message.mask.encoding == "mono8" and message.mask.header == message.header
    np.testing.assert_array_equal(mask == 255, result.masks[0].mask | result.masks[1].mask)
    np.testing.assert_array_equal(labels == 2, result.masks[1].mask)
    assert [m.id for m in message.masks] == [1, 2]
    assert list(message.masks[1].bbox) == [6, 4, 8, 6] and message.masks[0].area == 6
    assert message.target_valid is False and message.target.header == message.header
    assert json.loads(message.result_json) == result.to_json()


def test_result_message_reuses_what_the_node_published():
    result = _answer()
    header = frame_header(result.frame)
    published_mask = Image(header=header, encoding="mono8", width=1, height=1, step=1,
                           data=[7])
    target = PointStamped(header=header)
    target.point.z = 1.25
    published = AnswerMessages(header=header, result=String(data='{"as": "published"}'),
                               images={"mask": published_mask}, target=target)
    message = result_message(Segment, MaskInfo, result, published)
    assert message.mask == published_mask  # not rendered twice
    assert message.labels.width == 8  # nobody subscribed to ~/labels: rendered here
    assert message.target_valid is True and message.target.point.z == 1.25
    assert message.result_json == '{"as": "published"}'


def test_mask_infos_carry_the_position_and_box_of_the_measured_answer():
    result = _answer()
    box = {"center": {"x": 0.1, "y": -0.05, "z": 0.92}, "size": {"x": 0.15, "y": 0.1, "z": 0.01},
           "orientation": {"x": 0.0, "y": 0.0, "z": 0.258819, "w": 0.965926}}
    measured = [Measurement.from_json(
        {"position": {"x": 0.1, "y": -0.05, "z": 0.9}, "position_error": None, "box": box,
         "box_error": None}), Measurement.missing("no depth")]
    published = answer_messages(Answer(result, measured), ())  # what the node published
    first, second = result_message(Segment, MaskInfo, result, published).masks
    assert first.position_valid and first.box_valid
    assert [first.position.x, first.position.y, first.position.z] == pytest.approx(
        [0.1, -0.05, 0.9])
    pose = first.box_pose
    assert [pose.position.x, pose.position.y, pose.position.z] == pytest.approx(
        [0.1, -0.05, 0.92])
    assert [pose.orientation.x, pose.orientation.y, pose.orientation.z,
            pose.orientation.w] == pytest.approx([0.0, 0.0, 0.258819, 0.965926])
    assert [first.box_size.x, first.box_size.y, first.box_size.z] == pytest.approx(
        [0.15, 0.1, 0.01])
    assert not second.position_valid and not second.box_valid
    assert second.box_pose.orientation.w == 1.0  # the default pose, marked invalid
    without_depth = result_message(Segment, MaskInfo, _answer()).masks[0]
    assert not without_depth.position_valid and not without_depth.box_valid


def test_failed_result_has_empty_images_and_the_error():
    message = result_message(Segment, MaskInfo, _answer(QueryStatus.FAILED))
    assert (message.status, message.error) == ("failed", "why")
    assert (message.mask.width, len(message.mask.data), len(message.masks)) == (0, 0, 0)
    assert message.mask.header.frame_id == "cam"


def test_the_interfaces_load():
    assert load_interfaces() == (Segment, MaskInfo)


def finished_result(stamp_sec: int) -> Segment.Result:
    frame = Frame(np.zeros((6, 8, 3), np.uint8), stamp_sec, 0, "cam")
    mask = np.zeros((6, 8), bool)
    mask[1:3, 2:5] = True
    result = Result("q", "cup", QueryStatus.SUCCEEDED, masks=[Mask.from_array(mask, 0.9,
                                                                               (2, 1, 5, 3))],
                    frame=frame)
    return result_message(Segment, MaskInfo, result)


def test_only_the_latest_finished_results_keep_their_images():
    """A goal flood cannot pin images: the oldest kept result past the limit loses its mask and
    labels (header, masks and result_json stay)."""
    now = [0.0]
    kept = KeptImages(2, timeout_s=10, clock=lambda: now[0])
    messages = [finished_result(k) for k in range(3)]
    for message in messages:
        kept.add(message)
        now[0] += 1.0
    assert len(kept) == 2
    first = messages[0]
    assert len(first.mask.data) == len(first.labels.data) == 0
    assert first.mask.header.stamp.sec == 0 and first.labels.header.frame_id == "cam"
    assert len(first.masks) == 1 and json.loads(first.result_json)["status"] == "succeeded"
    assert all(len(m.mask.data) == 48 and len(m.labels.data) == 48 for m in messages[1:])


def test_expired_results_are_let_go_without_touching_them():
    now = [0.0]
    kept = KeptImages(1, timeout_s=10, clock=lambda: now[0])
    old = finished_result(1)
    kept.add(old)
    now[0] = 11.0  # rclpy has dropped it: only our reference goes, its images are not stripped
    kept.add(finished_result(2))
    assert len(kept) == 1 and len(old.mask.data) == 48
    kept.add(result_message(Segment, MaskInfo, Result("q", "x", QueryStatus.FAILED, error="e")))
    assert len(kept) == 1  # a result without images takes no place
    kept.clear()
    assert len(kept) == 0


def test_result_message_carries_the_published_answers_detections_3d_and_target_error():
    from sam3_agent_ros.ros.messages.robot_frame import answer_robot_messages
    from test.ros.messages.test_robot_frame import measured
    from test.ros.messages.test_robot_frame import result as robot_result

    for transform, frames in (("ok", 2), (None, 0)):
        answer = measured() if transform else measured(transform=None)
        robot = answer_robot_messages(answer)
        published = AnswerMessages(header=robot.header, result=String(data="{}"),
                                   target=robot.target, answer=answer, robot=robot)
        message = result_message(Segment, MaskInfo, robot_result(), published)
        assert len(message.detections_3d.detections) == frames
        assert message.detections_3d.header.frame_id == "base_link"
        if transform:
            assert message.target_error == "" and message.target_valid
            assert message.target.header.frame_id == "base_link"
        else:  # no transform: no pose labelled base_link, and why
            assert "unknown frame" in message.target_error and not message.target_valid


def test_the_result_carries_the_grasps_best_first():
    """CONTRACTS §12: the action result's grasps are those of ~/grasps (published or not)."""
    result = _answer()
    grasps = (Grasp((0.0, 0.1, 0.8), (0.0, 0.0, 0.0, 1.0), 0.05, 0.9, 0.02, "top"),
              Grasp((0.0, 0.2, 0.8), (0.0, 0.0, 0.0, 1.0), 0.05, 0.5, 0.02, "side"))
    box = Box3D((0.0, 0.1, 0.85), (0.06, 0.05, 0.1), (0.0, 0.0, 0.0, 1.0))
    answer = Answer(result, [Measurement.missing("x")] * 2,
                    scene=AnswerScene((SceneObject("sam3_agent/target", box),), None, grasps))
    published = answer_messages(answer, (), scene_ids=[])
    for given in (published, AnswerMessages(header=published.header, result=published.result,
                                            answer=answer)):
        message = result_message(Segment, MaskInfo, result, given)
        assert [p.position.y for p in message.grasps.poses] == pytest.approx([0.1, 0.2])
        assert message.grasps.header.frame_id == "cam"
    assert result_message(Segment, MaskInfo, result).grasps == PoseArray(
        header=frame_header(result.frame))

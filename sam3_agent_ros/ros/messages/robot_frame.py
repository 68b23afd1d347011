"""The 3D outputs in the output frame (CONTRACTS §9), from values the pipeline already computed.

The output frame is ``target_frame`` when set, else the colour camera's frame; the stamp is always
the colour frame's (the transform was looked up at it, ``pipeline.target_frame``). When the
transform into ``target_frame`` is missing, NONE of the 3D outputs is built for that answer (or
follow update, or concept pass): a pose is never published in a frame other than the one its
header names. The 2D detections (``~/detections``) always go out, in the colour frame.

- ``answer_robot_messages(answer)``: ``~/detections``, ``~/detections_3d``, ``~/target/points``
  and the ``~/target`` / ``~/targets`` / ``~/markers`` in the output frame;
- ``follow_target(frame, visible)``: ``~/follow/target`` and the follow markers likewise;
- ``concept_robot_messages(frame, detections, located)``: ``~/concepts/detections_2d`` /
  ``~/concepts/detections_3d`` / ``~/concepts/markers``;
- ``fill_action_result(message, answer)``: the action result's ``detections_3d`` and
  ``target_error`` (and its ``target`` in the output frame when ``target_frame`` is set).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from geometry_msgs.msg import PointStamped, PoseArray
from sensor_msgs.msg import PointCloud2
from std_msgs.msg import Header
from vision_msgs.msg import Detection2DArray, Detection3DArray
from visualization_msgs.msg import MarkerArray

from sam3_agent_ros.core.types import Frame
from sam3_agent_ros.geometry.measurement import Measurement
from sam3_agent_ros.pipeline.measurement import Answer, is_answered
from sam3_agent_ros.pipeline.target_frame import TargetFrame
from sam3_agent_ros.pipeline.three_d import Located
from sam3_agent_ros.ros.conversions import frame_header
from sam3_agent_ros.ros.messages.markers import marker_messages, target_messages
from sam3_agent_ros.ros.messages.scene import grasp_markers
from sam3_agent_ros.ros.messages.vision import (
    answer_detections_2d,
    answer_detections_3d,
    concept_detections_2d,
    concept_detections_3d,
    target_cloud,
)


def output_header(frame: Frame | None, target: TargetFrame | None) -> Header:
    """The colour frame's header, its frame_id replaced by ``target_frame`` when set."""
    header = frame_header(frame)
    if target is not None:
        header.frame_id = target.frame_id
    return header


def _boxes(measurements: Sequence[Measurement]) -> list[dict[str, Any] | None]:
    return [m.box.to_json() if m.box is not None else None for m in measurements]


def class_of(answer: Answer) -> str:
    """The hypothesis class of an answer's detections: the last executed text prompt."""
    prompts = answer.result.text_prompts
    return prompts[-1] if prompts else ""


@dataclass
class RobotMessages:
    """An answer's standard and output-frame messages. ``detections`` (2D, colour frame) for
    every answer with pixels; the rest None without a 3D step or without the transform;
    ``points`` None when it was not asked for (``measure_answer(cloud_max_points=...)``)."""

    header: Header  # the output frame's
    detections: Detection2DArray | None = None
    detections_3d: Detection3DArray | None = None
    points: PointCloud2 | None = None
    target: PointStamped | None = None
    targets: PoseArray | None = None
    markers: MarkerArray | None = None


def answer_robot_messages(answer: Answer) -> RobotMessages:
    """Build an answer's ``~/detections`` and, in the output frame, its 3D outputs."""
    result = answer.result
    header = output_header(result.frame, answer.target)
    out = RobotMessages(header)
    if not is_answered(result):
        return out
    out.detections = answer_detections_2d(frame_header(result.frame), result.masks,
                                          class_of(answer))
    moved = answer.output_measurements
    if moved is None or len(moved) != len(result.masks):
        return out  # no 3D step, or no transform into target_frame: no pose published
    out.target, out.targets = target_messages(header, moved)
    out.markers = marker_messages(header, moved, result.query)
    if answer.scene is not None:  # the grasps too (the grasp scene, in the same frame)
        out.markers.markers += grasp_markers(header, answer.scene.grasps)
    out.detections_3d = answer_detections_3d(header, result.masks, _boxes(moved),
                                             class_of(answer))
    if answer.points is not None:
        out.points = target_cloud(header, answer.points)
    return out


def follow_target(frame: Frame | None, visible: Located, label: str = ""
                  ) -> tuple[PointStamped | None, MarkerArray | None]:
    """A follow update's ``~/follow/target`` (the first object's point) and markers in the output
    frame; (None, None) when the transform is missing or nothing is measured."""
    moved = visible.output_measurements
    if moved is None:
        return None, None
    header = output_header(frame, visible.target)
    first = moved[0] if moved else None
    target = None
    if first is not None and first.position is not None:
        target, _ = target_messages(header, [first])
    seen = [(k + 1, m) for k, m in enumerate(moved) if m is not None]
    if not seen:
        return target, None
    markers = marker_messages(header, [m for _, m in seen], label, ids=[k for k, _ in seen])
    return target, markers


@dataclass
class ConceptRobotMessages:
    header: Header  # the output frame's
    detections_2d: Detection2DArray | None = None
    detections_3d: Detection3DArray | None = None
    markers: MarkerArray | None = None


def concept_robot_messages(frame: Frame, detections: Sequence[Any],
                           located: Located | None) -> ConceptRobotMessages:
    """A concept pass's ``~/concepts/detections_2d`` (colour frame) and, with its 3D step
    (``located``: one measurement per detection, moved into ``target_frame`` when set), its
    ``~/concepts/detections_3d`` and markers in the output frame (none without the
    transform)."""
    header = output_header(frame, located.target if located is not None else None)
    out = ConceptRobotMessages(header, concept_detections_2d(frame_header(frame), detections))
    moved = located.output_measurements if located is not None else None
    if moved is None:
        return out
    kept = [m if m is not None else Measurement.missing(None) for m in moved]
    out.detections_3d = concept_detections_3d(header, detections, _boxes(kept))
    out.markers = marker_messages(header, kept, [d.concept for d in detections],
                                  ids=[d.id for d in detections])
    return out


def fill_action_result(message: Any, answer: Answer,
                       robot: RobotMessages | None = None) -> Any:
    """Fill a ``Segment.Result``'s ``detections_3d`` and ``target_error`` from the answer (the
    published ``robot`` messages reused when given); with ``target_frame`` set, its ``target``
    / ``target_valid`` are the output frame's too (camera-frame ``target`` never labelled
    ``target_frame``)."""
    robot = robot if robot is not None else answer_robot_messages(answer)
    message.detections_3d = (robot.detections_3d if robot.detections_3d is not None
                             else Detection3DArray(header=robot.header))
    message.target_error = answer.target_error
    if answer.target is not None:
        message.target_valid = robot.target is not None
        message.target = robot.target if robot.target is not None \
            else PointStamped(header=robot.header)
    return message

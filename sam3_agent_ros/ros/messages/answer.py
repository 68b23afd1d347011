"""A query's messages and a follow update's, from values already computed (the masks and their
``Measurement``s, by the one 3D step): building never measures. Every message carries the header
of the frame the masks were computed on; the 3D ones are built in the output frame only
(``robot_frame``: ``target_frame`` when set, else the colour camera's). ``outputs()`` hands them
over as ``{field: message}``, the fields of ``ros/output_topics.TOPICS``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from geometry_msgs.msg import PointStamped, PoseArray
from std_msgs.msg import Header, String
from visualization_msgs.msg import MarkerArray

from sam3_agent_ros.config import OverlayConfig
from sam3_agent_ros.core import finite_json
from sam3_agent_ros.core.types import Frame
from sam3_agent_ros.geometry.measurement import Measurement
from sam3_agent_ros.pipeline.measurement import Answer, is_answered
from sam3_agent_ros.pipeline.three_d import Located
from sam3_agent_ros.ros.conversions import frame_header
from sam3_agent_ros.ros.messages.images import (
    DEFAULT_OVERLAY,
    FOLLOW_IMAGE_KINDS,
    IMAGE_KINDS,
    image_messages,
    mask_boxes,
)
from sam3_agent_ros.ros.messages.markers import marker_messages, target_messages
from sam3_agent_ros.ros.messages.robot_frame import (
    RobotMessages,
    answer_robot_messages,
    follow_target,
)
from sam3_agent_ros.ros.messages.scene import SceneMessages, scene_messages


@dataclass
class AnswerMessages:
    """Everything one query's answer publishes. ``images`` holds the kinds asked for (none for a
    failed or cancelled query, or a frame without pixels; ``overlay/compressed`` is a
    CompressedImage); ``robot``: the 2D detections and the 3D outputs in the output frame
    (``robot_frame.answer_robot_messages``), whose ``target``/``targets``/``markers`` are also
    here (None without a 3D step or without the transform into ``target_frame``)."""

    header: Header
    result: String
    images: dict[str, Any] = field(default_factory=dict)
    target: PointStamped | None = None
    targets: PoseArray | None = None
    markers: MarkerArray | None = None
    answer: Answer | None = None  # the typed answer (the action's result reads it)
    robot: RobotMessages | None = None
    scene: SceneMessages | None = None  # the grasp scene's (None: scene outputs off)

    def outputs(self) -> dict[str, Any]:
        """``{field: message}`` in publishing order: images, result JSON, then the rest."""
        robot = self.robot if self.robot is not None else RobotMessages(self.header)
        scene = self.scene if self.scene is not None else SceneMessages(measured=False)
        return {**self.images, "result": self.result, "detections": robot.detections,
                "target": self.target, "targets": self.targets, "markers": self.markers,
                "detections_3d": robot.detections_3d, "points": robot.points,
                "collision_objects": scene.collision_objects or None,
                "scene_points": scene.scene_points, "grasps": scene.grasps}


def answer_messages(answer: Answer, kinds: Iterable[str] = IMAGE_KINDS,
                    overlay: OverlayConfig = DEFAULT_OVERLAY,
                    scene_ids: Sequence[str] | None = None) -> AnswerMessages:
    """Build a query's messages: the images among ``kinds``, the result JSON and the output
    frame's messages (when the answer was measured, ``pipeline.measurement.measure_answer``:
    the targets and markers). ``scene_ids`` (the grasp scene's outputs on): the previous
    answer's collision objects, removed first when this answer was measured
    (``messages.scene``)."""
    result = answer.result
    frame = result.frame
    header = frame_header(frame)
    images: dict[str, Any] = {}
    if is_answered(result):
        assert frame is not None
        images = image_messages(frame.image, [m.mask for m in result.masks], header, kinds,
                                overlay, mask_boxes(result.masks))
    robot = answer_robot_messages(answer)
    scene = None
    if scene_ids is not None:
        measured = is_answered(result) and answer.measurements is not None
        scene = (scene_messages(robot.header, answer.scene, scene_ids) if measured
                 else SceneMessages(measured=False))
    return AnswerMessages(header=header, result=String(data=finite_json.dumps(result.to_json())),
                          images=images, target=robot.target, targets=robot.targets,
                          markers=robot.markers, answer=answer, robot=robot, scene=scene)


@dataclass
class FollowMessages:
    """One follow update's messages; ``target`` is None without depth or without a position,
    ``markers`` None without depth or when the boxes do not change (see ``follow_messages``)."""

    header: Header
    status: String
    images: dict[str, Any] = field(default_factory=dict)
    target: PointStamped | None = None
    extras: list[dict[str, Any]] = field(default_factory=list)
    markers: MarkerArray | None = None

    def outputs(self) -> dict[str, Any]:
        """``{field: message}`` in publishing order: images, target, markers, then status."""
        return {**self.images, "target": self.target, "markers": self.markers,
                "status": self.status}


def follow_messages(frame: Frame | None, masks: Sequence[np.ndarray | None],
                    status: dict[str, Any], located: Located | None = None,
                    kinds: Iterable[str] = FOLLOW_IMAGE_KINDS, label: str | None = None,
                    overlay: OverlayConfig = DEFAULT_OVERLAY) -> FollowMessages:
    """Build a follow update's messages. ``masks`` are in the answer's order, None for an
    object not visible on this frame, so ``labels`` keeps k for the k-th object of the answer.
    Images are built when at least one object is visible. ``located`` (with depth: the one 3D
    step, ``pipeline.three_d.measure_3d``, one measurement per object, None for one not
    visible): ``target`` is the first object's point (as ``~/target``), each status object
    (matched by ``id``) gains ``position`` / ``position_error`` / ``box`` / ``box_error``
    (camera frame), and ``markers`` holds the visible objects' boxes labelled ``label``
    (default: the query id); with depth and no object visible while ``lost``, ``markers`` is a
    lone DELETEALL (the boxes are gone). With ``target_frame`` set (``located.target``), the
    target and boxes are built in that frame only (none without its transform)."""
    header = frame_header(frame)
    measurements = located.measurements if located is not None else None
    in_target_frame = located is not None and located.target is not None
    visible = [k for k, m in enumerate(masks) if m is not None]
    images: dict[str, Any] = {}
    target, extras, markers = None, [], None
    if frame is not None and frame.image.size > 0 and visible:
        images = image_messages(frame.image, masks, header, kinds, overlay)
        if measurements is not None:
            extras = [m.to_json() if m is not None else {} for m in measurements]
            first = measurements[0] if measurements else None
            if not in_target_frame:
                if masks[0] is not None and first is not None:
                    target, _ = target_messages(header, [first])
                seen = [measurements[k] or Measurement.missing(None) for k in visible]
                markers = marker_messages(header, seen,
                                          label or str(status.get("query_id", "")),
                                          ids=[k + 1 for k in visible])
    elif measurements is not None and frame is not None and status.get("state") == "lost":
        markers = marker_messages(header, [], "")
    if located is not None and in_target_frame:
        target, moved_markers = follow_target(frame, located, label or "")
        if moved_markers is not None or located.output_measurements is None:
            markers = moved_markers
    status = dict(status)
    if extras and isinstance(status.get("objects"), list):
        status["objects"] = [dict(obj, **extras[obj["id"] - 1])
                             if 0 < obj.get("id", 0) <= len(extras) else dict(obj)
                             for obj in status["objects"]]
    return FollowMessages(header=header, status=String(data=finite_json.dumps(status)),
                          images=images, target=target, extras=extras, markers=markers)

"""The ``Segment`` action's result (interface §5a): built from what the node published for the
query (its header, result JSON, images and 3D target are reused), the rest from the result."""

from __future__ import annotations

from typing import Any

from geometry_msgs.msg import PoseArray
from sensor_msgs.msg import Image

from sam3_agent_ros.core import finite_json
from sam3_agent_ros.core.types import Frame, QueryStatus, Result
from sam3_agent_ros.geometry.measurement import Measurement
from sam3_agent_ros.ros.conversions import frame_header
from sam3_agent_ros.ros.messages.geometry import box_pose, box_scale, point_msg
from sam3_agent_ros.ros.messages.images import image_messages
from sam3_agent_ros.ros.messages.robot_frame import fill_action_result, output_header
from sam3_agent_ros.ros.messages.scene import grasp_poses

RESULT_IMAGE_KINDS = ("mask", "labels")


def result_message(action_type: Any, mask_info_type: Any, result: Result,
                   published: Any = None) -> Any:
    """The ``Segment.Result`` of a query. ``published`` is what the node published for it
    (``messages.answer.AnswerMessages``: header, result JSON, the images somebody subscribed
    to, the 3D target, the typed answer whose measurements fill each ``MaskInfo``); the images
    nobody subscribed to are rendered here. Without ``published`` (the node was releasing its
    publishers) the message is built from ``result`` alone (its masks without 3D fields; the
    result JSON still has them)."""
    frame: Frame | None = result.frame
    header = published.header if published is not None else frame_header(frame)
    images = dict(published.images) if published is not None else {}
    answered = result.status in (QueryStatus.SUCCEEDED, QueryStatus.NO_MASK)
    if answered and frame is not None and frame.image.size > 0:
        missing = [kind for kind in RESULT_IMAGE_KINDS if kind not in images]
        if missing:
            images.update(image_messages(frame.image, [m.mask for m in result.masks], header,
                                         missing))
    message = action_type.Result()
    message.status = result.status.value
    message.error = result.error or ""
    message.header = header
    answer = getattr(published, "answer", None)  # the typed answer: its JSON is not re-read
    measured = answer.measurements if answer is not None else None
    message.masks = [
        mask_info(mask_info_type, index + 1, mask,
                  measured[index] if measured is not None and index < len(measured) else None)
        for index, mask in enumerate(result.masks)]
    message.mask = images.get("mask") or Image(header=header)
    message.labels = images.get("labels") or Image(header=header)
    target = published.target if published is not None else None
    message.target_valid = target is not None
    if target is not None:
        message.target = target
    else:
        message.target.header = header
    message.result_json = (published.result.data if published is not None
                           else finite_json.dumps(result.to_json()))
    if answer is not None and hasattr(message, "detections_3d"):  # CONTRACTS §9
        fill_action_result(message, answer, getattr(published, "robot", None))
    if hasattr(message, "grasps"):  # CONTRACTS §12: the target's grasps, best first
        scene = getattr(published, "scene", None)
        grasps = scene.grasps if scene is not None else None
        if grasps is None and answer is not None and answer.scene is not None:
            grasps = grasp_poses(output_header(result.frame, answer.target), answer.scene.grasps)
        message.grasps = grasps if grasps is not None else PoseArray(header=header)
    return message


def mask_info(mask_info_type: Any, mask_id: int, mask: Any,
              measurement: Measurement | None) -> Any:
    """One ``MaskInfo``: the mask's 2D fields, and its position and box when measured."""
    info = mask_info_type(id=mask_id, score=float(mask.score),
                          bbox=[float(v) for v in mask.bbox], area=int(mask.area),
                          centroid=[float(v) for v in mask.centroid])
    if measurement is None:
        return info
    if measurement.position is not None:
        info.position_valid = True
        info.position = point_msg(measurement.position)
    if measurement.box is not None:
        info.box_valid = True
        info.box_pose = box_pose(measurement.box)
        info.box_size = box_scale(measurement.box)
    return info

"""The standing concepts' messages (interface §5c): the detections, the label and overlay
images, and (``robot_frame.concept_robot_messages``, in the output frame only) the vision_msgs
detections and the markers of the located detections. ``outputs()`` hands them over as
``{field: message}``, the fields of ``ros/output_topics.TOPICS``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header

from sam3_agent_ros.concepts import ConceptFrame
from sam3_agent_ros.concepts import images as concept_images
from sam3_agent_ros.config import PARAMETERS_BY_NAME
from sam3_agent_ros.pipeline.three_d import Located
from sam3_agent_ros.ros.conversions import array_to_image, frame_header, jpeg_image
from sam3_agent_ros.ros.messages.geometry import point_msg
from sam3_agent_ros.ros.messages.robot_frame import ConceptRobotMessages, concept_robot_messages

IMAGE_KINDS = ("labels", "overlay/compressed")
ROBOT_KINDS = ("markers", "detections_2d", "detections_3d")  # in the output frame
JPEG_QUALITY = PARAMETERS_BY_NAME["overlay.jpeg_quality"].default


def detection_message(detection: Any, message_type: Any) -> Any:
    """A ``sam3_agent_ros/msg/ConceptDetection`` (``message_type``) of one detection."""
    msg = message_type(concept=detection.concept, id=int(detection.id),
                       score=float(detection.score), area=int(detection.area))
    msg.bbox = [float(v) for v in detection.bbox]
    msg.centroid = [float(v) for v in detection.centroid]
    if detection.position is not None:
        msg.position_valid = True
        position = detection.position
        msg.position = point_msg((float(position["x"]), float(position["y"]),
                                  float(position["z"])))
    return msg


@dataclass
class ConceptMessages:
    header: Header
    detections: Any = None  # ConceptDetections (None without the interfaces)
    labels: Image | None = None
    overlay: CompressedImage | None = None
    robot: ConceptRobotMessages | None = None  # built when one of ROBOT_KINDS is asked for

    def outputs(self) -> dict[str, Any]:
        """``{field: message}`` in publishing order: the output frame's first."""
        robot = self.robot if self.robot is not None else ConceptRobotMessages(self.header)
        return {"detections_2d": robot.detections_2d, "detections_3d": robot.detections_3d,
                "markers": robot.markers, "labels": self.labels,
                "overlay/compressed": self.overlay, "detections": self.detections}


def concept_messages(result: ConceptFrame, kinds: Iterable[str] = IMAGE_KINDS,
                     types: tuple[Any, Any] | None = None, located: Located | None = None,
                     jpeg_quality: int = JPEG_QUALITY) -> ConceptMessages:
    """A pass's messages: the detections (``types``: ``interfaces()``; None: none), the images
    among ``kinds``, and with one of ``ROBOT_KINDS`` the output frame's (``located``: the pass's
    3D step; the markers and 3D detections need it)."""
    header = frame_header(result.frame)
    out = ConceptMessages(header)
    if types is not None:
        detections_type, detection_type = types
        out.detections = detections_type(header=header, detections=[
            detection_message(d, detection_type) for d in result.detections])
    image = result.frame.image
    kinds = set(kinds)
    if "labels" in kinds:
        out.labels = array_to_image(
            concept_images.label_image(result.detections, image.shape[:2]), "mono16", header)
    if "overlay/compressed" in kinds:
        out.overlay = jpeg_image(concept_images.overlay(image, result.detections), jpeg_quality,
                                 header)
    if kinds & set(ROBOT_KINDS):
        out.robot = concept_robot_messages(result.frame, result.detections, located)
    return out

"""The standing concepts' messages (interface §5c): the detections, the label and overlay
images, and the markers of the located detections."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header
from visualization_msgs.msg import MarkerArray

from sam3_agent_ros.concepts import ConceptFrame
from sam3_agent_ros.concepts import images as concept_images
from sam3_agent_ros.config import PARAMETERS_BY_NAME
from sam3_agent_ros.geometry.measurement import Measurement
from sam3_agent_ros.ros.conversions import array_to_image, frame_header, jpeg_image
from sam3_agent_ros.ros.messages.geometry import point_msg
from sam3_agent_ros.ros.messages.markers import marker_messages

IMAGE_KINDS = ("labels", "overlay")
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
    markers: MarkerArray | None = None


def concept_messages(result: ConceptFrame, kinds: Iterable[str] = IMAGE_KINDS,
                     types: tuple[Any, Any] | None = None,
                     extras: Sequence[Measurement] | None = None,
                     jpeg_quality: int = JPEG_QUALITY) -> ConceptMessages:
    """A pass's messages: the detections (``types``: ``interfaces()``; None: none), the images
    among ``kinds``, and with ``extras`` (each detection's ``Measurement``) and
    ``"markers"`` in ``kinds`` the RViz markers."""
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
    if "overlay" in kinds:
        out.overlay = jpeg_image(concept_images.overlay(image, result.detections), jpeg_quality,
                                 header)
    if "markers" in kinds and extras is not None:
        out.markers = marker_messages(header, extras, [d.concept for d in result.detections],
                                      ids=[d.id for d in result.detections])
    return out

"""Standard messages for planners and viewers (CONTRACTS §9), built without a graph:
``vision_msgs`` detections of an answer or of standing concepts, and the target's point cloud.

- ``answer_detections_2d`` / ``concept_detections_2d``: ``vision_msgs/Detection2DArray``, one
  ``Detection2D`` per mask in result order; ``bbox`` = the mask's pixel box (centre and size in
  pixels, pixel i spanning [i, i + 1)), ``results[0].hypothesis`` = (class, score), ``id`` = the
  mask id (k + 1) or the concept instance's stable id.
- ``answer_detections_3d`` / ``concept_detections_3d``: ``vision_msgs/Detection3DArray``, one
  ``Detection3D`` per mask with a fitted box (``{"center", "size", "orientation"}`` as in the
  result JSON, already in the header's frame); ``results[0].pose.pose`` = the box pose.
- ``point_cloud``: ``sensor_msgs/PointCloud2``, height 1, fields ``x``, ``y``, ``z``, ``rgb``
  (FLOAT32 at offsets 0, 4, 8, 12; point_step 16; little-endian; dense), the colour packed as
  PCL does: the uint32 ``0x00RRGGBB`` reinterpreted as a float32.

The header (stamp of the colour frame; frame_id the colour frame or ``target_frame``) is the
caller's: these builders never decide which frame a pose is in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from geometry_msgs.msg import Pose
from sensor_msgs.msg import PointCloud2, PointField
from vision_msgs.msg import (
    Detection2D,
    Detection2DArray,
    Detection3D,
    Detection3DArray,
    ObjectHypothesisWithPose,
)

from sam3_agent_ros.geometry.target_points import (
    POINT_FIELDS,
    POINT_STEP,
    TargetPoints,
    pack_points,
)
from sam3_agent_ros.masks import PixelBox, pixel_box


def _hypothesis(class_id: str, score: float, pose: Pose | None = None) -> ObjectHypothesisWithPose:
    result = ObjectHypothesisWithPose()
    result.hypothesis.class_id = class_id
    result.hypothesis.score = float(score)
    if pose is not None:
        result.pose.pose = pose
    return result


def detection_2d(header: Any, detection_id: str, box: PixelBox | None, class_id: str,
                 score: float) -> Detection2D:
    """One Detection2D; ``box`` = (x0, y0, x1, y1) exclusive pixel box (None: empty, all 0)."""
    out = Detection2D(header=header, id=detection_id)
    if box is not None:
        x0, y0, x1, y1 = box
        out.bbox.center.position.x = (x0 + x1) / 2.0
        out.bbox.center.position.y = (y0 + y1) / 2.0
        out.bbox.size_x, out.bbox.size_y = float(x1 - x0), float(y1 - y0)
    out.results.append(_hypothesis(class_id, score))
    return out


def box_pose(box: dict[str, dict[str, float]]) -> Pose:
    """The pose of a result-JSON box (its centre and orientation)."""
    pose = Pose()
    c, q = box["center"], box["orientation"]
    pose.position.x, pose.position.y, pose.position.z = (float(c[k]) for k in "xyz")
    o = pose.orientation
    o.x, o.y, o.z, o.w = (float(q[k]) for k in "xyzw")
    return pose


def detection_3d(header: Any, detection_id: str, box: dict[str, dict[str, float]],
                 class_id: str, score: float) -> Detection3D:
    """One Detection3D from a result-JSON box (in the header's frame)."""
    out = Detection3D(header=header, id=detection_id)
    out.bbox.center = box_pose(box)
    size = box["size"]
    out.bbox.size.x, out.bbox.size.y, out.bbox.size.z = (float(size[k]) for k in "xyz")
    out.results.append(_hypothesis(class_id, score, box_pose(box)))
    return out


def _box_of(item: Any) -> PixelBox | None:
    box = getattr(item, "pixel_box", None)
    return box if box is not None else pixel_box(item.mask)


def answer_detections_2d(header: Any, masks: Sequence[Any], class_id: str) -> Detection2DArray:
    """The selected masks (core.types.Mask, result order) -> Detection2DArray; ``class_id`` =
    the last executed text prompt."""
    return Detection2DArray(header=header, detections=[
        detection_2d(header, str(index), _box_of(mask), class_id, mask.score)
        for index, mask in enumerate(masks, start=1)])


def answer_detections_3d(header: Any, masks: Sequence[Any],
                         boxes: Sequence[dict[str, Any] | None], class_id: str
                         ) -> Detection3DArray:
    """One Detection3D per mask whose box is not None (``boxes`` parallel to ``masks``)."""
    if len(boxes) != len(masks):
        raise ValueError(f"{len(masks)} masks but {len(boxes)} boxes")
    return Detection3DArray(header=header, detections=[
        detection_3d(header, str(index), box, class_id, mask.score)
        for index, (mask, box) in enumerate(zip(masks, boxes), start=1) if box is not None])


def concept_detections_2d(header: Any, detections: Sequence[Any]) -> Detection2DArray:
    """Standing concepts (concepts.types.ConceptDetection) -> Detection2DArray: ``class_id`` =
    the concept, ``id`` = the stable instance id."""
    return Detection2DArray(header=header, detections=[
        detection_2d(header, str(d.id), _box_of(d), d.concept, d.score) for d in detections])


def concept_detections_3d(header: Any, detections: Sequence[Any],
                          boxes: Sequence[dict[str, Any] | None]) -> Detection3DArray:
    """One Detection3D per concept instance whose box is not None (``boxes`` parallel)."""
    if len(boxes) != len(detections):
        raise ValueError(f"{len(detections)} detections but {len(boxes)} boxes")
    return Detection3DArray(header=header, detections=[
        detection_3d(header, str(d.id), box, d.concept, d.score)
        for d, box in zip(detections, boxes) if box is not None])


def point_cloud(header: Any, points: np.ndarray, colours: np.ndarray) -> PointCloud2:
    """(N, 3) float points + (N, 3) uint8 RGB -> an unorganised PointCloud2, little endian:
    x, y, z float32 and PCL's packed colour (the uint32 0x00RRGGBB, read as float32)."""
    points = np.asarray(points, np.float32).reshape(-1, 3)
    return cloud_message(header, pack_points(points, colours), bool(np.isfinite(points).all()))


def target_cloud(header: Any, cloud: TargetPoints) -> PointCloud2:
    """The target's points (``geometry.target_points``, already in the message's layout) as a
    PointCloud2; ``is_dense`` only when every point is finite (a cloud moved by a transform
    that overflows is not, whatever the lookup promised)."""
    return cloud_message(header, cloud.data, bool(np.isfinite(cloud.points).all()))


_CLOUD_FIELDS = tuple(PointField(name=name, offset=offset, datatype=PointField.FLOAT32, count=1)
                      for name, offset in POINT_FIELDS)


def cloud_message(header: Any, data: bytearray, dense: bool) -> PointCloud2:
    """A PointCloud2 of points already packed as ``target_points.POINT_FIELDS`` say."""
    count = len(data) // POINT_STEP
    msg = PointCloud2(header=header, height=1, width=count, is_bigendian=False,
                      point_step=POINT_STEP, row_step=POINT_STEP * count, is_dense=dense)
    msg.fields = list(_CLOUD_FIELDS)  # shared: messages are never changed once built
    msg.data = data  # a bytearray: the message copies it once
    return msg

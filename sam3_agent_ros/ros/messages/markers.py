"""``~/target`` / ``~/targets`` and the RViz ``~/markers`` of measured masks (interface §5, §8b)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from geometry_msgs.msg import Point, PointStamped, Pose, PoseArray, Vector3
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from sam3_agent_ros import render
from sam3_agent_ros.geometry.measurement import Measurement, posed_indices
from sam3_agent_ros.ros.messages.geometry import box_pose, box_scale, mask_pose, point_msg

# RViz namespaces, the label's text and placement, the smallest drawn extent (a flat face has no
# visible thickness; RViz warns about and hides a zero scale), the sphere of a mask with a
# position but no box.
BOX_NAMESPACE = "sam3_agent/boxes"
LABEL_NAMESPACE = "sam3_agent/labels"
LABEL_CHARS = 48
LABEL_HEIGHT_M = 0.03
LABEL_LIFT_M = 0.03  # towards the camera from the box's near face
MIN_MARKER_SCALE_M = 0.005
POINT_MARKER_M = 0.03
BOX_ALPHA = 0.5


def target_messages(header: Header, measurements: Sequence[Measurement]
                    ) -> tuple[PointStamped | None, PoseArray]:
    """``~/target`` (the point of the first mask, in result order, that has a position: the
    best one that has one; None when none has) and ``~/targets`` (one pose per mask that has a
    position, in result order: its box's centre and orientation, or its position with the
    identity orientation when no box could be fitted). ``measurement.posed_indices`` is the
    rule; the result JSON's ``target_mask_id`` / ``targets_mask_ids`` name the same masks."""
    posed = posed_indices(measurements)
    first = measurements[posed[0]].position if posed else None
    target = PointStamped(header=header, point=point_msg(first)) if first is not None else None
    poses = PoseArray(header=header)
    poses.poses = [pose for pose in (mask_pose(measurements[k]) for k in posed)
                   if pose is not None]
    return target, poses


def marker_messages(header: Header, measurements: Sequence[Measurement],
                    label: str | Sequence[str], ids: Sequence[int] | None = None) -> MarkerArray:
    """``~/markers``: a DELETEALL (the previous answer's markers go), then per mask with a box a
    CUBE (pose and scale = the box, the mask's overlay colour) and a TEXT_VIEW_FACING label
    ``"<label> #<id>"``; a mask with a position but no box gets a SPHERE and the label. ``label``:
    one text for all (the query), or one per mask (standing concepts). ``ids``: the masks' ids
    (default 1..N, as in ``~/labels``). Every marker has ``header``."""
    markers = [Marker(header=header, action=Marker.DELETEALL)]
    texts = ([_marker_text(label)] * len(measurements) if isinstance(label, str)
             else [_marker_text(text) for text in label])
    for index, measured in enumerate(measurements):
        mask_id = ids[index] if ids is not None else index + 1
        box, position = measured.box, measured.position
        if box is None and position is None:
            continue
        red, green, blue = (c / 255.0 for c in render.palette_color(mask_id - 1))
        if box is not None:
            pose = box_pose(box)
            shape = Marker(header=header, ns=BOX_NAMESPACE, id=mask_id, type=Marker.CUBE,
                           action=Marker.ADD, pose=pose,
                           scale=box_scale(box, MIN_MARKER_SCALE_M))
            near = max(float(box.size[2]), MIN_MARKER_SCALE_M) / 2.0
            anchor = pose.position
        else:
            assert position is not None
            anchor = point_msg(position)
            shape = Marker(header=header, ns=BOX_NAMESPACE, id=mask_id, type=Marker.SPHERE,
                           action=Marker.ADD, pose=Pose(position=anchor),
                           scale=Vector3(x=POINT_MARKER_M, y=POINT_MARKER_M, z=POINT_MARKER_M))
            near = POINT_MARKER_M / 2.0
        shape.color = ColorRGBA(r=red, g=green, b=blue, a=BOX_ALPHA)
        markers.append(shape)
        markers.append(Marker(
            header=header, ns=LABEL_NAMESPACE, id=mask_id, type=Marker.TEXT_VIEW_FACING,
            action=Marker.ADD, pose=Pose(position=_towards_camera(anchor, near + LABEL_LIFT_M)),
            scale=Vector3(z=LABEL_HEIGHT_M), color=ColorRGBA(r=red, g=green, b=blue, a=1.0),
            text=f"{texts[index]} #{mask_id}"))
    return MarkerArray(markers=markers)


def _towards_camera(point: Point, distance: float) -> Point:
    """``point`` moved ``distance`` towards the camera (the optical frame's origin)."""
    length = float(np.sqrt(point.x ** 2 + point.y ** 2 + point.z ** 2))
    if length <= distance or length == 0.0:
        return Point(x=point.x, y=point.y, z=point.z)
    keep = 1.0 - distance / length
    return Point(x=point.x * keep, y=point.y * keep, z=point.z * keep)


def _marker_text(text: str) -> str:
    """A query as one short line for an RViz label."""
    line = " ".join(str(text).split())
    return line if len(line) <= LABEL_CHARS else line[:LABEL_CHARS - 1] + "\u2026"

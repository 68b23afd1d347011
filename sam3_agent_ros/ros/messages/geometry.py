"""Typed 3D values (``geometry.measurement``) as geometry_msgs: the one place they convert."""

from __future__ import annotations

from geometry_msgs.msg import Point, Pose, Quaternion, Vector3

from sam3_agent_ros.geometry.measurement import BoxValue, Measurement, Vec3


def point_msg(position: Vec3) -> Point:
    x, y, z = position
    return Point(x=float(x), y=float(y), z=float(z))


def box_pose(box: BoxValue) -> Pose:
    """The pose of a box: its centre and orientation."""
    x, y, z, w = box.orientation
    return Pose(position=point_msg(box.center),
                orientation=Quaternion(x=float(x), y=float(y), z=float(z), w=float(w)))


def box_scale(box: BoxValue, floor: float = 0.0) -> Vector3:
    """A box's size, each axis at least ``floor``."""
    x, y, z = (max(float(v), floor) for v in box.size)
    return Vector3(x=x, y=y, z=z)


def mask_pose(measurement: Measurement) -> Pose | None:
    """A measured mask's pose: its box's, else its position with the identity orientation;
    None without a position."""
    if measurement.position is None:
        return None
    if measurement.box is not None:
        return box_pose(measurement.box)
    return Pose(position=point_msg(measurement.position))
